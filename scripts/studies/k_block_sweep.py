"""Per-block K scales on the bit-exact integer model: the end-to-end error (against float64
attention of the float inputs) for each K block size, beside bf16, with the host schemes and Q
per row. The hardware carries one factor per key, so the block size is the host's choice and
costs nothing: this picks it by measurement.

    python scripts/studies/k_block_sweep.py [--preset fpga] [--n 1024] [--d 64] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json

from attenio.base import config as C
from attenio.model import accuracy as A
from attenio.model import reference as ref

BLOCKS = [None, 1, 4, 8, 16, 64, 256]      # None: K per tensor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="fpga")
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dist", action="append", choices=A.DISTRIBUTIONS)
    ap.add_argument("--scheme", action="append", choices=A.SCHEMES)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    hw = C.preset(a.preset)
    wl = C.Workload(seq_q=a.n, seq_k=a.n, head_dim=a.d)
    rows = []
    print(f"K block sweep: preset={a.preset} N={a.n} d={a.d} seed={a.seed}; Q per row; "
          "relative Frobenius error over bf16's")
    print(f"  {'inputs':<14} {'scheme':<8} {'bf16':>9} " +
          " ".join(f"{('tensor' if b is None else b):>7}" for b in BLOCKS))
    for dist in a.dist or ["llm-outliers", "peaky", "gaussian"]:
        q, k, v = A.make_inputs(wl, dist, a.seed)
        exact = ref.attention(q, k, v)
        bf16 = A.rel_frobenius(A.attention_lowp(q, k, v, "bf16"), exact)
        for scheme in a.scheme or ["rotate", "smooth", "tensor"]:
            errs = {}
            for b in BLOCKS:
                host = A.quantize_scheme(hw, q, k, v, scheme, q_rows=True, k_block=b)
                errs[b] = A.rel_frobenius(A.run_int(hw, wl, host), exact)
                rows.append({"inputs": dist, "scheme": scheme, "k_block": b,
                             "rel_frobenius": errs[b], "bf16": bf16,
                             "over_bf16": errs[b] / bf16})
            print(f"  {dist:<14} {scheme:<8} {bf16:>9.2e} " +
                  " ".join(f"{errs[b] / bf16:>6.3f}x" for b in BLOCKS))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"date": datetime.date.today().isoformat(), "preset": a.preset,
                       "n": a.n, "d": a.d, "seed": a.seed, "q_scales": "row",
                       "command": ("python scripts/studies/k_block_sweep.py"
                                   f" --preset {a.preset} --n {a.n} --d {a.d}"),
                       "hardware": hw.to_dict(), "rows": rows}, f, indent=1)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
