#!/usr/bin/env python3
"""smallfiles.py PROCS DIR FSYNC N: create N files of 4 KiB under DIR,
split over PROCS processes (each in its own subdirectory), fsyncing each
file if FSYNC is 1, and print the files created per second."""
import os
import sys
import time
from multiprocessing import Process

procs, root, sync, n = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", int(sys.argv[4])
buf = os.urandom(4096)


def work(k):
    d = os.path.join(root, f"w{k}")
    os.mkdir(d)
    for i in range(k, n, procs):
        fd = os.open(os.path.join(d, f"f{i}"), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        os.write(fd, buf)
        if sync:
            os.fsync(fd)
        os.close(fd)


if __name__ == "__main__":
    start = time.monotonic()
    ps = [Process(target=work, args=(k,)) for k in range(procs)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    print("%.0f" % (n / (time.monotonic() - start)))
