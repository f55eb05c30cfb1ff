#!/usr/bin/env bash
# replicas.sh: the cost of replication, in one run on one machine.
#
# Starts one unreplicated partition (`canopy meta`) and one partition of
# three replicas (`canopy meta --peers`, three processes), all on
# loopback, and runs `canopy bench meta` alternately against each for
# several rounds: durable creates with 64 threads, stat with 16. The
# replicated partition is named by all three addresses (the client finds
# the leader). Prints each round's ops/s and the ratio of the medians
# (3 replicas / 1).
#
# Usage: bench/replicas.sh [ROUNDS] [SECONDS]   (defaults: 3 rounds, 5 s each)
# Environment: CREATE_THREADS (64), STAT_THREADS (16), BASE_PORT (9711:
# the single server; the replicas are BASE+1..BASE+3, Raft on +1000).
# BEFORE=REV also builds revision REV and runs a second group of three on
# it (BASE+4..BASE+6), in the same rounds: a before/after of replication
# in one run, with a column for each group.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${1:-3}
SECS=${2:-5}
CT=${CREATE_THREADS:-64}
ST=${STAT_THREADS:-16}
BASE=${BASE_PORT:-9711}
ONE=127.0.0.1:$BASE
PEERS=127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2)),127.0.0.1:$((BASE + 3))

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

wait_for() {
	for _ in $(seq 600); do grep -q ready "$1" && return; sleep 0.1; done
	echo "not ready: $1" >&2; cat "$1" "${1%.out}.err" >&2; exit 1
}

go build -o "$work/canopy" ./cmd/canopy
c=$work/canopy
"$c" meta --dir "$work/one" --listen "$ONE" --partition 0 >"$work/one.out" 2>"$work/one.err" &
pids+=($!)
for i in 1 2 3; do
	"$c" meta --dir "$work/r$i" --listen "127.0.0.1:$((BASE + i))" --partition 0 --peers "$PEERS" \
		>"$work/r$i.out" 2>"$work/r$i.err" &
	pids+=($!)
done
for f in one r1 r2 r3; do wait_for "$work/$f.out"; done
"$c" --addr "$PEERS" mkdir /warm >/dev/null # waits for the election
OLD=
if [ -n "${BEFORE:-}" ]; then
	OLD=127.0.0.1:$((BASE + 4)),127.0.0.1:$((BASE + 5)),127.0.0.1:$((BASE + 6))
	git worktree add -q --detach "$work/src" "$BEFORE"
	(cd "$work/src" && go build -o "$work/canopy-before" ./cmd/canopy)
	git worktree remove --force "$work/src"
	for i in 4 5 6; do
		"$work/canopy-before" meta --dir "$work/r$i" --listen "127.0.0.1:$((BASE + i))" --partition 0 --peers "$OLD" \
			>"$work/r$i.out" 2>"$work/r$i.err" &
		pids+=($!)
	done
	for f in r4 r5 r6; do wait_for "$work/$f.out"; done
	"$c" --addr "$OLD" mkdir /warm >/dev/null
fi

rate() { # OP THREADS ADDR
	local files=1000
	[ "$1" = create ] && files=1000000
	"$c" bench meta --op "$1" --threads "$2" --files "$files" --duration "${SECS}s" \
		--rounds 1 --ceiling-time 0 --json --addr "$3" 2>/dev/null |
		tail -1 | sed -n 's/.*"ops_per_sec":\([0-9.]*\).*/\1/p' | cut -d. -f1
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

echo "# canopy bench meta, 1 replica vs 3 replicas (Raft); $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
if [ -n "$OLD" ]; then
	echo "| op | threads | round | 1 replica ops/s | 3 replicas ($BEFORE) ops/s | ratio | 3 replicas (now) ops/s | ratio |"
	echo "|---|---:|---|---:|---:|---:|---:|---:|"
	for op in create stat; do
		th=$CT
		[ "$op" = stat ] && th=$ST
		: >"$work/$op.one"
		: >"$work/$op.old"
		: >"$work/$op.three"
		for r in $(seq "$ROUNDS"); do
			a=$(rate "$op" "$th" "$ONE")
			o=$(rate "$op" "$th" "$OLD")
			b=$(rate "$op" "$th" "$PEERS")
			echo "$a" >>"$work/$op.one"
			echo "$o" >>"$work/$op.old"
			echo "$b" >>"$work/$op.three"
			echo "| $op | $th | $r | $a | $o | $(ratio "$o" "$a") | $b | $(ratio "$b" "$a") |"
		done
		a=$(median <"$work/$op.one")
		o=$(median <"$work/$op.old")
		b=$(median <"$work/$op.three")
		echo "| $op | $th | median | $a | $o | $(ratio "$o" "$a") | $b | $(ratio "$b" "$a") |"
	done
	exit 0
fi
echo "| op | threads | round | 1 replica ops/s | 3 replicas ops/s | ratio |"
echo "|---|---:|---|---:|---:|---:|"
for op in create stat; do
	th=$CT
	[ "$op" = stat ] && th=$ST
	: >"$work/$op.one"
	: >"$work/$op.three"
	for r in $(seq "$ROUNDS"); do
		a=$(rate "$op" "$th" "$ONE")
		b=$(rate "$op" "$th" "$PEERS")
		echo "$a" >>"$work/$op.one"
		echo "$b" >>"$work/$op.three"
		echo "| $op | $th | $r | $a | $b | $(awk -v a="$b" -v b="$a" 'BEGIN { printf "%.2f", a / b }') |"
	done
	a=$(median <"$work/$op.one")
	b=$(median <"$work/$op.three")
	echo "| $op | $th | median | $a | $b | $(awk -v a="$b" -v b="$a" 'BEGIN { printf "%.2f", a / b }') |"
done
