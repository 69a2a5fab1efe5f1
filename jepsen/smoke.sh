#!/usr/bin/env bash
# make jepsen-smoke (CI): one 3-node mutex run with every kind of fault —
# partitions, kill, pause, clock steps and membership changes, each drawn
# at least once — then the four negative controls side by side, on
# clusters of their own (compose project, subnet and host ports), and
# beside them, on a fifth, a short election run under partitions, kills,
# pauses and clock steps followed by its control, stale-proclaim. About
# four minutes.
#
# Each control's nemesis aims at the condition it breaks, and lockjepsen
# says whether that condition happened (docs/jepsen.md, "Negative
# controls"): a control whose condition did not happen (exit 3, "not
# exercised") runs again with a new seed, at most twice; one that was
# exercised and not flagged fails the smoke.
#
# `jepsen/smoke.sh controls` runs the controls and the election runs only.
#
# Exit status: non-zero if any run was not judged as expected.
set -uo pipefail
cd "$(dirname "$0")/.."
go build -o bin/lockjepsen ./jepsen/cmd/lockjepsen || exit 1
mkdir -p jepsen/results

if [ "${1:-}" = controls ]; then
	make -s jepsen-image >/dev/null || exit 1
else
	bin/lockjepsen --nodes 3 --workload mutex --nemesis partition,kill,pause,clock,membership --hold-ttl 3s \
		--time 90s --interval 6s --fault-duration 8s 2>&1 | tee jepsen/results/smoke-main.log
	[ "${PIPESTATUS[0]}" = 0 ] || exit 1

	# The run must have drawn a clock fault and a membership change.
	# lockjepsen fails a run that drew faults of a kind and applied none
	# (results.json counts a fault that failed to apply as "<name>
	# (failed)"); this needs one of each applied.
	dir=$(sed -n 's/.* run [^ ]* (seed [^)]*) -> \(.*\)$/\1/p' jepsen/results/smoke-main.log | head -n 1)
	faults=$(tr -d '\n' <"$dir/results.json" | grep -o '"faults": *{[^}]*}')
	echo "smoke faults: $faults"
	for kind in clock member; do
		if ! grep -Eq "\"$kind-[a-z-]+\": *[1-9]" <<<"$faults"; then
			echo "smoke: no $kind fault was applied in $dir" >&2
			exit 1
		fi
	done
fi

# control SLOT FLAGS...: one negative control on cluster SLOT (its own
# compose project, subnet and host ports), run again with a new seed
# while its condition did not happen, at most twice.
control() {
	local slot=$1 log rc try
	shift
	for try in 1 2 3; do
		log="jepsen/results/smoke-negative-$slot-try$try.log"
		bin/lockjepsen --build=false --project "lockd-smoke-$slot" --subnet "10.77.7$slot" --port-prefix "19$slot" \
			--nodes 3 --workload mutex "$@" >"$log" 2>&1
		rc=$?
		echo "exit $rc, try $try: $* ($(grep '^control ' "$log" | tail -n 1); $(tail -n 1 "$log"))"
		[ "$rc" = 3 ] || return "$rc"
		[ "$try" = 3 ] || echo "retrying with a new seed: ${*: -1} was not exercised (try $try)"
	done
	echo "${*: -1}: not exercised in 3 tries" >&2
	return 1
}

# election SLOT: the election workload on cluster SLOT, 40 s under
# partitions, kills, pauses and clock steps with hold TTLs (its leaders
# deposed by them), which must be valid; then its negative control,
# stale-proclaim, as control runs it.
election() {
	local slot=$1 log=jepsen/results/smoke-election.log rc
	bin/lockjepsen --build=false --project "lockd-smoke-$slot" --subnet "10.77.7$slot" --port-prefix "19$slot" \
		--nodes 3 --workload election --nemesis partition,kill,pause,clock --hold-ttl 3s \
		--time 40s --interval 4s --fault-duration 6s >"$log" 2>&1
	rc=$?
	echo "exit $rc: election run ($(tail -n 1 "$log"))"
	[ "$rc" = 0 ] || return 1
	control "$slot" --workload election --nemesis none --hold-ttl 1s --time 20s --negative stale-proclaim
}

status=0
pids=()
# Each argument is one run's flags (split on spaces); the four run side by
# side, each on its own cluster, and the election runs on a fifth. Wall-clock: holds of 1-3 s with a hold
# TTL of 10 s, so that a hold granted after a wait still counts when the
# aimed step of the leader's clock (15 s) ends it, and sessions of 30 s,
# which the step does not end. Lone-replacement: 90 s, room for a
# container's replacement on a loaded machine.
slot=0
for run in "--nemesis none --time 15s --negative no-consensus" \
	"--nemesis clock --hold-ttl 10s --hold 2s --ttl 30s --time 45s --interval 3s --negative wall-clock" \
	"--nemesis none --time 15s --negative intruder-admin" \
	"--nemesis membership,kill --time 90s --interval 3s --liveness 5s --negative lone-replacement"; do
	# shellcheck disable=SC2086
	control $slot $run &
	pids+=($!)
	slot=$((slot + 1))
done
election $slot &
pids+=($!)
for p in "${pids[@]}"; do
	wait "$p" || status=1
done
exit $status
