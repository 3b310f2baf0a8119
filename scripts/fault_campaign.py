"""Fault campaign on the RTL (verify/campaign.py): injected faults, what each ended with, and
whether every invariant held.

    python scripts/fault_campaign.py [--count 60] [--seed 0] [--n 40] [--d 16] [--json FILE]
        [--workers N | --scheduler local:N | --scheduler tcp://host:8786]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from attenio.base import config as C
from attenio.verify.campaign import campaign


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="tiny")
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--d", type=int, default=16)
    ap.add_argument("--heads", type=int, default=2)
    ap.add_argument("--json", default=None, help="write every outcome here")
    ap.add_argument("--workers", type=int, default=None, help="cases in N local processes")
    ap.add_argument("--scheduler", default=None, help="cases on Dask: local:N or an address")
    args = ap.parse_args()
    hw = C.preset(args.preset)
    wl = C.Workload.from_options(hw, n=args.n, d=args.d, heads=args.heads)
    t0 = time.perf_counter()

    def progress(i, n, o):
        mark = "ok" if not o["broken"] else "BROKEN: " + "; ".join(o["broken"])
        if o["accepted"] is not None:
            mark += f" (validate() {'accepted' if o['accepted'] else 'refused'} it)"
        print(f"[{i:>3}/{n}] {o['kind']:<16} stall {o['p_stall']:<4} {o['what']:<40} "
              f"→ {o['error']:<16} {mark}", flush=True)

    rep = campaign(hw, wl, args.count, args.seed, progress=progress, workers=args.workers,
                   scheduler=args.scheduler)
    print(f"\n{'kind':<16} {'injected':>8} {'survived':>8}  error codes")
    for kind, k in rep["by_kind"].items():
        codes = ", ".join(f"{c} {n}" for c, n in sorted(k["errors"].items()))
        print(f"{kind:<16} {k['injected']:>8} {k['survived']:>8}  {codes}")
    print(f"{'all':<16} {rep['injected']:>8} {rep['survived']:>8}  "
          f"({time.perf_counter() - t0:.0f} s)")
    mut = [o for o in rep["outcomes"] if o["accepted"] is not None]
    acc = [o for o in mut if o["accepted"]]
    print(f"mutated programs: validate() accepted {len(acc)} of {len(mut)}; of those, "
          f"{sum(o['error'] == 'TIMEOUT' for o in acc)} timed out on the RTL; of the refused, "
          f"{sum(o['error'] == 'TIMEOUT' for o in mut if not o['accepted'])} timed out")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rep, fh, indent=1)
    sys.exit(0 if rep["survived"] == rep["injected"] else 1)


if __name__ == "__main__":
    main()
