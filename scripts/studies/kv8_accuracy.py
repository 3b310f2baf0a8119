"""An 8-bit K/V cache's accuracy (issue #46 item 4): decode-shaped attention (a few query rows
against a long cache) from the accelerator's 8-bit cache (configs/asplos26-kv8.toml: Q per row,
K per key, V per tensor or per key, the bit-exact integer model) beside its 16-bit one
(asplos26), bf16 attention (the GPU's bf16 cache) and an FP8 E4M3 K/V cache as the GPU's FP8
kernels read it (K and V rounded to E4M3 under one scale each, vLLM's per-tensor
``k_scale``/``v_scale`` of amax/448, the rest bf16). Relative Frobenius error against float64
attention of the float inputs, over bf16's, median and worst over seeds.

    python scripts/studies/kv8_accuracy.py [--nq 64] [--nk 4096] [--d 128] [--seeds 10]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
from pathlib import Path

import numpy as np

from attenio.base import config as C
from attenio.model import accuracy as A
from attenio.model import reference as ref

E4M3_MAX = 448.0


def e4m3(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to FP8 E4M3 (3 mantissa bits, normals from 2**-6, subnormals in steps of
    2**-9, saturating at ±448), to nearest even."""
    a = np.minimum(np.abs(x), E4M3_MAX)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    step = 2.0 ** (np.maximum(e, -6) - 3)
    return np.sign(x) * np.minimum(np.rint(a / step) * step, E4M3_MAX)


def fp8_cache(q, k, v) -> np.ndarray:
    """bf16 attention of Q with K and V read from an E4M3 cache (one scale each)."""
    sk, sv = np.abs(k).max() / E4M3_MAX, np.abs(v).max() / E4M3_MAX
    return A.attention_lowp(q, e4m3(k / sk) * sk, e4m3(v / sv) * sv, "bf16")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nq", type=int, default=64)
    ap.add_argument("--nk", type=int, default=4096)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    hw16 = C.asplos26()
    hw8 = C.replace(hw16, data_bits=8, value_scales_unit=True)
    wl = C.Workload(seq_q=a.nq, seq_k=a.nk, head_dim=a.d, heads=4, kv_heads=1)
    paths = {"int16 rotate (asplos26)": (hw16, "rotate", False),
             "int8 tensor (kv8)": (hw8, "tensor", False),
             "int8 rotate (kv8)": (hw8, "rotate", False),
             "int8 tensor, V per key (kv8)": (hw8, "tensor", True),
             "int8 rotate, V per key (kv8)": (hw8, "rotate", True)}
    rows = []
    print(f"Q {a.nq} rows x a cache of {a.nk} keys, d={a.d}, GQA 4/1, seeds 0..{a.seeds - 1}; "
          "integer paths with Q per row and K per key; rel. Frobenius error over bf16's")
    for dist in ("llm-outliers", "peaky", "gaussian"):
        ratios: dict[str, list[float]] = {}
        for seed in range(a.seeds):
            q, k, v = A.make_inputs(wl, dist, seed)
            exact = ref.attention(q, k, v)
            bf = A.rel_frobenius(A.attention_lowp(q, k, v, "bf16"), exact)
            errs = {"fp8 e4m3 cache (bf16 math)": A.rel_frobenius(fp8_cache(q, k, v), exact)}
            for name, (hw, scheme, v_keys) in paths.items():
                inp = A.quantize_scheme(hw, q, k, v, scheme, q_rows=True, k_block=1,
                                        v_keys=v_keys)
                errs[name] = A.rel_frobenius(A.run_int(hw, wl, inp), exact)
            for name, e in errs.items():
                ratios.setdefault(name, []).append(e / bf)
                rows.append({"inputs": dist, "seed": seed, "path": name, "rel_frobenius": e,
                             "bf16_rel_frobenius": bf})
        for name, r in ratios.items():
            print(f"  {dist:<13} {name:<30} {np.median(r):6.2f}x / {max(r):6.2f}x")
    if a.json:
        Path(a.json).write_text(json.dumps({
            "date": datetime.date.today().isoformat(), "script": "scripts/studies/kv8_accuracy.py",
            "nq": a.nq, "nk": a.nk, "d": a.d, "heads": 4, "kv_heads": 1, "seeds": a.seeds,
            "rows": rows}, indent=1))
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
