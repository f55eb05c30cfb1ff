#!/usr/bin/env bash
# checkpoint.sh: what a checkpoint costs the requests of a large partition.
#
# Starts canopy meta on a copy of DIR (a partition's metadata directory,
# for example one written by `canopy bench memory --files 100m --save`),
# then alternates rounds of `canopy bench meta --op stat --threads 16`:
# one while no checkpoint is being written, one while one is (the
# canopy_meta_checkpoint_busy gauge is 1 from the round's start to its
# end; a round during which it changed is thrown away and run again).
# To start a checkpoint it creates files (64 threads) until the gauge
# turns 1, then stops creating. At the end it prints the stat latencies
# of both kinds of rounds and the apply loop's pauses for the checkpoints
# (the canopy_meta_checkpoint_pause_seconds histogram: count, sum and
# buckets).
#
# Usage: bench/checkpoint.sh DIR [ROUNDS]   (default 3 rounds of each kind)
# Environment: CANOPY (binary; default: built from this checkout),
# DURATION (of a stat round, default 5s), TIMEOUT (seconds to wait for
# ready, and for the idle sweep, default 900), SWEEP_WAIT=0 (start the
# rounds without waiting for the idle sweep to finish).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${1:?usage: bench/checkpoint.sh DIR [ROUNDS]}
ROUNDS=${2:-3}
DURATION=${DURATION:-5s}
TIMEOUT=${TIMEOUT:-900}

work=$(mktemp -d)
pid=
creator=
cleanup() {
	if [ -n "$creator" ]; then kill "$creator" 2>/dev/null || true; wait "$creator" 2>/dev/null || true; fi
	if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${CANOPY:-}" ]; then
	go build -o "$work/canopy" ./cmd/canopy
	CANOPY=$work/canopy
fi

cp -a "$DIR" "$work/meta"
sync
mkfifo "$work/fifo"
"$CANOPY" meta --dir "$work/meta" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
	>"$work/fifo" 2>"$work/err" &
pid=$!
exec 3<"$work/fifo"
line=
read -r -t "$TIMEOUT" line <&3 || true
if [[ $line != *"ready at"* ]]; then
	echo "checkpoint.sh: the server did not start: $line" >&2
	cat "$work/err" >&2
	exit 1
fi
addr=${line##*ready at }
metrics=
for _ in $(seq 100); do
	metrics=$(sed -n 's/.*msg=metrics addr=\([^ ]*\).*/\1/p' "$work/err" | head -1)
	[ -n "$metrics" ] && break
	sleep 0.1
done
[ -n "$metrics" ] || { echo "checkpoint.sh: no metrics address in the server's log" >&2; cat "$work/err" >&2; exit 1; }

busy() { curl -fsS "http://$metrics/metrics" | awk '$1 == "canopy_meta_checkpoint_busy" { print $2 }'; }
gauge() { curl -fsS "http://$metrics/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }

# The idle sweep packs the directories of a freshly loaded partition
# (minutes at 100 million files): rounds taken meanwhile measure it, not
# the checkpoints. Wait for it to have worked and finished (or, if it has
# found nothing to do after 30 s, for nothing); SWEEP_WAIT=0: do not wait.
if [ "${SWEEP_WAIT:-1}" != 0 ]; then
	for i in $(seq "$TIMEOUT"); do
		swept=$(gauge canopy_meta_idle_work_total)
		if [ "$swept" != 0 ] && [ "$(gauge canopy_meta_idle_sweep_busy)" = 0 ]; then break; fi
		if [ "$swept" = 0 ] && [ "$i" -gt 30 ]; then break; fi
		sleep 1
	done
	echo "idle sweep done after ${i} s: $(gauge canopy_meta_packed_dirs) directories packed" >&2
fi

# stat_round prints one stat round's JSON line (each round makes its
# 16,000 files first, in a directory of its own, and keeps them).
stat_round() {
	if ! "$CANOPY" --addr "$addr" bench meta --op stat --threads 16 --files 1000 --duration "$DURATION" \
		--rounds 1 --warmup 0 --ceiling-time 0 --dir "/ckpt-bench-stat-$(date +%s%N)" --keep --json \
		>"$work/bench.out" 2>"$work/bench.err"; then
		echo "checkpoint.sh: stat round failed:" >&2
		cat "$work/bench.err" >&2
		return 1
	fi
	tail -1 "$work/bench.out"
}

: >"$work/quiet.jsonl"
: >"$work/busy.jsonl"
for r in $(seq "$ROUNDS"); do
	# Without a checkpoint.
	while :; do
		while [ "$(busy)" = 1 ]; do sleep 1; done
		out=$(stat_round)
		if [ "$(busy)" = 0 ]; then
			echo "$out" >>"$work/quiet.jsonl"
			break
		fi
	done
	# During one: create files until a checkpoint starts.
	while :; do
		"$CANOPY" --addr "$addr" bench meta --op create --threads 64 --files 100000 --rounds 1 \
			--warmup 0 --ceiling-time 0 --dir "/ckpt-bench-create-$r-$RANDOM" --keep >/dev/null 2>&1 &
		creator=$!
		while [ "$(busy)" != 1 ] && kill -0 "$creator" 2>/dev/null; do sleep 0.2; done
		kill "$creator" 2>/dev/null || true
		wait "$creator" 2>/dev/null || true
		creator=
		[ "$(busy)" = 1 ] || continue
		out=$(stat_round)
		if [ "$(busy)" = 1 ]; then
			echo "$out" >>"$work/busy.jsonl"
			break
		fi
	done
	echo "round $r done" >&2
done

row() {
	jq -r --arg kind "$1" '"| \($kind) | \(.ops_per_sec | floor) | \(.p50_us) | \(.p99_us) | \(.p999_us) | \(.max_us) |"' "$2"
}
echo "| stat round, 16 threads | ops/s | p50 µs | p99 µs | p99.9 µs | max µs |"
echo "|---|---:|---:|---:|---:|---:|"
row "no checkpoint" "$work/quiet.jsonl"
row "checkpoint being written" "$work/busy.jsonl"
echo
echo "apply-loop pauses for checkpoints (canopy_meta_checkpoint_pause_seconds):"
curl -fsS "http://$metrics/metrics" | grep '^canopy_meta_checkpoint_\(pause\|encode\)_seconds' 
grep -i "checkpoint" "$work/err" | tail -5
