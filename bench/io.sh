#!/usr/bin/env bash
# io.sh: Canopy's file I/O against this disk's own sequential bandwidth, in
# one run.
#
# Measures the disk with fio (1 MiB sequential direct writes, then reads,
# of FILES x SIZE in the directory the object store uses), starts
# `canopy up` with its objects there, and runs `canopy bench io` for large
# files and for small ones. Prints the figures and the ratios.
#
# Usage: bench/io.sh [FILES] [SIZE] [WORKERS] [SMALL_FILES]
#        (defaults: 4 1GiB 4 10000; small files are 4 KiB)
# The work directory is $DIR (default: a new one under /tmp), removed after.
set -euo pipefail
cd "$(dirname "$0")/.."

FILES=${1:-4}
SIZE=${2:-1GiB}
WORKERS=${3:-4}
SMALL=${4:-10000}

if ! command -v fio >/dev/null 2>&1; then
	echo "installing fio from Debian" >&2
	apt-get update -qq && apt-get install -y -qq fio >/dev/null
fi

work=${DIR:-$(mktemp -d /tmp/canopy-io.XXXXXX)}
mkdir -p "$work"
cleanup() {
	[ -n "${canopy_pid:-}" ] && kill "$canopy_pid" 2>/dev/null && wait "$canopy_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

fio_size=$(echo "$SIZE" | sed 's/iB$//; s/B$//')   # fio reads 1G, 1M as powers of 1024
fio_json() {
	fio --name="$1" --directory="$work" --rw="$1" --bs=1M --size="$fio_size" --numjobs="$FILES" \
		--direct=1 --ioengine=libaio --iodepth=16 --group_reporting --output-format=json
}
mib() { python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.1f" % ((j["write"]["bw_bytes"] + j["read"]["bw_bytes"]) / 1048576))'; }

echo "fio: sequential write, $FILES x $SIZE, 1 MiB direct, iodepth 16" >&2
fio_w=$(fio_json write | mib)
echo "fio: sequential read" >&2
fio_r=$(fio_json read | mib)
rm -f "$work"/write.* "$work"/read.*

go build -o "$work/canopy" ./cmd/canopy
"$work/canopy" up --dir "$work/canopy-data" --listen 127.0.0.1:0 --trash-days 0 >"$work/up.out" 2>"$work/up.err" &
canopy_pid=$!
for _ in $(seq 100); do grep -q "ready at" "$work/up.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/.*ready at //p' "$work/up.out")

echo "canopy bench io: $FILES x $SIZE, $WORKERS workers" >&2
big=$("$work/canopy" bench io --addr "$ADDR" --files "$FILES" --size "$SIZE" --workers "$WORKERS" --json | tail -1)
echo "canopy bench io: $SMALL x 4KiB, 16 workers" >&2
small=$("$work/canopy" bench io --addr "$ADDR" --files "$SMALL" --size 4KiB --workers 16 --json | tail -1)

python3 - "$fio_w" "$fio_r" "$big" "$small" "$FILES" "$SIZE" "$WORKERS" "$SMALL" <<'PY'
import json, sys
fw, fr = float(sys.argv[1]), float(sys.argv[2])
big, small = json.loads(sys.argv[3]), json.loads(sys.argv[4])
files, size, workers, nsmall = sys.argv[5:9]
print(f"| what | MiB/s | vs. fio |")
print(f"|---|---|---|")
print(f"| fio sequential write, {files} x {size}, 1 MiB direct | {fw:,.0f} | 1.00 |")
print(f"| canopy bench io write, {files} x {size}, {workers} workers | {big['write_mib_per_sec']:,.0f} | {big['write_mib_per_sec']/fw:.2f} |")
print(f"| fio sequential read, {files} x {size}, 1 MiB direct | {fr:,.0f} | 1.00 |")
print(f"| canopy bench io read, {files} x {size}, {workers} workers | {big['read_mib_per_sec']:,.0f} | {big['read_mib_per_sec']/fr:.2f} |")
print()
print(f"| small files | files/s written | files/s read | fixed cost per file | fixed-cost share | warnings |")
print(f"|---|---|---|---|---|---|")
print(f"| {nsmall} x 4 KiB, 16 workers | {small['files_per_sec']:,.0f} | {small['read_files_per_sec']:,.0f} | {1000*small['fixed_cost_seconds']:.2f} ms | {100*small['fixed_cost_share']:.0f}% | {'; '.join(small['warnings']) or '-'} |")
print(f"| {files} x {size} (the large run) | | | {1000*big['fixed_cost_seconds']:.2f} ms | {100*big['fixed_cost_share']:.1f}% | {'; '.join(big['warnings']) or '-'} |")
PY
