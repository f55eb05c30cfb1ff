#!/usr/bin/env bash
# compare.sh: Canopy against Redis on this machine, in one run.
#
# Starts redis-server and `canopy up` on loopback, runs redis-benchmark and
# the matching `canopy bench` alternately for several rounds, and prints a
# table of ratios (Canopy / Redis):
#
#   null call vs PING, stat vs GET, durable create vs SET with
#   appendfsync always (and vs everysec, the relaxed setting),
#   each at 1 and at 50 clients.
#
# Usage: bench/compare.sh [ROUNDS] [SECONDS]   (defaults: 3 rounds, 3 s each)
# Writes the table to stdout and to $OUT (default: compare-<date>.md here).
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${1:-3}
SECS=${2:-3}
OUT=${OUT:-compare-$(date -u +%Y%m%dT%H%M%SZ).md}
REDIS_PORT=${REDIS_PORT:-6391}

need() { command -v "$1" >/dev/null 2>&1; }
if ! need redis-server || ! need redis-benchmark; then
	echo "installing redis-server and redis-tools from Debian" >&2
	apt-get update -qq && apt-get install -y -qq redis-server redis-tools >/dev/null
fi

work=$(mktemp -d)
cleanup() {
	redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
	[ -n "${canopy_pid:-}" ] && kill "$canopy_pid" 2>/dev/null && wait "$canopy_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/canopy" ./cmd/canopy
"$work/canopy" up --dir "$work/canopy-data" --listen 127.0.0.1:0 --trash-days 0 >"$work/up.out" 2>"$work/up.err" &
canopy_pid=$!
for _ in $(seq 100); do grep -q "ready at" "$work/up.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/.*ready at //p' "$work/up.out")
[ -n "$ADDR" ] || { echo "canopy up did not start" >&2; cat "$work/up.err" >&2; exit 1; }

# redis_start FSYNC: (re)start redis with the AOF fsync policy (no = no AOF).
redis_start() {
	redis-cli -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
	for _ in $(seq 100); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 || break; sleep 0.1; done
	rm -rf "$work/appendonlydir"
	local aof=(--appendonly no)
	[ "$1" != no ] && aof=(--appendonly yes --appendfsync "$1")
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --dir "$work" --daemonize yes "${aof[@]}" >/dev/null
	for _ in $(seq 50); do redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return; sleep 0.1; done
	echo "redis-server did not start" >&2; exit 1
}

# redis_rate TEST CLIENTS N: requests per second of one redis-benchmark test.
redis_rate() {
	redis-benchmark -p "$REDIS_PORT" -t "$1" -c "$2" -n "$3" -P 1 --csv 2>/dev/null |
		awk -F'"' 'NR > 1 && $2 != "" { print $4; exit }'
}

# canopy_rate ARGS...: ops_per_sec from the last JSON line of canopy bench.
canopy_rate() {
	"$work/canopy" bench --addr "$ADDR" "$@" --duration "${SECS}s" --warmup 1s --rounds 1 \
		--ceiling-time 0s --json 2>/dev/null | tail -n 1 | sed -n 's/.*"ops_per_sec":\([0-9.e+]*\).*/\1/p'
}

declare -A sum cnt
add() { sum[$1]=$(awk -v a="${sum[$1]:-0}" -v b="$2" 'BEGIN { print a + b }'); cnt[$1]=$(( ${cnt[$1]:-0} + 1 )); }

for round in $(seq "$ROUNDS"); do
	echo "round $round/$ROUNDS" >&2
	for c in 1 50; do
		# A request count that lasts about SECS seconds at the rates seen here.
		fast=$(( c == 1 ? 25000 * SECS : 45000 * SECS ))
		redis_start no
		add "ping/$c" "$(redis_rate ping_mbulk "$c" "$fast")"
		add "null/$c" "$(canopy_rate rpc --clients "$c")"
		add "get/$c" "$(redis_rate get "$c" "$fast")"
		add "stat/$c" "$(canopy_rate meta --op stat --threads "$c" --files 1000)"
		redis_start always
		add "set-always/$c" "$(redis_rate set "$c" $(( c == 1 ? 2500 * SECS : 20000 * SECS )))"
		add "create/$c" "$(canopy_rate meta --op create --threads "$c" --files $(( c == 1 ? 4000 * SECS : 1000 * SECS )))"
		redis_start everysec
		add "set-everysec/$c" "$(redis_rate set "$c" "$fast")"
	done
done

avg() { awk -v s="${sum[$1]}" -v n="${cnt[$1]}" 'BEGIN { printf "%.0f", s / n }'; }
ratio() { awk -v a="$(avg "$1")" -v b="$(avg "$2")" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

{
	echo "Canopy vs Redis on $(hostname) ($(nproc) cores), $(date -u +%Y-%m-%dT%H:%MZ), $ROUNDS rounds of ${SECS}s, mean rates (ops/s)"
	echo
	echo "| Canopy | Redis | clients | Canopy ops/s | Redis ops/s | Canopy / Redis |"
	echo "|---|---|---|---|---|---|"
	for c in 1 50; do
		echo "| null call | PING | $c | $(avg null/$c) | $(avg ping/$c) | $(ratio null/$c ping/$c) |"
		echo "| stat | GET | $c | $(avg stat/$c) | $(avg get/$c) | $(ratio stat/$c get/$c) |"
		echo "| durable create | SET, appendfsync always | $c | $(avg create/$c) | $(avg set-always/$c) | $(ratio create/$c set-always/$c) |"
		echo "| durable create | SET, appendfsync everysec | $c | $(avg create/$c) | $(avg set-everysec/$c) | $(ratio create/$c set-everysec/$c) |"
	done
} | tee "$OUT"
