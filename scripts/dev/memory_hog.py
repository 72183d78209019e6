#!/usr/bin/env python3
"""A process that occupies memory, for benchmarks of ZipMoE beside other programs (dev tool).

Pages are written (anonymous mmap), so they are resident, not merely reserved. Two ways to drive it:
  memory_hog.py --leave-kib N [--ready FILE]   take MemAvailable - N KiB, touch FILE, hold until killed
  memory_hog.py --stdin                        each line on stdin is a byte count to hold from then on;
                                               answers each with the bytes it holds
It grows 128 MiB at a time with a 0.1 s pause (1.28 GB/s at most), so that a program that follows
free memory has time to give way instead of the kernel's OOM killer choosing.
"""
import argparse
import mmap
import sys
import time

CHUNK = 128 << 20


class Hog:
    def __init__(self):
        self.chunks = []

    def held(self):
        return sum(len(c) for c in self.chunks)

    def hold(self, want):
        page = b"\x5a" * 4096
        while self.held() < want:
            n = min(CHUNK, want - self.held())
            m = mmap.mmap(-1, n)
            for off in range(0, n, 4096):
                m[off:off + 4096] = page
            self.chunks.append(m)
            time.sleep(0.1)
        while self.chunks and self.held() > want:
            self.chunks.pop().close()


def available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    sys.exit("/proc/meminfo has no MemAvailable")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leave-kib", type=int)
    ap.add_argument("--ready")
    ap.add_argument("--stdin", action="store_true")
    args = ap.parse_args()
    hog = Hog()
    if args.stdin:
        for line in sys.stdin:
            hog.hold(int(line))
            print(hog.held(), flush=True)
        return
    if args.leave_kib is None:
        sys.exit("give --leave-kib N or --stdin")
    want = max(0, available() - args.leave_kib * 1024)
    hog.hold(want)
    print(f"holding {hog.held() >> 20} MiB; MemAvailable now {available() >> 20} MiB", flush=True)
    if args.ready:
        open(args.ready, "w").close()
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
