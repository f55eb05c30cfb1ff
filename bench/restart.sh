#!/usr/bin/env bash
# restart.sh: time a canopy meta restart after SIGKILL on a partition's
# directory: from exec to the ready line, and to the first stat answered.
#
# Each round copies DIR (a canopy meta --dir: checkpoints plus the log
# after them, as a SIGKILL leaves it) to a scratch directory, starts
# canopy meta on the copy, waits for "ready at" (a blocking read of its
# standard output through a FIFO, so that the wait takes no CPU from the
# restart), stats PATH until it is
# answered, reads the CPU time the process had used by then from
# /proc/PID/stat, and kills the server with SIGKILL. The recovery line
# the server logs (checkpoint load and log replay seconds) is printed
# with each round. With several binaries (CANOPY="old new"), the rounds
# alternate between them, so that each sees the same machine.
#
# Usage: bench/restart.sh DIR [ROUNDS]   (default 3 rounds)
# Environment: CANOPY (binaries, space-separated; default: built from this
# checkout), STAT (path to stat; default /), TIMEOUT (seconds to wait for
# ready, default 600).
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${1:?usage: bench/restart.sh DIR [ROUNDS]}
ROUNDS=${2:-3}
STAT=${STAT:-/}
TIMEOUT=${TIMEOUT:-600}

work=$(mktemp -d)
pid=
cleanup() {
	if [ -n "$pid" ]; then kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

if [ -z "${CANOPY:-}" ]; then
	go build -o "$work/canopy" ./cmd/canopy
	CANOPY=$work/canopy
fi
ticks=$(getconf CLK_TCK)
now() { date +%s.%N; }
since() { awk -v s="$1" -v e="$(now)" 'BEGIN { printf "%.2f", e - s }'; }

echo "| round | binary | to ready (s) | to first stat (s) | CPU to ready (s) | recovered |"
echo "|---|---|---|---|---|---|"
for r in $(seq "$ROUNDS"); do
	for bin in $CANOPY; do
		rm -rf "$work/meta"
		cp -a "$DIR" "$work/meta"
		sync
		rm -f "$work/fifo"
		mkfifo "$work/fifo"
		t0=$(now)
		"$bin" meta --dir "$work/meta" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
			>"$work/fifo" 2>"$work/err" &
		pid=$!
		ready= first= cpu=
		# A blocking read of the server's first line: polling for it
		# (a grep and a sleep every 20 ms) took CPU from the restart on
		# a two-core machine and added about a second to it.
		exec 3<"$work/fifo"
		line=
		read -r -t "$TIMEOUT" line <&3 || true
		echo "$line" >"$work/out"
		if [[ $line == *"ready at"* ]]; then
			ready=$(since "$t0")
			cpu=$(awk -v t="$ticks" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$pid/stat")
			addr=$(sed -n 's/.*ready at //p' "$work/out")
			for _ in $(seq 1000); do
				"$bin" --addr "$addr" stat "$STAT" >/dev/null 2>&1 && break
				sleep 0.02
			done
			first=$(since "$t0")
		fi
		recovered=$(sed -n 's/.*msg=recovered //p' "$work/err" | sed 's/dir=[^ ]* //')
		echo "| $r | $(basename "$bin") | ${ready:-failed} | ${first:-} | ${cpu:-} | $recovered |"
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		exec 3<&-
		pid=
	done
done
