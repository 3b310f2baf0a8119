"""The serving traces of issue #29's targets, seeded, with NumPy only (so that the GPU
measurement script, which runs where attenio is not installed, draws the same lengths as the
schedule-generator benchmark)."""

from __future__ import annotations

import numpy as np

PREFILL = {"sequences": 64, "median": 1024, "sigma": 0.75, "seed": 0}
DECODE = {"sequences": 256, "low": 1024, "high": 32768, "seed": 0, "page_size": 16,
          "heads": 32, "kv_heads": 8}
WINDOW = {"n": 131072, "window": 4096}


def lognormal_lengths(n: int, median: int, sigma: float, seed: int, cap: int) -> list[int]:
    """``n`` lengths from a log-normal of the given median (seeded), each in [1, cap]."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.lognormal(np.log(median), sigma, n))
    return [int(v) for v in np.clip(x, 1, cap)]


def uniform_lengths(n: int, low: int, high: int, seed: int) -> list[int]:
    """``n`` lengths drawn uniformly from [low, high] (seeded): the decode batch's caches."""
    rng = np.random.default_rng(seed)
    return [int(v) for v in rng.integers(low, high + 1, n)]


def prefill_lengths(cap: int = 1 << 20, **over) -> list[int]:
    p = {**PREFILL, **over}
    return lognormal_lengths(p["sequences"], p["median"], p["sigma"], p["seed"], cap)


def decode_cache_lengths(**over) -> list[int]:
    p = {**DECODE, **over}
    return uniform_lengths(p["sequences"], p["low"], p["high"], p["seed"])


def read_lengths(spec: str) -> list[int]:
    """``37,512,4096`` or ``@FILE`` (integers separated by commas, spaces or lines; ``#``
    starts a comment), as the CLI's ``--seqlens`` takes them."""
    text = spec
    if spec.startswith("@"):
        with open(spec[1:]) as fh:
            text = "\n".join(line.split("#")[0] for line in fh)
    lengths = [int(x) for x in text.replace(",", " ").split()]
    if not lengths or min(lengths) < 1:
        raise SystemExit(f"lengths {spec!r}: give positive integers such as 37,512,4096")
    return lengths


# Issue #46's shared-prefix decode traces: every sequence's table starts with the same prefix
# pages (prefix caching) and goes on with its own suffix; GQA 32/8, d = 128, page 16.
SHARED = [{"name": "shared-4k", "sequences": 256, "prefix": 4096, "low": 128, "high": 4096,
           "seed": 0},
          {"name": "shared-32k", "sequences": 64, "prefix": 32768, "low": 128, "high": 4096,
           "seed": 1}]
# Issue #45's MLA absorbed decode (DeepSeek-V3): MQA over the compressed latent, 128 query
# heads, Q·K over 512 + 64 (latent and rope part), V the latent's 512; page 64.
MLA = {"sequences": 64, "low": 1024, "high": 16384, "seed": 0, "page_size": 64, "heads": 128,
       "d_ckv": 512, "d_kpe": 64}
# Gemma 2's soft-capped prefill (cap 50) and gpt-oss's sinks, as issue #46's targets name them
SOFTCAP = {"n": 16384, "heads": 32, "kv_heads": 8, "cap": 50.0}
SINKS = {"n": 16384, "heads": 64, "kv_heads": 8, "d": 64, "window": 128}


def shared_prefix_suffixes(trace: dict) -> list[int]:
    """The own (unshared) suffix lengths of one shared-prefix trace (seeded)."""
    return uniform_lengths(trace["sequences"], trace["low"], trace["high"], trace["seed"])


def mla_cache_lengths() -> list[int]:
    return uniform_lengths(MLA["sequences"], MLA["low"], MLA["high"], MLA["seed"])



if __name__ == "__main__":       # python scripts/gpu/serving_traces.py decode|mla|prefill
    import sys

    _TRACES = {"prefill": prefill_lengths, "decode": decode_cache_lengths,
               "mla": mla_cache_lengths}
    if len(sys.argv) != 2 or sys.argv[1] not in _TRACES:
        raise SystemExit(f"usage: serving_traces.py {'|'.join(_TRACES)}: prints the trace's "
                         "lengths, one a line (for --seqlens / --cache-lens @FILE)")
    print("\n".join(map(str, _TRACES[sys.argv[1]]())))
