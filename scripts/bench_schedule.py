"""Benchmark the schedule generator: program + timeline of one head at the asplos26 preset.

Usage: python scripts/bench_schedule.py [--repeats 3]
Prints wall time (median) and peak Python memory for N = 128K and 1M, d = 64 and 128.
"""

from __future__ import annotations

import argparse
import statistics
import time
import tracemalloc

from attenio.base import config as C
from attenio.sim.schedule import schedule


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    hw = C.asplos26()
    print("| N | d | program instructions | cycles | median wall time | peak memory |")
    print("|---|---|---|---|---|---|")
    for n in (131072, 1 << 20):
        for d in (64, 128):
            wl = C.Workload.square(n, d)
            times = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                sch = schedule(hw, wl, keep_spans=False)
                times.append(time.perf_counter() - t0)
            tracemalloc.start()
            schedule(hw, wl, keep_spans=False)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(f"| {n:,} | {d} | {len(sch.program):,} | {sch.total_cycles:,} | "
                  f"{statistics.median(times):.2f} s | {peak / 1e6:.1f} MB |")


if __name__ == "__main__":
    main()
