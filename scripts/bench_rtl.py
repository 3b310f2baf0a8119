"""RTL benchmark: RTL cycles against the schedule generator, PE utilization, DRAM bytes and
simulation speed for a set of workloads (Verilator unless --sim icarus).

    python scripts/bench_rtl.py [--preset tiny] [--sim verilator] [--quick]

Prints one row per workload and the wall time of the whole set.
"""

from __future__ import annotations

import argparse
import time

from attenio import config as C
from attenio.verify.runner import simulate

SHAPES = [dict(n=n, d=d) for n in (1, 7, 64, 200, 256) for d in (8, 32, 64)] + [
    dict(n=40, d=16, heads=3, batch=2), dict(n=24, d=8, heads=4, kv_heads=2),
    dict(n=100, d=32, causal=True), dict(n=3, d=16, nk=50)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--sim", default="verilator", choices=["verilator", "icarus"])
    ap.add_argument("--n", type=int, nargs="*", help="only these N (square, d from --d)")
    ap.add_argument("--d", type=int, default=64)
    args = ap.parse_args()
    hw = C.preset(args.preset)
    shapes = [dict(n=n, d=args.d) for n in args.n] if args.n else SHAPES
    print(f"{'workload':<34} {'RTL cycles':>11} {'predicted':>11} {'gap':>8} {'PE busy':>8} "
          f"{'bytes rd':>9} {'bytes wr':>9} {'exact':>5} {'cycles/s':>9}")
    t0 = time.perf_counter()
    for sh in shapes:
        sh = dict(sh)
        n, d = sh.pop("n"), sh.pop("d")
        nk = sh.pop("nk", None)
        wl = C.Workload(seq_q=n, seq_k=nk or n, head_dim=d, heads=sh.get("heads", 1),
                        kv_heads=sh.get("kv_heads") or sh.get("heads", 1),
                        batch=sh.get("batch", 1), causal=sh.get("causal", False),
                        element_bytes=hw.element_bytes)
        r = simulate(hw, wl, sim=args.sim, seed=1, log=lambda *a: None)
        c = r.counters
        name = f"N={n}x{nk or n} d={d} " + " ".join(f"{k}={v}" for k, v in sh.items())
        print(f"{name:<34} {c['cycles']:>11,} {r.predicted_cycles:>11,} "
              f"{100 * r.cycle_gap:>+7.3f}% {c['pe_busy'] / c['cycles']:>8.2%} "
              f"{c['bytes_rd']:>9,} {c['bytes_wr']:>9,} {str(r.bit_exact):>5} "
              f"{r.sim_rate:>9,.0f}", flush=True)
    print(f"wall time {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
