#!/usr/bin/env bash
# programs.sh: real programs and small files through a Canopy FUSE mount
# against the same work in a directory of the local disk (ext4 here), in
# one run, with the mount's resident memory sampled throughout.
#
# On each target, in order:
#   tar xf     of a tarball of Go's source tree ($GOROOT/src, about 11,500
#              files and 157 MB), then sync
#   git clone  of a local repository (a commit of $GOROOT/src/cmd, about
#              4,000 files; --no-hardlinks, so every object is copied)
#   rm -rf     of both trees
#   small      N files of 4 KiB (open, write, close) from 1 and from 8
#              processes, without and with an fsync before each close
#   fio        filecreate, then filestat, then filedelete of those files,
#              1 and 8 jobs, N files in all, all jobs in one directory
#              (where the kernel serializes creates and removes: it holds
#              the directory's lock for each), and again for 8 jobs with a
#              directory each ("8 dirs"), as a metadata benchmark's
#              processes would each work in their own
#
# Every figure is one run; the table gives the mount's time over the local
# disk's (or its rate over the local disk's). The mount's resident memory
# (VmRSS of the mount process) is sampled every 0.2 s and its peak printed.
#
# Needs root (the mount calls mount(2)), fio and git (installed from Debian
# if missing). Prints a Markdown table on stdout, progress on stderr.
#
# Usage: bench/programs.sh [N]   (default 10000)
# Environment: MOUNT_FLAGS (extra flags for canopy mount), UP_FLAGS (extra
# flags for canopy up), ONLY (space-separated list of steps to run: tar git
# rm small fio; default all), DIR (work directory, default a new one under
# /tmp, removed after), CANOPY (a canopy binary to use instead of building
# one from the checkout, to compare revisions in one run).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/rss.sh

N=${1:-10000}
ONLY=${ONLY:-tar git rm small fio}
want() { [[ " $ONLY " == *" $1 "* ]]; }

for tool in fio git; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "installing $tool from Debian" >&2
		apt-get update -qq && apt-get install -y -qq "$tool" >/dev/null
	fi
done

