#!/usr/bin/env python3
"""Measures O_DIRECT reads into 4 KiB pages against reads into 2 MiB (transparent huge) pages.

    huge_page_reads.py FILE [--reads N] [--sizes MiB,MiB,...] [--seed S]

Each read takes a random 4 KiB-aligned range of FILE; the two kinds of buffer alternate read by read,
so that both see the same disk and host. Prints, per size and buffer, the median time, GB/s and the
block device's requests per read (/sys/dev/block/MAJ:MIN/stat), and whether the kernel granted huge
pages (AnonHugePages). docs/RUNTIME.md, "Huge pages for reads", quotes it. Standard library only;
Linux only.
"""
import argparse
import ctypes
import mmap
import os
import random
import statistics
import sys
import time

HUGE = 2 << 20


def device_stat_path(path):
    st = os.stat(path)
    p = "/sys/dev/block/%d:%d/stat" % (os.major(st.st_dev), os.minor(st.st_dev))
    return p if os.path.exists(p) else None


def reads_completed(stat_path):
    if not stat_path:
        return 0
    with open(stat_path) as f:
        return int(f.read().split()[0])


def buffer(nbytes, huge):
    """A writable buffer of nbytes, 2 MiB-aligned; advised for huge pages if huge; faulted in."""
    m = mmap.mmap(-1, nbytes + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)  # private: THP, not shmem
    addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
    at = (-addr) % HUGE
    if huge:
        m.madvise(mmap.MADV_HUGEPAGE, at, nbytes)
    for i in range(at, at + nbytes, 4096):
        m[i] = 0
    return m, memoryview(m)[at:at + nbytes]


def anon_huge_kib():
    with open("/proc/self/smaps_rollup") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1])
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file")
    ap.add_argument("--reads", type=int, default=40, help="reads per size and buffer (default 40)")
    ap.add_argument("--sizes", default="1.375,2.75,5.5", help="read sizes in MiB (default 1.375,2.75,5.5)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    sizes = [int(round(float(s) * (1 << 20) / 4096)) * 4096 for s in a.sizes.split(",")]
    try:
        fd = os.open(a.file, os.O_RDONLY | os.O_DIRECT)
    except OSError as e:
        sys.exit("%s: cannot open with O_DIRECT: %s" % (a.file, e.strerror))
    file_size = os.fstat(fd).st_size
    if file_size < max(sizes) + 4096:
        sys.exit("%s: %d bytes, smaller than the largest read" % (a.file, file_size))
    stat_path = device_stat_path(a.file)
    largest = max(sizes)
    before = anon_huge_kib()
    bufs = {"4 KiB pages": buffer(largest, False), "2 MiB pages": buffer(largest, True)}
    granted = anon_huge_kib() - before
    rng = random.Random(a.seed)
    print("%s, %d MiB; huge pages granted: %d KiB of %d" % (a.file, file_size >> 20, granted, largest >> 10))
    for size in sizes:
        times = {k: [] for k in bufs}
        requests = {k: 0 for k in bufs}
        for _ in range(a.reads):
            for kind, (_, view) in bufs.items():
                off = rng.randrange(0, (file_size - size) // 4096) * 4096
                r0 = reads_completed(stat_path)
                t0 = time.perf_counter()
                got = os.preadv(fd, [view[:size]], off)
                times[kind].append(time.perf_counter() - t0)
                requests[kind] += reads_completed(stat_path) - r0
                if got != size:
                    sys.exit("short read at %d" % off)
        for kind in bufs:
            m = statistics.median(times[kind])
            print("  %6.3f MiB into %s: median %6.2f ms  %5.2f GB/s  %4.1f requests a read" %
                  (size / (1 << 20), kind, m * 1e3, size / m / 1e9 if m else 0, requests[kind] / a.reads))
    os.close(fd)


if __name__ == "__main__":
    main()
