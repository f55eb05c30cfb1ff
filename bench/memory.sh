#!/usr/bin/env bash
# memory.sh: memory per file of the metadata engine, in one run.
#
# For each tree size N (files, spread over N/1000 directories, mdtest names):
#   1. canopy bench memory: the tree built in one engine inside one process;
#      resident and Go heap bytes per file, build time, GC pauses, getattr
#      and lookup times.
#   2. a canopy meta server, fresh, filled over RPC by canopy bench fill with
#      the same tree; process_resident_memory_bytes and canopy_meta_inodes
#      read off its metrics endpoint before and after, then again once the
#      idle sweep has finished (canopy_meta_idle_sweep_busy back to 0), the
#      server has returned what it freed, and a forced collection (pprof
#      heap?gc=1) and a pause for the scavenger have passed. Then the
#      server is killed with SIGKILL and started again on its directory:
#      seconds to its ready line and to the first stat it answers.
#   3. Redis for reference (Debian's redis-server, no persistence): the same
#      tree as one hash per directory, field = file name, value = a 64-byte
#      string (the size of the engine's Attr record); used_memory from INFO
#      before and after. The top directory is one more hash, of the
#      directory names.
#
#   4. with --big-dir N: canopy bench memory --big-dir N, one directory of N
#      entries: creates, lookups, paged readdir and rm -r's removal per
#      second at the first and the last million, resident bytes per entry.
#
# Usage: bench/memory.sh [--big-dir N] [--100m] [N...]   (default sizes: 1000000 10000000)
#   --100m adds a 100,000,000-file step, in process only (about 10 GiB and
#   many minutes; META100=1 also fills a canopy meta over RPC, which takes
#   hours, and Redis is skipped at that size).
# Environment: WORKERS (creates in flight for the fill, default 64),
# CONNS (default 4), TIMEOUT (per create, default 10m), SKIP_META=1,
# SKIP_INPROC=1 (no in-process step), SKIP_RESTART=1, SWEEP_WAIT (seconds to wait for the sweep, default 3600),
# SKIP_REDIS=1, OUT (table file, default memory-<date>.md here). Needs
# curl; installs redis-server if missing.
set -euo pipefail
cd "$(dirname "$0")/.."

BIGDIR= HUGE=
sizes=()
while [ $# -gt 0 ]; do
	case "$1" in
	--big-dir) BIGDIR=$2; shift 2 ;;
	--100m) HUGE=1; shift ;;
	*) sizes+=("$1"); shift ;;
	esac
