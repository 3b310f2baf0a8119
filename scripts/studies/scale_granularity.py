"""How much finer Q and K scales would buy, measured before building them: float emulation of
int8 quantization with one scale per block of Q rows and per block of keys (exact or rounded
down to a power of two), the softmax and P·V in float64 (the datapath's own rounding, ~1e-4 of
V's range, left out), against float64 attention of the float inputs, beside bf16.

    python scripts/studies/scale_granularity.py [--n 1024] [--d 64] [--json data/accuracy/...json]

The inputs and host transforms are ``attenio accuracy``'s (model/accuracy.py): K minus its
channel means, then ``rotate`` or ``smooth``; V per channel.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math

import numpy as np

from attenio.base.config import Workload
from attenio.model import accuracy as A
from attenio.model import numerics as nm
from attenio.model import reference as ref

# (Q rows per scale, keys per scale); 0 = the whole tensor
GRID = [(0, 0), (256, 0), (256, 64), (256, 1), (64, 64), (16, 16), (1, 0), (1, 64), (1, 8),
        (8, 8), (1, 1)]


def block_quantize(x, rows: int, pow2: bool, qmax: int = 127):
    """``x`` [n, d] with one scale per block of ``rows`` rows (0: one for all); ``pow2``: each
    block's scale is the tensor's divided by a power of two (a shift)."""
    n = x.shape[0]
    rows = rows or n
    top = float(np.abs(x).max()) / qmax or 1.0
    xi, sc = np.empty_like(x), np.empty(n)
    for i in range(0, n, rows):
        b = x[i:i + rows]
        s = float(np.abs(b).max()) / qmax or 1.0
        if pow2:
            s = top / 2.0 ** max(0, min(15, math.floor(math.log2(top / s))))
        xi[i:i + rows] = np.clip(np.rint(b / s), -qmax - 1, qmax)
        sc[i:i + rows] = s
    return xi, sc


def emulate(q, k, v, scheme: str, q_rows: int, k_rows: int, pow2: bool) -> np.ndarray:
    k = k - k.mean(axis=0)
    if scheme == "rotate":
        h = A.rotation(q.shape[1])
        q, k = q @ h, k @ h
    else:
        qq, kk = A._migrate(q[None, None], k[None, None])
        q, k = qq[0, 0], kk[0, 0]
    qi, sq = block_quantize(q, q_rows, pow2)
    ki, sk = block_quantize(k, k_rows, pow2)
    vi, sv = nm.quantize(v, 8, axis=0)
    s = (qi @ ki.T) * sq[:, None] * sk[None, :] / math.sqrt(q.shape[1])
    s -= s.max(axis=1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=1, keepdims=True)
    return (p @ vi) * sv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    wl = Workload(seq_q=args.n, seq_k=args.n, head_dim=args.d)
    rows = []
    print(f"N={args.n} d={args.d}: relative Frobenius error against float64 attention")
    print(f"  {'inputs':<13} {'scheme':<7} {'Q rows':>6} {'keys':>5} {'exact':>9} {'pow2':>9}"
          f" {'/ bf16':>7}")
    for dist in ("llm-outliers", "peaky", "gaussian"):
        q, k, v = A.make_inputs(wl, dist, args.seed)
        exact = ref.attention(q, k, v)
        bf16 = A.rel_frobenius(A.attention_lowp(q, k, v, "bf16"), exact)
        rows.append({"inputs": dist, "format": "bf16", "rel_frobenius": bf16})
        for scheme in ("rotate", "smooth"):
            for qr, kr in GRID:
                e = {f: A.rel_frobenius(emulate(q[0, 0], k[0, 0], v[0, 0], scheme, qr, kr,
                                                f == "pow2")[None, None], exact)
                     for f in ("exact", "pow2")}
                rows.append({"inputs": dist, "scheme": scheme, "q_rows": qr or args.n,
                             "k_rows": kr or args.n, **e, "over_bf16": e["exact"] / bf16})
                print(f"  {dist:<13} {scheme:<7} {qr or args.n:>6} {kr or args.n:>5} "
                      f"{e['exact']:>9.3e} {e['pow2']:>9.3e} {e['exact'] / bf16:>6.2f}x")
        print(f"  {dist:<13} bf16 {bf16:.3e}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"n": args.n, "d": args.d, "seed": args.seed,
                       "date": datetime.date.today().isoformat(),
                       "command": "python scripts/studies/scale_granularity.py", "rows": rows}, f,
                      indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
