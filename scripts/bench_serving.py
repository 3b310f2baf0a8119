"""Serving-workload benchmark (issue #29's targets) on the schedule generator:

* varlen prefill: ``--sequences`` prompts with lengths drawn from a log-normal of median
  ``--median`` (seeded), causal, d = 128 on asplos26: PE utilization by MAC (target ≥ 90%) and
  cycles against the same sequences scheduled one by one (target ≤ 1.03×).

    python scripts/bench_serving.py [--sequences 64] [--median 1024] [--sigma 0.75]
                                    [--heads 1] [--seed 0] [--json data/serving/FILE.json]

Prints the figures and the wall time; ``--json`` writes them with the lengths used.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from attenio import config as C
from attenio.sim.schedule import schedule


def lognormal_lengths(n: int, median: int, sigma: float, seed: int, cap: int) -> list[int]:
    """``n`` lengths from a log-normal of the given median (seeded), each in [1, cap]."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.lognormal(np.log(median), sigma, n))
    return [int(v) for v in np.clip(x, 1, cap)]


def varlen_prefill(hw: C.HardwareConfig, lens: list[int], d: int, heads: int) -> dict:
    wl = C.VarlenWorkload.from_options(hw, seqlens=lens, d=d, heads=heads, causal=True)
    t0 = time.perf_counter()
    batch = schedule(hw, wl, keep_spans=False)
    t_batch = time.perf_counter() - t0
    t0 = time.perf_counter()
    alone = [schedule(hw, wl.sequence(i), keep_spans=False) for i in range(wl.sequences)]
    t_alone = time.perf_counter() - t0
    one_by_one = sum(s.total_cycles for s in alone)
    tr = batch.traffic
    return {
        "workload": wl.to_dict(), "cycles": batch.total_cycles,
        "pe_util_mac": batch.pe_util_mac, "pe_util_time": batch.pe_util_time,
        "one_by_one_cycles": one_by_one, "vs_one_by_one": batch.total_cycles / one_by_one,
        "read_bytes": batch.read_bytes, "closed_form_read_bytes": tr.read_bytes,
        "program_instructions": len(batch.program), "stalls": batch.stalls,
        "model_s": t_batch, "one_by_one_model_s": t_alone,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sequences", type=int, default=64)
    ap.add_argument("--median", type=int, default=1024)
    ap.add_argument("--sigma", type=float, default=0.75)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    hw = C.asplos26()
    lens = lognormal_lengths(a.sequences, a.median, a.sigma, a.seed, hw.max_seq_len)
    t0 = time.perf_counter()
    r = varlen_prefill(hw, lens, a.d, a.heads)
    print(f"varlen prefill (asplos26, {a.sequences} sequences, log-normal median {a.median} "
          f"sigma {a.sigma} seed {a.seed}: {sum(lens):,} tokens, {min(lens)}-{max(lens)}; "
          f"d={a.d}, heads={a.heads}, causal)")
    print(f"  cycles               {r['cycles']:,}  ({r['vs_one_by_one']:.4f}x the "
          f"{r['one_by_one_cycles']:,} of the sequences one by one; target <= 1.03x)")
    print(f"  PE utilization       {r['pe_util_mac']:.2%} by MAC, {r['pe_util_time']:.2%} by "
          "time (target >= 90% by MAC)")
    print(f"  DRAM read            {r['read_bytes']:,} B (closed form "
          f"{r['closed_form_read_bytes']:,} B)")
    print(f"  program              {r['program_instructions']:,} instructions")
    print(f"  wall                 {time.perf_counter() - t0:.1f} s (batch schedule "
          f"{r['model_s']:.1f} s)")
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps({"command": "python scripts/bench_serving.py "
                                            + " ".join(f"--{k} {v}" for k, v in vars(a).items()
                                                       if k != "json" and v is not None),
                                            "lengths": lens, "varlen_prefill": r}, indent=1))
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
