"""What closes int8's gap to bf16 on peaky scores (issue #33 item 4): the bit-exact integer
model with Q and K quantized to more bits than V (a wider Q·K path: 16-bit Q and K with 8-bit V
fits the ECP5's 18 × 18 multipliers as 8 × 8 does), against the fpga preset's int8 throughout
and bf16, over seeds. Q and K of ``QK`` bits, V of 8 bits per channel, host scheme
``rotate+rows+kblk``; a wider V is int16 throughout (asplos26-like).

    python scripts/studies/qk_width.py [--n 1024] [--d 64] [--seeds 5] [--json FILE]

The wider Q·K datapath is emulated on the model of a 16-bit configuration fed with 8-bit V
integers (V's accumulator is then wider than such a design needs; the values are the same).
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


def run(hw_qk, wl, q, k, v, qk_bits: int, v_bits: int) -> np.ndarray:
    host = A.quantize_scheme(C.replace(hw_qk, data_bits=qk_bits), q, k, v, "rotate",
                             q_rows=True, k_block=A.K_BLOCK)
    vi, sv = nm.quantize(v, v_bits, axis=2)
    out = nm.attention_int(hw_qk, wl, host.q, host.k, vi, host.sq, host.sk)
    return nm.dequantize_output(hw_qk, out, np.repeat(sv, wl.group_size, axis=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    fpga = C.preset("fpga")
    wide = C.replace(fpga, data_bits=16, max_seq_len=4096)
    wl8 = C.Workload(seq_q=a.n, seq_k=a.n, head_dim=a.d)
    wl16 = wl8
    designs = [("int8 Q,K,V (fpga)", fpga, wl8, 8, 8), ("int16 Q,K + int8 V", wide, wl16, 16, 8),
               ("int16 Q,K,V", wide, wl16, 16, 16)]
    rows = []
    print(f"rel. Frobenius error over bf16's, rotate+rows+kblk, N={a.n} d={a.d}, "
          f"seeds 0..{a.seeds - 1}: median / worst")
    for dist in ("peaky", "llm-outliers"):
        ratios = {name: [] for name, *_ in designs}
        for seed in range(a.seeds):
            q, k, v = A.make_inputs(wl8, dist, seed)
            exact = ref.attention(q, k, v)
            bf = A.rel_frobenius(A.attention_lowp(q, k, v, "bf16"), exact)
            for name, hw, wl, qkb, vb in designs:
                ratios[name].append(A.rel_frobenius(run(hw, wl, q, k, v, qkb, vb), exact) / bf)
        for name, r in ratios.items():
            rows.append({"dist": dist, "design": name, "over_bf16": r,
                         "median": float(np.median(r)), "worst": float(max(r))})
            print(f"  {dist:<13} {name:<20} {np.median(r):6.3f}x / {max(r):6.3f}x", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"provenance": {"date": datetime.date.today().isoformat(),
                                      "command": "python scripts/studies/qk_width.py "
                                                 f"--n {a.n} --d {a.d} --seeds {a.seeds}"},
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
