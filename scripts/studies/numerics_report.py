"""Measure the integer model's figures for docs/numerics.md: block errors, accuracy, speed.

Usage: python scripts/studies/numerics_report.py [--preset fpga] [--repeats 3]
Prints Markdown tables; nothing here is asserted (tests/model/test_numerics.py does that).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from attenio.base import config as C
from attenio.model import numerics as nm
from attenio.model import reference as ref


def block_errors(hw: C.HardwareConfig) -> None:
    n = hw.numerics
    yf = np.arange(1 << n.logit_frac_bits)
    got = nm.exp2_frac(hw, yf) / 2.0 ** n.exp_frac_bits
    exp_rel = np.abs(got / np.exp2(yf / 2.0 ** n.logit_frac_bits) - 1).max()
    rng = np.random.default_rng(0)
    ls = np.concatenate([np.arange(1, 1 << 16), rng.integers(1 << 16, 1 << 40, 1_000_000)])
    r, e = nm.reciprocal(hw, ls)
    rec_rel = np.abs(r / 2.0 ** (n.recip_frac_bits + e) * ls - 1).max()
    print("| block | inputs | max relative error |")
    print("|---|---|---|")
    print(f"| exp2 fraction (PWL, {1 << n.exp_segments_log2} segments) | all "
          f"{1 << n.logit_frac_bits} fractions | {exp_rel:.2e} |")
    print(f"| reciprocal ({1 << n.recip_seed_log2}-entry seed + 1 Newton step) | "
          f"{len(ls):,} values of ℓ | {rec_rel:.2e} |")


def cases(rng):
    g = lambda *s: rng.standard_normal(s)  # noqa: E731
    pm = lambda *s: rng.choice([-1.0, 1.0], s)  # noqa: E731
    yield "Gaussian N=1024 d=64", g(1024, 64), g(1024, 64), g(1024, 64), False
    yield "Gaussian N=1024 d=64 causal", g(1024, 64), g(1024, 64), g(1024, 64), True
    yield "uniform N=1024 d=128", *(rng.uniform(-1, 1, (1024, 128)) for _ in range(3)), False
    yield "all-equal scores (Q = 0)", np.zeros((256, 64)), g(256, 64), g(256, 64), False
    q = g(256, 64)
    k = g(256, 64) * 0.1
    k[37] = q.mean(axis=0) * 50
    yield "one dominant key", q, k, g(256, 64), False
    s = pm(1024, 64)
    yield "±full scale, Q = K = V, N=1024", s, s, s, False
    s = pm(4096, 64)
    yield "±full scale, Q = K = V, N=4096", s, s, s, False
    yield "d = 1", g(256, 1), g(256, 1), g(256, 1), False
    yield "d = 128 (max)", g(256, 128), g(256, 128), g(256, 128), False
    yield "N = 1", g(1, 64), g(1, 64), g(1, 64), False
    yield "Nq=67, Nk=131 causal", g(67, 64), g(131, 64), g(131, 64), True
    yield "large logits (inputs × 8)", g(256, 64) * 8, g(256, 64) * 8, g(256, 64), False


def accuracy(hw: C.HardwareConfig) -> None:
    print("| case | max abs / V range | mean abs / V range |")
    print("|---|---|---|")
    for name, q, k, v, causal in cases(np.random.default_rng(2026)):
        (qi, sq), (ki, sk), (vi, sv) = (nm.quantize(x, hw.data_bits) for x in (q, k, v))
        sp = nm.softmax_scale(hw, sq, sk, q.shape[1])
        out = nm.attention_head(hw, qi, ki, vi, sp, causal)
        m = ref.error_metrics(nm.dequantize_output(hw, out, sv),
                              ref.attention_head(qi * sq, ki * sk, vi * sv, causal=causal),
                              vi * sv)
        print(f"| {name} | {m['max_rel']:.2e} | {m['mean_rel']:.2e} |")


def speed(hw: C.HardwareConfig, repeats: int) -> None:
    rng = np.random.default_rng(0)
    n, d = 4096, 64
    (qi, sq), (ki, sk), (vi, _) = (nm.quantize(rng.standard_normal((n, d)), hw.data_bits)
                                   for _ in range(3))
    sp = nm.softmax_scale(hw, sq, sk, d)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        nm.attention_head(hw, qi, ki, vi, sp)
        times.append(time.perf_counter() - t0)
    print(f"one head N={n} d={d}: median {statistics.median(times):.2f} s "
          f"(min {min(times):.2f}, max {max(times):.2f}, {repeats} runs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="fpga", choices=list(C.PRESETS))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    hw = C.preset(args.preset)
    print(f"## preset {args.preset}\n")
    block_errors(hw)
    print()
    accuracy(hw)
    print()
    speed(hw, args.repeats)


if __name__ == "__main__":
    main()
