#!/usr/bin/env bash
# make jepsen-smoke (CI): one 3-node mutex run with every kind of fault —
# partitions, kill, pause, clock steps and membership changes, each drawn
# at least once — then the negative controls, two at a time on clusters of
# their own (compose project, subnet and host ports). About four minutes.
#
# Exit status: non-zero if any run was not judged as expected.
set -uo pipefail
cd "$(dirname "$0")/.."
go build -o bin/lockjepsen ./jepsen/cmd/lockjepsen || exit 1
mkdir -p jepsen/results

bin/lockjepsen --nodes 3 --workload mutex --nemesis partition,kill,pause,clock,membership --hold-ttl 3s \
	--time 90s --interval 6s --fault-duration 8s || exit 1

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
# pair RUN0 RUN1: two negative controls side by side; each argument is one
# run's flags (split on spaces).
pair() {
	# shellcheck disable=SC2086
	negative 0 $1 &
	local a=$!
	# shellcheck disable=SC2086
	negative 1 $2 &
	local b=$!
	wait $a || status=1
	wait $b || status=1
}
pair "--nemesis none --time 15s --negative no-consensus" \
	"--nemesis clock --hold-ttl 2s --time 35s --interval 3s --fault-duration 5s --negative wall-clock"
pair "--nemesis none --time 15s --negative intruder-admin" \
	"--nemesis membership,kill --time 40s --interval 3s --fault-duration 5s --liveness 5s --negative lone-replacement"
exit $status
