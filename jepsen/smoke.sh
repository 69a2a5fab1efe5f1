#!/usr/bin/env bash
# make jepsen-smoke (CI): one 3-node mutex run with every kind of fault —
# partitions, kill, pause, clock steps and membership changes, each drawn
# at least once — then the four negative controls side by side, on
# clusters of their own (compose project, subnet and host ports). About
# four minutes.
#
# Exit status: non-zero if any run was not judged as expected.
set -uo pipefail
cd "$(dirname "$0")/.."
go build -o bin/lockjepsen ./jepsen/cmd/lockjepsen || exit 1
mkdir -p jepsen/results

bin/lockjepsen --nodes 3 --workload mutex --nemesis partition,kill,pause,clock,membership --hold-ttl 3s \
	--time 90s --interval 6s --fault-duration 8s 2>&1 | tee jepsen/results/smoke-main.log
[ "${PIPESTATUS[0]}" = 0 ] || exit 1

# The run must have applied a clock fault and a membership change, not
# only drawn them: results.json counts a fault that failed to apply as
# "<name> (failed)".
dir=$(sed -n 's/.* run [^ ]* (seed [^)]*) -> \(.*\)$/\1/p' jepsen/results/smoke-main.log | head -n 1)
faults=$(tr -d '\n' <"$dir/results.json" | grep -o '"faults": *{[^}]*}')
echo "smoke faults: $faults"
for kind in clock member; do
	if ! grep -Eq "\"$kind-[a-z-]+\": *[1-9]" <<<"$faults"; then
		echo "smoke: no $kind fault was applied in $dir" >&2
		exit 1
	fi
done

# negative SLOT FLAGS...: one negative control on cluster SLOT.
negative() {
	local slot=$1 log
	shift
	log="jepsen/results/smoke-negative-$slot.log"
	bin/lockjepsen --build=false --project "lockd-smoke-$slot" --subnet "10.77.7$slot" --port-prefix "19$slot" \
		--nodes 3 --workload mutex "$@" >"$log" 2>&1
	local rc=$?
	echo "exit $rc: $* ($(tail -n 1 "$log"))"
	return $rc
}

status=0
pids=()
# Each argument is one run's flags (split on spaces); the four run side by
# side, each on its own cluster. The wall-clock control holds the lock
# 300 ms a time, so that a step of the leader's clock lands in a hold.
slot=0
for run in "--nemesis none --time 15s --negative no-consensus" \
	"--nemesis clock --hold-ttl 2s --hold 300ms --time 40s --interval 3s --fault-duration 5s --negative wall-clock" \
	"--nemesis none --time 15s --negative intruder-admin" \
	"--nemesis membership,kill --time 40s --interval 3s --fault-duration 5s --liveness 5s --negative lone-replacement"; do
	# shellcheck disable=SC2086
	negative $slot $run &
	pids+=($!)
	slot=$((slot + 1))
done
for p in "${pids[@]}"; do
	wait "$p" || status=1
done
exit $status
