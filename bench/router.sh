#!/usr/bin/env bash
# router.sh: metadata operations through a federation router against the
# same partition directly, in one run.
#
# Starts one metadata partition (`canopy meta`, which keeps the tables) and
# one router in front of it (`canopy router`), all on loopback, and runs
# `canopy bench meta` alternately against the partition and through the
# router for several rounds: stat and create, 16 threads. Prints each
# round's ops/s and the ratio of the medians (router / direct).
#
# Usage: bench/router.sh [ROUNDS] [SECONDS]   (defaults: 3 rounds, 5 s each)
# Environment: THREADS (16), META_PORT (9511), ROUTER_PORT (9611),
# ROUTER_PROCS (the router's GOMAXPROCS; default: the CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${1:-3}
SECS=${2:-5}
THREADS=${THREADS:-16}
META=127.0.0.1:${META_PORT:-9511}
ROUTER=127.0.0.1:${ROUTER_PORT:-9611}

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# wait_for FILE: wait until FILE says "ready".
wait_for() {
	for _ in $(seq 100); do grep -q ready "$1" && return; sleep 0.1; done
	echo "not ready: $1" >&2; cat "$1" "${1%.out}.err" >&2; exit 1
}

go build -o "$work/canopy" ./cmd/canopy
c=$work/canopy
"$c" meta --dir "$work/p0" --listen "$META" --partition 0 >"$work/meta.out" 2>"$work/meta.err" &
pids+=($!)
wait_for "$work/meta.out"
"$c" routing set 0 "$META" --addr "$META" >/dev/null
GOMAXPROCS=${ROUTER_PROCS:-} "$c" router --listen "$ROUTER" --root "$META" >"$work/router.out" 2>"$work/router.err" &
pids+=($!)
wait_for "$work/router.out"

# rate OP ADDR: ops/s of one bench round.
rate() {
	local files=1000
	[ "$1" = create ] && files=1000000
	"$c" bench meta --op "$1" --threads "$THREADS" --files "$files" --duration "${SECS}s" \
		--rounds 1 --ceiling-time 0 --json --addr "$2" 2>/dev/null |
		tail -1 | sed -n 's/.*"ops_per_sec":\([0-9.]*\).*/\1/p' | cut -d. -f1
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

echo "# canopy bench meta, $THREADS threads, direct vs through a router; $(nproc) CPUs; $(date -u +%Y-%m-%dT%H:%MZ)"
echo "| op | round | direct ops/s | router ops/s | ratio |"
echo "|---|---|---:|---:|---:|"
for op in stat create; do
	: >"$work/$op.direct"
	: >"$work/$op.router"
	for r in $(seq "$ROUNDS"); do
		d=$(rate "$op" "$META")
		x=$(rate "$op" "$ROUTER")
		echo "$d" >>"$work/$op.direct"
		echo "$x" >>"$work/$op.router"
		echo "| $op | $r | $d | $x | $(awk -v a="$x" -v b="$d" 'BEGIN { printf "%.2f", a / b }') |"
	done
	d=$(median <"$work/$op.direct")
	x=$(median <"$work/$op.router")
	echo "| $op | median | $d | $x | $(awk -v a="$x" -v b="$d" 'BEGIN { printf "%.2f", a / b }') |"
done