done
if [ ${#sizes[@]} -eq 0 ]; then sizes=(1000000 10000000); fi
if [ -n "$HUGE" ]; then sizes+=(100000000); fi
set -- "${sizes[@]}"
WORKERS=${WORKERS:-64}
CONNS=${CONNS:-4}
# The fill's creates wait out the server's checkpoints, which hold its
# apply loop for seconds at millions of files: give them longer than the
# default 30 s.
TIMEOUT=${TIMEOUT:-10m}
OUT=${OUT:-memory-$(date -u +%Y%m%dT%H%M%SZ).md}
REDIS_PORT=${REDIS_PORT:-6392}
VALUE_BYTES=64

need() { command -v "$1" >/dev/null 2>&1; }
need curl || { echo "memory.sh needs curl" >&2; exit 1; }
if [ -z "${SKIP_REDIS:-}" ] && { ! need redis-server || ! need redis-cli; }; then
	echo "installing redis-server and redis-tools from Debian" >&2
	apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
fi

work=$(mktemp -d)
meta_pid=
stop_meta() {
	if [ -n "$meta_pid" ]; then
		kill "$meta_pid" 2>/dev/null || true
		wait "$meta_pid" 2>/dev/null || true
		meta_pid=
	fi
}
cleanup() {
	stop_meta
	redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/canopy" ./cmd/canopy

# jget KEY: the number KEY holds in the JSON line on stdin.
jget() { sed -n "s/.*\"$1\":\([-0-9.e+]*\).*/\1/p"; }
# per A B N: (B - A) / N with one decimal.
per() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f", (b - a) / n }'; }
# ratio A B: A / B with two decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
# metric ADDR NAME: the value of the unlabelled series NAME on ADDR/metrics.
metric() { curl -sf "http://$1/metrics" | awk -v n="$2" '$1 == n && !seen { printf "%.0f", $2; seen = 1 }'; }

# Rows of the table: size, what, bytes per file, detail.
r_n=() r_what=() r_bytes=() r_detail=()
declare -A redis_per # size -> Redis bytes per file
row() { r_n+=("$1"); r_what+=("$2"); r_bytes+=("$3"); r_detail+=("$4"); }

for N in "$@"; do
	D=$(( N / 1000 > 0 ? N / 1000 : 1 ))
	echo "== $N files in $D directories" >&2

	# 1. In process.
	if [ -z "${SKIP_INPROC:-}" ]; then
	echo "canopy bench memory --files $N --dirs $D" >&2
	if ! j=$("$work/canopy" bench memory --files "$N" --dirs "$D" --json 2>"$work/memory.err" | tail -n 1); then
		echo "canopy bench memory failed:" >&2; tail -n 20 "$work/memory.err" >&2; exit 1
	fi
	echo "$j" >&2
	inproc=$(jget rss_bytes_per_file <<<"$j")
	row "$N" "in process: resident" "$(printf %.1f "$inproc")" \
		"build $(printf %.2f "$(jget build_seconds <<<"$j")") s ($(printf %.0f "$(jget files_per_sec <<<"$j")") files/s); GC pauses p50 $(jget gc_pause_p50_us <<<"$j") µs, p99 $(jget gc_pause_p99_us <<<"$j") µs, max $(jget gc_pause_max_us <<<"$j") µs (bucket bounds; longest cycle $(jget gc_cycle_pause_max_us <<<"$j") µs)"
	row "$N" "in process: Go heap in use" "$(printf %.1f "$(jget heap_bytes_per_file <<<"$j")")" \
		"getattr $(printf %.0f "$(jget getattr_ns <<<"$j")") ns (p99 $(jget getattr_p99_ns <<<"$j")), lookup $(printf %.0f "$(jget lookup_ns <<<"$j")") ns (p99 $(jget lookup_p99_ns <<<"$j"))"
	idle=$(jget rss_bytes_per_file_after_idle <<<"$j")
	if [ -n "$idle" ]; then
		row "$N" "in process: resident after idle compaction" "$(printf %.1f "$idle")" "compaction $(printf %.2f "$(jget idle_seconds <<<"$j")") s"
	fi
	fi

	# 2. A canopy meta server filled over RPC.
	meta=
	skip_meta=${SKIP_META:-}
	skip_redis=${SKIP_REDIS:-}
	if [ "$N" -ge 100000000 ]; then
		[ -n "${META100:-}" ] || skip_meta=1
		skip_redis=1
	fi
	if [ -z "$skip_meta" ]; then
		rm -rf "$work/meta"
		"$work/canopy" meta --dir "$work/meta" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
			>"$work/meta.out" 2>"$work/meta.err" &
		meta_pid=$!
		for _ in $(seq 100); do grep -q "ready at" "$work/meta.out" && break; sleep 0.1; done
		ADDR=$(sed -n 's/.*ready at //p' "$work/meta.out")
		MADDR=$(sed -n 's/.*msg=metrics addr=\([0-9.:]*\).*/\1/p' "$work/meta.err" | head -n 1)
		[ -n "$ADDR" ] && [ -n "$MADDR" ] || { echo "canopy meta did not start" >&2; cat "$work/meta.err" >&2; exit 1; }
		curl -sf "http://$MADDR/debug/pprof/heap?gc=1" >/dev/null
		sleep 2
		rss0=$(metric "$MADDR" process_resident_memory_bytes)
		heap0=$(metric "$MADDR" go_memstats_heap_inuse_bytes)
		nodes0=$(metric "$MADDR" canopy_meta_inodes)
		echo "canopy bench fill --files $N --dirs $D --workers $WORKERS --conns $CONNS" >&2
		if ! f=$("$work/canopy" bench --addr "$ADDR" --timeout "$TIMEOUT" fill --files "$N" --dirs "$D" --workers "$WORKERS" --conns "$CONNS" --json 2>"$work/fill.err" | tail -n 1); then
			echo "canopy bench fill failed:" >&2; tail -n 20 "$work/fill.err" "$work/meta.err" >&2; exit 1
		fi
		echo "$f" >&2
		rss1=$(metric "$MADDR" process_resident_memory_bytes)
		nodes1=$(metric "$MADDR" canopy_meta_inodes)
		# Wait for the idle sweep to finish (it has done work and its
		# gauge reads 0 again: a whole round found nothing left to pack)
		# and for the checkpoint the fill's last records started, if any,
		# to be written (its frozen view keeps a copy of every node chunk
		# the sweep changed meanwhile); then for the memory they freed to
		# be returned (the server does it at most every 10 s), then
		# collect once more.
		sw0=$(date +%s.%N)
		for _ in $(seq "${SWEEP_WAIT:-3600}"); do
			[ "$(metric "$MADDR" canopy_meta_idle_work_total)" != 0 ] &&
				[ "$(metric "$MADDR" canopy_meta_idle_sweep_busy)" = 0 ] &&
				[ "$(metric "$MADDR" canopy_meta_checkpoint_busy)" = 0 ] && break
			sleep 1
		done
		sweep=$(awk -v s="$sw0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.0f", e - s }')
		echo "sweep and checkpoints idle after $sweep s; $(metric "$MADDR" canopy_meta_packed_dirs) directories packed" >&2
		sleep 11
		curl -sf "http://$MADDR/debug/pprof/heap?gc=1" >/dev/null
		sleep 10
		rss2=$(metric "$MADDR" process_resident_memory_bytes)
		heap2=$(metric "$MADDR" go_memstats_heap_inuse_bytes)
		idle2=$(metric "$MADDR" go_memstats_heap_idle_bytes)
		released2=$(metric "$MADDR" go_memstats_heap_released_bytes)
		packed2=$(metric "$MADDR" canopy_meta_packed_dirs)
		if [ -z "${SKIP_RESTART:-}" ]; then
			# Restart after SIGKILL: checkpoint load plus log replay.
			kill -9 "$meta_pid"; wait "$meta_pid" 2>/dev/null || true
			t0=$(date +%s.%N)
			"$work/canopy" meta --dir "$work/meta" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
				>"$work/meta.out" 2>"$work/meta.err" &
			meta_pid=$!
			for _ in $(seq 12000); do grep -q "ready at" "$work/meta.out" && break; sleep 0.02; done
			restart=$(awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
			ADDR=$(sed -n 's/.*ready at //p' "$work/meta.out")
			# The first stat answered after the restart (a file of the
			# last directory: found through the loaded index).
			for _ in $(seq 600); do
				"$work/canopy" --addr "$ADDR" stat "/mdtest_tree.0/mdtest_tree.$D/file.mdtest.0.0" >/dev/null 2>&1 && break
				sleep 0.05
			done
			firststat=$(awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
			MADDR=$(sed -n 's/.*msg=metrics addr=\([0-9.:]*\).*/\1/p' "$work/meta.err" | head -n 1)
			nodes3=$(metric "$MADDR" canopy_meta_inodes)
			recovered=$(sed -n 's/.*msg=recovered //p' "$work/meta.err" | sed 's/dir=[^ ]* //')
			echo "restart: $restart s to ready, $firststat s to the first stat answered; $recovered" >&2
			row "$N" "canopy meta restart after SIGKILL: seconds to ready" "$restart" "first stat answered at $firststat s; canopy_meta_inodes $nodes3 (before the kill $nodes1); $recovered"
		fi
		stop_meta
		meta=$(per "$rss0" "$rss2" "$N")
		row "$N" "canopy meta over RPC: resident right after the fill" "$(per "$rss0" "$rss1" "$N")" \
			"fill $(printf %.1f "$(jget seconds <<<"$f")") s ($(printf %.0f "$(jget files_per_sec <<<"$f")") creates/s, $WORKERS in flight); canopy_meta_inodes $nodes0 to $nodes1"
		row "$N" "canopy meta over RPC: resident after the idle sweep and a forced GC" "$meta" "sweep and checkpoints idle $sweep s after the fill; resident $(( rss0 >> 20 )) MiB before, $(( rss1 >> 20 )) MiB after the fill, $(( rss2 >> 20 )) MiB after the sweep and GC, when the Go heap held $(( idle2 >> 20 )) MiB idle, $(( released2 >> 20 )) MiB of it returned to the OS; ${packed2:-0} directories packed"
		row "$N" "canopy meta over RPC: Go heap in use after GC" "$(per "$heap0" "$heap2" "$N")" ""
	fi

	# 3. Redis, one hash per directory.
	if [ -z "$skip_redis" ]; then
		redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
		for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 || break; sleep 0.1; done
		redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --daemonize yes >/dev/null
		for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
		used() { redis-cli -p "$REDIS_PORT" info memory | tr -d '\r' | sed -n "s/^$1://p"; }
		u0=$(used used_memory)
		start=$(date +%s.%N)
		# HSET key f1 v1 ... f100 v100 in RESP, one hash per directory.
		LC_ALL=C awk -v N="$N" -v D="$D" -v V="$VALUE_BYTES" '
			function bulk(s) { return "$" length(s) "\r\n" s "\r\n" }
			function hset(key, n, body) { printf "*%d\r\n$4\r\nHSET\r\n%s%s", 2 + 2 * n, bulk(key), body }
			BEGIN {
				pad = sprintf("%" (V - 16) "s", ""); gsub(/ /, "x", pad)
				q = int(N / D); r = N % D; ino = 2
				body = ""; n = 0
				for (k = 1; k <= D; k++) {
					body = body bulk("mdtest_tree." k) bulk(sprintf("d%015d", ino + k) pad); n++
					if (n == 100 || k == D) { hset("mdtest_tree.0", n, body); body = ""; n = 0 }
				}
				ino += D
				for (k = 1; k <= D; k++) {
					key = "mdtest_tree.0/mdtest_tree." k
					c = q + (k <= r ? 1 : 0)
					for (i = 0; i < c; i++) {
						body = body bulk("file.mdtest.0." i) bulk(sprintf("f%015d", ++ino) pad); n++
						if (n == 100 || i == c - 1) { hset(key, n, body); body = ""; n = 0 }
					}
				}
			}' | redis-cli -p "$REDIS_PORT" --pipe >"$work/redis-pipe.out"
		secs=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.1f", e - s }')
		u1=$(used used_memory)
		keys=$(redis-cli -p "$REDIS_PORT" dbsize)
		fields=$(redis-cli -p "$REDIS_PORT" hlen "mdtest_tree.0/mdtest_tree.$D")
		redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
		redis=$(per "$u0" "$u1" "$N")
		row "$N" "Redis used_memory, hash per directory, ${VALUE_BYTES}-byte values" "$redis" \
			"$keys hashes, $fields fields in the last; loaded in $secs s with redis-cli --pipe; $(tail -n 1 "$work/redis-pipe.out")"
		redis_per[$N]=$redis
	fi
done

# 4. One big directory, in process.
if [ -n "$BIGDIR" ]; then
	echo "canopy bench memory --big-dir $BIGDIR" >&2
	if ! j=$("$work/canopy" bench memory --big-dir "$BIGDIR" --json 2>"$work/bigdir.err" | tail -n 1); then
		echo "canopy bench memory --big-dir failed:" >&2; tail -n 20 "$work/bigdir.err" >&2; exit 1
	fi
	echo "$j" >&2
	# rates NAME: "first/s to last/s (ratio)" of the pass NAME.
	rates() { sed -n "s/.*\"$1\":{\"first_per_sec\":\([0-9.e+]*\),\"last_per_sec\":\([0-9.e+]*\),\"ratio\":\([0-9.e+]*\)}.*/\1 \2 \3/p" <<<"$j" | awk '{ printf "%.0f/s to %.0f/s (%.2f)", $1, $2, $3 }'; }
	row "$BIGDIR" "one directory of N entries: resident per entry" "$(printf %.1f "$(jget rss_bytes_per_entry <<<"$j")")" \
		"first and last million: creates $(rates creates); lookups $(rates lookups) growing, $(rates lookups_at) of the first and last names; readdir $(rates readdir); rm -r $(rates removes); first page $(printf %.2f "$(jget first_page_seconds <<<"$j")") s"
fi

{
	echo "Memory per file on $(hostname) ($(nproc) cores), $(date -u +%Y-%m-%dT%H:%MZ); trees of N files over N/1000 directories, mdtest names"
	echo
	echo "| files | what | bytes per file | vs. Redis | detail |"
	echo "|---|---|---|---|---|"
	for i in "${!r_n[@]}"; do
		vs=n/a
		[ -n "${redis_per[${r_n[$i]}]:-}" ] && vs=$(ratio "${r_bytes[$i]}" "${redis_per[${r_n[$i]}]}")
		echo "| ${r_n[$i]} | ${r_what[$i]} | ${r_bytes[$i]} | $vs | ${r_detail[$i]} |"
	done
} | tee "$OUT"
