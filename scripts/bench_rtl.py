"""RTL benchmark: RTL cycles against the schedule generator, PE utilization, DRAM bytes and
simulation speed for a set of workloads (Verilator unless --sim icarus).

    python scripts/bench_rtl.py [--preset tiny] [--sim verilator] [--workers N | --scheduler ADDR]

Prints one row per workload and the wall time of the whole set.
"""

from __future__ import annotations

import argparse
import time

from attenio.base import config as C
from attenio.verify.runner import simulate

SHAPES = [dict(n=n, d=d) for n in (1, 7, 64, 200, 256) for d in (8, 32, 64)] + [
    dict(n=40, d=16, heads=3, batch=2), dict(n=24, d=8, heads=4, kv_heads=2),
    dict(n=100, d=32, causal=True), dict(n=3, d=16, nk=50)]


def workload_of(hw: C.HardwareConfig, sh: dict) -> tuple[str, C.Workload]:
    sh = dict(sh)
    n, d = sh.pop("n"), sh.pop("d")
    nk = sh.pop("nk", None)
    wl = C.Workload.from_options(hw, n=n, d=d, nk=nk, heads=sh.get("heads", 1),
                                 kv_heads=sh.get("kv_heads"), batch=sh.get("batch", 1),
                                 causal=sh.get("causal", False))
    return f"N={n}x{nk or n} d={d} " + " ".join(f"{k}={v}" for k, v in sh.items()), wl


def run_shapes(chunk, hw, sim):
    """One job of the fanned-out regression: simulate each (index, shape), a row each."""
    rows = []
    for i, sh in chunk:
        name, wl = workload_of(hw, sh)
        r = simulate(hw, wl, sim=sim, seed=1, log=lambda *a: None)
        c = r.counters
        rows.append((i, {"workload": name, "cycles": c["cycles"],
                         "predicted": r.predicted_cycles, "gap": r.cycle_gap,
                         "pe_busy": c["pe_busy"] / c["cycles"], "bytes_rd": c["bytes_rd"],
                         "bytes_wr": c["bytes_wr"], "bit_exact": r.bit_exact,
                         "rate": r.sim_rate}))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--sim", default="verilator", choices=["verilator", "icarus"])
    ap.add_argument("--n", type=int, nargs="*", help="only these N (square, d from --d)")
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--workers", type=int, default=None,
                    help="run the workloads in N local processes")
    ap.add_argument("--scheduler", default=None,
                    help="run them on Dask: local:N or a scheduler address")
    args = ap.parse_args()
    hw = C.preset(args.preset)
    shapes = [dict(n=n, d=args.d) for n in args.n] if args.n else SHAPES
    print(f"{'workload':<34} {'RTL cycles':>11} {'predicted':>11} {'gap':>8} {'PE busy':>8} "
          f"{'bytes rd':>9} {'bytes wr':>9} {'exact':>5} {'cycles/s':>9}")
    t0 = time.perf_counter()

    def show(row):
        print(f"{row['workload']:<34} {row['cycles']:>11,} {row['predicted']:>11,} "
              f"{100 * row['gap']:>+7.3f}% {row['pe_busy']:>8.2%} {row['bytes_rd']:>9,} "
              f"{row['bytes_wr']:>9,} {str(row['bit_exact']):>5} {row['rate']:>9,.0f}",
              flush=True)

    jobs = list(enumerate(shapes))
    if args.workers is None and args.scheduler is None:
        for job in jobs:
            show(run_shapes([job], hw, args.sim)[0][1])
    else:
        from attenio.sim.fanout import fan_out
        from attenio.verify.runner import build

        build(hw, args.sim, log=lambda *a: None)      # once; every job reuses it
        rows: dict[int, dict] = {}

        def failed(chunk):
            return [(i, {"workload": workload_of(hw, sh)[0], "cycles": 0, "predicted": 0,
                         "gap": 0.0, "pe_busy": 0.0, "bytes_rd": 0, "bytes_wr": 0,
                         "bit_exact": "DIED", "rate": 0}) for i, sh in chunk]

        fan_out(run_shapes, [[job] for job in jobs], lambda rs: rows.update(dict(rs)), failed,
                workers=args.workers, scheduler=args.scheduler, hw=hw, sim=args.sim)
        for i in range(len(jobs)):
            show(rows[i])
    print(f"wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
