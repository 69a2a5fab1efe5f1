#!/usr/bin/env bash
# The full Jepsen matrix of docs/jepsen.md: every workload x {partition,
# kill, pause, mixed} x {3, 5} nodes, then the negative controls.
# Runs JOBS clusters side by side (each with its own compose project,
# subnet and host ports); every run writes jepsen/results/<run>/.
#
#   TIME=3m JOBS=3 jepsen/matrix.sh            # everything (about an hour)
#   TIME=3m jepsen/matrix.sh mutex rw          # some workloads only
#   NEGATIVE=0 ...                             # without the negative controls
#   FAULTS="clock membership" EXTRA="--hold-ttl 3s" ...
#                                              # other nemeses, more run flags
#
# Exit status: non-zero if any run was not judged as expected.
set -uo pipefail
cd "$(dirname "$0")/.."
TIME=${TIME:-3m}
JOBS=${JOBS:-3}
WORKLOADS=${*:-mutex semaphore rw multi deadlock hierarchy}
FAULTS=${FAULTS:-partition kill pause mixed}
EXTRA=${EXTRA:-}

make jepsen-image >/dev/null || exit 1
go build -o bin/lockjepsen ./jepsen/cmd/lockjepsen || exit 1
mkdir -p jepsen/results

runs() {
	for n in 3 5; do
		for w in $WORKLOADS; do
			for nem in $FAULTS; do
				echo "--nodes $n --workload $w --nemesis $nem --time $TIME $EXTRA"
			done
		done
	done
	if [ "${NEGATIVE:-1}" = 1 ]; then
		echo "--nodes 3 --workload mutex --nemesis pause --time 90s --negative unfenced"
		echo "--nodes 3 --workload mutex --nemesis none --time 60s --negative no-consensus"
		echo "--nodes 5 --workload semaphore --nemesis partition --time 60s --negative no-consensus"
		echo "--nodes 3 --workload mutex --nemesis clock --hold-ttl 2s --time 60s --interval 4s --fault-duration 6s --negative wall-clock"
		echo "--nodes 5 --workload semaphore --nemesis clock --hold-ttl 2s --time 60s --interval 4s --fault-duration 6s --negative wall-clock"
		echo "--nodes 3 --workload mutex --nemesis membership,kill --time 60s --interval 4s --fault-duration 6s --negative lone-replacement"
		echo "--nodes 3 --workload mutex --nemesis disk --time 60s --interval 4s --fault-duration 6s --negative lying-disk"
		echo "--nodes 3 --workload mutex --nemesis disk-fail-crash --time 60s --interval 4s --fault-duration 6s --negative lying-disk"
		echo "--nodes 3 --workload mutex --nemesis partition,kill --snapshot-threshold 64 --trailing-logs 32 --time 60s --negative stale-snapshot"
		echo "--nodes 3 --workload mutex --nemesis upgrade --time 60s --interval 4s --fault-duration 6s --negative ungated-upgrade"
		echo "--nodes 3 --workload mutex --nemesis clock --hold-ttl 3s --time 60s --negative hold-past-ttl"
	fi
}

# one takes a free slot (flock) and runs one configuration in it.
one() {
	for slot in $(seq 0 $((JOBS - 1))); do
		exec {fd}>"jepsen/results/.slot$slot"
		if flock -n "$fd"; then
			log="jepsen/results/run-$(echo "$1" | tr -cs 'a-z0-9\n' '_').log"
			# shellcheck disable=SC2086
			bin/lockjepsen --build=false --project "lockd-jepsen-$slot" --subnet "10.77.6$slot" \
				--port-prefix "18$slot" $1 >"$log" 2>&1
			rc=$?
			echo "exit $rc: $1 ($(tail -n 1 "$log"))"
			return $rc
		fi
		exec {fd}>&-
	done
	echo "no free slot for: $1" >&2
	return 1
}
export -f one
export JOBS

runs "$@" | xargs -P "$JOBS" -I{} bash -c 'one "$@"' _ {}
