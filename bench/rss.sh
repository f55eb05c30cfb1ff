# rss.sh, sourced by the bench scripts: the resident memory of a process
# sampled in the background.
#
# rss_sample PID FILE: samples PID's VmRSS every 0.2 s while it lives and
# keeps the peak (KiB) in FILE; run it with & and kill it when done.
rss_sample() {
	local pid=$1 out=$2 peak=0 rss
	while kill -0 "$pid" 2>/dev/null; do
		rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
		[ "${rss:-0}" -gt "$peak" ] && { peak=$rss; echo "$peak" >"$out"; }
		sleep 0.2
	done
}
