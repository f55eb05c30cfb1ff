#!/usr/bin/env bash
# fuse.sh: file I/O through a Canopy FUSE mount against the same work on
# this machine's local disk, in one run.
#
# 1. fio, one job of sequential 1 MiB writes (then reads) of one SIZE
#    file, O_DIRECT, psync: first in a directory of the local disk, then
#    in a `canopy mount` of a `canopy up` whose object store is on that
#    disk. The mount is remounted between the write and the read, so the
#    read comes from the object store, not from the mount's block cache.
#    Before each fio run the page cache is dropped and the disk left idle
#    for 5 s, on both targets: a read right after a write costs this VM's
#    disk several times more, whichever file system issues it.
# 2. Many files at once: fio, 16 jobs each writing one file of MANY/16
#    (1 MiB buffered writes, an fsync at the end), on both targets, with
#    the mount's resident memory (VmRSS) sampled every 0.2 s throughout;
#    its peak is printed against the mount's --buffer-size (512 MiB).
# 3. Small files: SMALL files of 4 KiB created and written (open, write,
#    close) by one process, then by 8 processes, on the mount and on the
#    local disk (there once without and once with fsync before each close:
#    with the mount's --durability strict every close commits the file
#    durably on the metadata service; with the default posix it is
#    durable moments later, as on the local disk without fsync).
#
# Needs root (the mount calls mount(2)). Prints a Markdown table.
#
# Usage: bench/fuse.sh [SIZE] [SMALL] [MANY]   (defaults: 1GiB 10000 10GiB;
# MANY=0 skips step 2)
# The work directory is $DIR (default: a new one under /tmp), removed after.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rss.sh

SIZE=${1:-1GiB}
SMALL=${2:-10000}
MANY=${3:-10GiB}

if ! command -v fio >/dev/null 2>&1; then
	echo "installing fio from Debian" >&2
	apt-get update -qq && apt-get install -y -qq fio >/dev/null
fi

