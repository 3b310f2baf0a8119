"""The floor 8-bit V sets under any int8 datapath (issue #33): float64 attention with only V
quantized to int8 per channel (Q and K exact, no datapath rounding), relative Frobenius error
over bf16 attention's, on the built-in llm-outliers inputs over seeds. An int8 design cannot be
more accurate than this on these inputs.

    python scripts/studies/v_floor.py [--n 256 1024 4096] [--d 64] [--seeds 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json

import numpy as np

from attenio.base import config as C
from attenio.model import accuracy as A
from attenio.model import numerics as nm
from attenio.model import reference as ref


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = []
    print(f"llm-outliers, d={a.d}, seeds 0..{a.seeds - 1}: V int8 per channel alone, "
          "rel. Frobenius error over bf16's, median / worst")
    for n in a.n:
        wl = C.Workload(seq_q=n, seq_k=n, head_dim=a.d)
        ratios = []
        for seed in range(a.seeds):
            q, k, v = A.make_inputs(wl, "llm-outliers", seed)
            exact = ref.attention(q, k, v)
            bf = A.rel_frobenius(A.attention_lowp(q, k, v, "bf16"), exact)
            vi, sv = nm.quantize(v, 8, axis=2)
            ratios.append(A.rel_frobenius(ref.attention(q, k, vi * sv), exact) / bf)
        rows.append({"n": n, "over_bf16": ratios, "median": float(np.median(ratios)),
                     "worst": float(max(ratios))})
        print(f"  N={n:<6} {np.median(ratios):.3f}x / {max(ratios):.3f}x", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"provenance": {"date": datetime.date.today().isoformat(),
                                      "command": "python scripts/studies/v_floor.py --n "
                                                 + " ".join(map(str, a.n))
                                                 + f" --d {a.d} --seeds {a.seeds}"},
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