work=${DIR:-$(mktemp -d /tmp/canopy-programs.XXXXXX)}
mkdir -p "$work/local" "$work/mnt"
sampler_pid=
cleanup() {
	[ -n "$sampler_pid" ] && kill "$sampler_pid" 2>/dev/null
	mountpoint -q "$work/mnt" && { "$work/canopy" umount "$work/mnt" || umount -l "$work/mnt"; }
	[ -n "${canopy_pid:-}" ] && kill "$canopy_pid" 2>/dev/null && wait "$canopy_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT

if [ -n "${CANOPY:-}" ]; then
	cp "$CANOPY" "$work/canopy"
else
	go build -o "$work/canopy" ./cmd/canopy
fi
GOSRC=$(go env GOROOT)/src

# The inputs, on the local disk, outside both targets.
echo "preparing the tarball and the repository" >&2
tar cf "$work/src.tar" -C "$GOSRC/.." src
files_tar=$(tar tf "$work/src.tar" | grep -vc '/$')
mkdir -p "$work/repo" && cp -r "$GOSRC/cmd/." "$work/repo/"
git -C "$work/repo" init -q && git -C "$work/repo" add -A &&
	git -C "$work/repo" -c user.name=bench -c user.email=bench@localhost commit -qm tree
files_git=$(git -C "$work/repo" ls-files | wc -l)

# shellcheck disable=SC2086
"$work/canopy" up --dir "$work/data" --listen 127.0.0.1:0 ${UP_FLAGS:-} >"$work/up.out" 2>"$work/up.err" &
canopy_pid=$!
for _ in $(seq 100); do grep -q "ready at" "$work/up.out" && break; sleep 0.1; done
ADDR=$(sed -n 's/.*ready at //p' "$work/up.out")
# shellcheck disable=SC2086
"$work/canopy" mount --addr "$ADDR" -d ${MOUNT_FLAGS:-} "$work/mnt" >/dev/null 2>"$work/mount.pid"
mount_pid=$(grep -o '[0-9]\+' "$work/mount.pid" | tail -1)
rss_sample "$mount_pid" "$work/rss.peak" &
sampler_pid=$!

# secs CMD...: wall seconds of CMD, to a hundredth.
secs() {
	local s e
	s=$(date +%s.%N)
	"$@" >/dev/null
	e=$(date +%s.%N)
	awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f", e - s }'
}

# small PROCS DIR FSYNC: files per second, N files of 4 KiB over PROCS
# processes.
small() {
	python3 bench/smallfiles.py "$1" "$2" "$3" "$N"
}

# fio_ops ENGINE JOBS DIR: operations per second of a fio file engine, N
# files over JOBS jobs; filestat and filedelete work on the files the
# filecreate run before them left in DIR. DIR may be a ':'-separated list
# of directories, which fio hands out to the jobs in turn.
fio_ops() {
	fio --name=f --ioengine="$1" --directory="$3" --numjobs="$2" --nrfiles=$((N / $2)) \
		--filesize=4k --openfiles=1 --create_on_open=1 --fallocate=none --group_reporting \
		--output-format=json 2>/dev/null |
		python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.0f" % (j["read"]["iops"] + j["write"]["iops"]))'
}

declare -A res
for where in local mnt; do
	d="$work/$where"
	echo "== $where" >&2
	if want tar; then
		echo "tar xf ($files_tar files)" >&2
		mkdir -p "$d/tar"
		res[tar-$where]=$(secs sh -c "tar xf '$work/src.tar' -C '$d/tar' && sync -f '$d/tar'")
	fi
	if want git; then
		echo "git clone ($files_git files)" >&2
		res[git-$where]=$(secs git clone -q --no-hardlinks "$work/repo" "$d/clone")
	fi
	if want rm; then
		echo "rm -rf" >&2
		res[rm-$where]=$(secs rm -rf "$d/tar" "$d/clone")
	fi
	if want small; then
		for procs in 1 8; do
			for sync in 0 1; do
				echo "small: $N x 4 KiB, $procs processes, fsync $sync" >&2
				mkdir -p "$d/small-$procs-$sync"
				res[small-$procs-$sync-$where]=$(small "$procs" "$d/small-$procs-$sync" "$sync")
				rm -rf "$d/small-$procs-$sync"
			done
		done
	fi
	if want fio; then
		for jobs in 1 8; do
			mkdir -p "$d/fio-$jobs"
			for eng in filecreate filestat filedelete; do
				echo "fio $eng, $jobs jobs" >&2
				res[$eng-$jobs-$where]=$(fio_ops "$eng" "$jobs" "$d/fio-$jobs")
			done
			rm -rf "$d/fio-$jobs"
		done
		dirs=
		for j in $(seq 0 7); do
			mkdir -p "$d/fio-dirs/$j"
			dirs="$dirs${dirs:+:}$d/fio-dirs/$j"
		done
		for eng in filecreate filestat filedelete; do
			echo "fio $eng, 8 jobs in 8 directories" >&2
			res[$eng-dirs-$where]=$(fio_ops "$eng" 8 "$dirs")
		done
		rm -rf "$d/fio-dirs"
	fi
done

kill "$sampler_pid" 2>/dev/null || true
sampler_pid=
peak=$(cat "$work/rss.peak" 2>/dev/null || echo 0)

echo "| work (N = $N) | local disk | mount | mount / local |"
echo "|---|---|---|---|"
t() { # t KEY LABEL: a time row (lower is better); ratio = mount / local
	[ -n "${res[$1-local]:-}" ] || return 0
	awk -v l="${res[$1-local]}" -v m="${res[$1-mnt]}" -v n="$2" \
		'BEGIN { printf "| %s | %.2f s | %.2f s | %.1fx the time |\n", n, l, m, m / l }'
}
r() { # r KEY LABEL: a rate row (higher is better); ratio = mount / local
	[ -n "${res[$1-local]:-}" ] || return 0
	awk -v l="${res[$1-local]}" -v m="${res[$1-mnt]}" -v n="$2" \
		'BEGIN { printf "| %s | %\047d/s | %\047d/s | %.3f |\n", n, l, m, m / l }'
}
t tar "tar xf, $files_tar files, then sync"
t git "git clone --no-hardlinks, $files_git files"
t rm "rm -rf of both trees"
for procs in 1 8; do
	r "small-$procs-0" "$N x 4 KiB files, $procs process(es)"
	r "small-$procs-1" "$N x 4 KiB files, $procs process(es), fsync each"
done
for eng in filecreate filestat filedelete; do
	for jobs in 1 8; do r "$eng-$jobs" "fio $eng, $jobs job(s)"; done
	r "$eng-dirs" "fio $eng, 8 jobs in 8 directories"
done
echo
echo "Peak resident memory of the mount: $((peak / 1024)) MiB (mount flags: ${MOUNT_FLAGS:-none})"