work=${DIR:-$(mktemp -d /tmp/canopy-fuse.XXXXXX)}
mkdir -p "$work/local" "$work/mnt"
sampler_pid=
cleanup() {
	[ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
	mountpoint -q "$work/mnt" && { "$work/canopy" umount "$work/mnt" || umount -l "$work/mnt"; }
	[ -n "${canopy_pid:-}" ] && kill "$canopy_pid" 2>/dev/null && wait "$canopy_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/canopy" ./cmd/canopy
"$work/canopy" up --dir "$work/data" --listen 127.0.0.1:0 --trash-days 0 >"$work/up.out" 2>"$work/up.err" &
canopy_pid=$!
for _ in $(seq 100); do grep -q "ready at" "$work/up.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/.*ready at //p' "$work/up.out")
mount_it() { "$work/canopy" mount --addr "$ADDR" -d "$work/mnt" >/dev/null 2>>"$work/mount.err"; }
umount_it() { "$work/canopy" umount "$work/mnt" >/dev/null; sleep 0.5; }
# settle: an empty page cache and an idle disk before a measured run.
settle() { sync; echo 3 >/proc/sys/vm/drop_caches; sleep 5; }

fio_size=$(echo "$SIZE" | sed 's/iB$//; s/B$//') # fio reads 1G, 1M as powers of 1024
# fio_mib RW DIR: MiB/s of one sequential job.
fio_mib() {
	settle
	fio --name=seq --directory="$2" --filename=seq.dat --rw="$1" --bs=1M --size="$fio_size" --numjobs=1 \
		--direct=1 --ioengine=psync --end_fsync=1 --output-format=json |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.1f" % ((j["write"]["bw_bytes"] + j["read"]["bw_bytes"]) / 1048576))'
}
# fio_many DIR: MiB/s of 16 jobs writing a file of MANY/16 each.
fio_many() {
	settle
	fio --name=many --directory="$1" --rw=write --bs=1M --size="$((many_bytes / 16))" --numjobs=16 \
		--ioengine=psync --end_fsync=1 --group_reporting --output-format=json |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.1f" % (j["write"]["bw_bytes"] / 1048576))'
}
many_bytes=$(numfmt --from=iec "$(echo "$MANY" | sed 's/iB$//; s/B$//')")

echo "fio: local disk, sequential write then read, 1 x $SIZE" >&2
local_w=$(fio_mib write "$work/local")
local_r=$(fio_mib read "$work/local")
rm -f "$work/local/seq.dat"

echo "fio: through the mount" >&2
mount_it
mount_w=$(fio_mib write "$work/mnt")
umount_it
mount_it
mount_r=$(fio_mib read "$work/mnt")
rm -f "$work/mnt/seq.dat"

local_many=0 mount_many=0 peak=0
if [ "$many_bytes" -gt 0 ]; then
	echo "fio: 16 files of $((many_bytes / 16 >> 20)) MiB at once, local disk" >&2
	mkdir -p "$work/local/many" "$work/mnt/many"
	local_many=$(fio_many "$work/local/many")
	rm -rf "$work/local/many"
	echo "fio: the same through the mount, its memory sampled" >&2
	mount_pid=$(pgrep -n -f "$work/canopy mount")
	rss_sample "$mount_pid" "$work/rss.peak" &
	sampler_pid=$!
	mount_many=$(fio_many "$work/mnt/many")
	kill "$sampler_pid" 2>/dev/null || true
	sampler_pid=
	peak=$(cat "$work/rss.peak" 2>/dev/null || echo 0)
	rm -rf "$work/mnt/many"
fi

# small PROCS DIR FSYNC: files created per second, SMALL files of 4 KiB
# split over PROCS processes.
small() {
	python3 bench/smallfiles.py "$1" "$2" "$3" "$SMALL"
}

declare -A rate
for procs in 1 8; do
	for where in local local_fsync mnt; do
		d="$work/$where-$procs"
		[ "$where" = mnt ] && d="$work/mnt/small-$procs"
		mkdir -p "$d"
		sync_flag=0
		[ "$where" = local_fsync ] && sync_flag=1
		echo "small files: $SMALL x 4 KiB, $procs processes, $where" >&2
		rate[$where-$procs]=$(small "$procs" "$d" "$sync_flag")
	done
done

python3 - "$SIZE" "$SMALL" "$local_w" "$mount_w" "$local_r" "$mount_r" \
	"$MANY" "$local_many" "$mount_many" "$peak" \
	"${rate[local-1]}" "${rate[local_fsync-1]}" "${rate[mnt-1]}" \
	"${rate[local-8]}" "${rate[local_fsync-8]}" "${rate[mnt-8]}" <<'PY'
import sys
size, small = sys.argv[1], sys.argv[2]
lw, mw, lr, mr = map(float, sys.argv[3:7])
many = sys.argv[7]
lm, mm, peak = float(sys.argv[8]), float(sys.argv[9]), int(sys.argv[10])
r = list(map(float, sys.argv[11:17]))
print("| fio, 1 job, 1 MiB sequential, O_DIRECT | local disk MiB/s | mount MiB/s | mount / local |")
print("|---|---|---|---|")
print(f"| write {size} (end_fsync) | {lw:,.0f} | {mw:,.0f} | {mw/lw:.2f} |")
print(f"| read {size} (mount remounted first) | {lr:,.0f} | {mr:,.0f} | {mr/lr:.2f} |")
if lm > 0:
    print(f"| write {many} as 16 files at once, 1 MiB buffered (end_fsync) | {lm:,.0f} | {mm:,.0f} | {mm/lm:.2f} |")
    print()
    print(f"Peak resident memory of the mount during the 16-file write: {peak // 1024} MiB (--buffer-size 512 MiB)")
print()
print(f"| {small} files of 4 KiB (create, write, close) | local files/s | local with fsync, files/s | mount files/s | mount / local | mount / local with fsync |")
print("|---|---|---|---|---|---|")
for i, procs in enumerate((1, 8)):
    l, lf, m = r[3*i:3*i+3]
    print(f"| {procs} process{'es' if procs > 1 else ''} | {l:,.0f} | {lf:,.0f} | {m:,.0f} | {m/l:.3f} | {m/lf:.2f} |")
PY
