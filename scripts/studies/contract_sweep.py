"""The datapath contract (max 1e-3 and mean 1e-4 of V's range against float64 attention of the
same quantized inputs, docs/numerics.md) over every built-in input class, every host scheme
combination, several seeds and both presets, and over logit spreads up to 500 on outlier-heavy
inputs: the golden check of ``attenio golden`` run as a table, with the misses counted.

    python scripts/studies/contract_sweep.py [--n 1024] [--d 128] [--seeds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import time

from attenio.base import config as C
from attenio.model import accuracy as A
from attenio.model import golden as G

SIGMAS = [None, 10.0, 100.0, 300.0, 500.0]     # None: the class's own spread


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--preset", action="append", default=None)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    cases = [(dist, None) for dist in A.DISTRIBUTIONS]
    cases += [("llm-outliers", s) for s in SIGMAS[1:]]
    for name in a.preset or ["fpga", "asplos26"]:
        hw = C.preset(name)
        wl = C.Workload(seq_q=a.n, seq_k=a.n, head_dim=a.d)
        for dist, sigma in cases:
            worst = None
            for scheme in A.SCHEMES:
                for q_rows in (False, True):
                    for kb in (None, A.K_BLOCK):
                        for seed in range(a.seeds):
                            m = G.golden_check(hw, wl, dist, seed, scheme=scheme, q_rows=q_rows,
                                               k_block=kb, sigma=sigma)
                            row = {"preset": name, "dist": dist, "logit_sigma_target": sigma,
                                   "scheme": scheme, "q_rows": q_rows, "k_block": kb,
                                   "seed": seed, "logit_sigma": m["logit_sigma"],
                                   "max_rel": m["max_rel"], "mean_rel": m["mean_rel"],
                                   "ok": m["ok"]}
                            rows.append(row)
                            if worst is None or row["max_rel"] > worst["max_rel"]:
                                worst = row
            group = [r for r in rows if r["preset"] == name and r["dist"] == dist
                     and r["logit_sigma_target"] == sigma]
            miss = sum(not r["ok"] for r in group)
            label = dist + ("" if sigma is None else f" σ={sigma:g}")
            print(f"  {name:<9} {label:<20} runs {len(group):>3}  misses {miss:>2}  worst max "
                  f"{worst['max_rel']:.2e} ({worst['scheme']}{'+rows' if worst['q_rows'] else ''}"
                  f"{'+kblk' if worst['k_block'] else ''}, seed {worst['seed']})", flush=True)
    misses = sum(not r["ok"] for r in rows)
    print(f"{len(rows)} runs, {misses} misses, {time.perf_counter() - t0:.0f} s")
    if a.json:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
        with open(a.json, "w") as f:
            json.dump({"provenance": {"date": datetime.date.today().isoformat(),
                                      "command": "python scripts/studies/contract_sweep.py "
                                                 f"--n {a.n} --d {a.d} --seeds {a.seeds}",
                                      "commit": commit, "python": platform.python_version()},
                       "runs": len(rows), "misses": misses, "rows": rows}, f, indent=1)
    raise SystemExit(1 if misses else 0)


if __name__ == "__main__":
    main()
