"""The serving workloads (issue #29) against a GPU: varlen prefill, a sliding window and a paged
decode batch, each measured on the GPU by scripts/gpu/gpu_serving.py and modeled on the accelerator
with the same traces and heads, with the projections of sim/gpu.py (the accelerator scaled to
the GPU's peak; and to its peak and bytes per FLOP). docs/gpu-comparison.md explains them.
"""

from __future__ import annotations

import json
from pathlib import Path

from attenio.base.config import HardwareConfig, VarlenWorkload, Workload
from attenio.base.errors import ConfigError, bad
from attenio.sim.gpu import H200_BANDWIDTH_TBS, H200_PEAK_TFLOPS, projection
from attenio.sim.schedule import schedule

__all__ = ["load_serving_json", "compare_serving", "PAGED_BACKENDS"]

# GPU paths that read K/V out of pages (the others read contiguous caches)
PAGED_BACKENDS = ("sdpa-gathered-pages", "flex-paged")
WORKLOADS = ("prefill", "window", "decode")


def load_serving_json(path: str | Path) -> dict:
    """Read a JSON written by scripts/gpu/gpu_serving.py; :class:`ConfigError` names what is
    missing (the file, its traces, its measurements)."""
    p = Path(path)
    if not p.is_file():
        raise bad("gpu json", str(p), "file not found (make one with scripts/gpu/gpu_serving.py)")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as e:
        raise bad("gpu json", str(p), f"not JSON ({e.msg}, line {e.lineno})") from None
    for key in ("provenance", "traces", "measurements", "d"):
        if key not in data:
            raise bad("gpu json", str(p),
                      f"has no {key!r} (written by scripts/gpu/gpu_serving.py?)")
    data["path"] = str(p)
    return data


def _best(data: dict, workload: str, paged_only: bool = False) -> dict:
    rows = [m for m in data["measurements"] if m["workload"] == workload and m["status"] == "ok"
            and (not paged_only or m["backend"] in PAGED_BACKENDS)]
    if not rows:
        raise ConfigError(f"gpu json={data['path']!r} is invalid: no measured {workload} row"
                          + (" that reads pages" if paged_only else ""))
    most = max(r["heads"] for r in rows)       # the shape that fills the GPU
    return min((r for r in rows if r["heads"] == most), key=lambda r: r["time_ms"])


def _workload(hw: HardwareConfig, data: dict, name: str, heads: int):
    t, d = data["traces"], data["d"]
    if name == "prefill":
        return VarlenWorkload.from_options(hw, seqlens=t["prefill_lengths"], d=d, heads=heads,
                                           causal=True)
    if name == "window":
        w = t["window"]
        return Workload.from_options(hw, n=w["n"], d=d, heads=heads, causal=True,
                                     window=(w["window"], -1))
    dec = t["decode"]
    lens = t["decode_cache_lengths"]
    return VarlenWorkload(seqlens_q=[1] * len(lens), seqlens_k=lens, head_dim=d, heads=heads,
                          kv_heads=dec["kv_heads"], page_size=dec["page_size"])


def compare_serving(hw: HardwareConfig, data: dict, gpu_peak_tflops: float = H200_PEAK_TFLOPS,
                    gpu_bandwidth_tbs: float = H200_BANDWIDTH_TBS, progress=None) -> list[dict]:
    """One row per serving workload: the GPU's fastest measured path (with the heads that fill
    it; for the paged decode, the fastest that reads pages), the accelerator's modeled cycles
    on the same workload, and the two projections. Prefill and window compare one head (the
    GPU's time over its heads, as :func:`attenio.sim.gpu.compare` does; the accelerator runs
    heads one after another), the decode batch whole (its GQA groups share K/V).
    ``progress(fraction)`` after each schedule."""
    acc_peak, scale, hw_bw, bw_bpc = projection(hw, gpu_peak_tflops, gpu_bandwidth_tbs)
    out = []
    for i, name in enumerate(WORKLOADS):
        gpu = _best(data, name, paged_only=name == "decode")
        per_head = name != "decode"
        wl = _workload(hw, data, name, 1 if per_head else gpu["heads"])
        sch = schedule(hw, wl, keep_spans=False)
        if progress:
            progress((2 * i + 1) / (2 * len(WORKLOADS)))
        sch_bw = schedule(hw_bw, wl, keep_spans=False)
        if progress:
            progress((2 * i + 2) / (2 * len(WORKLOADS)))
        acc_s = sch.total_cycles / (hw.clock_mhz * 1e6)
        unit = gpu["heads"] if per_head else 1
        gpu_s = gpu["time_ms"] * 1e-3 / unit
        flops = gpu["flops"] / unit
        proj_s = acc_s * scale
        proj_bw_s = sch_bw.total_cycles / (hw.clock_mhz * 1e6) * scale
        row = {"workload": name, "compared": "one head" if per_head else "the batch",
               "gpu_heads": gpu["heads"], "gpu_backend": gpu["backend"],
               "gpu_call_ms": gpu["time_ms"], "gpu_ms": gpu_s * 1e3,
               "gpu_tflops": flops / gpu_s / 1e12, "flops": flops,
               "acc_cycles": sch.total_cycles, "acc_ms": acc_s * 1e3,
               "acc_pct_peak": 100 * flops / acc_s / 1e12 / acc_peak,
               "acc_read_bytes": sch.read_bytes,
               "proj_equal_peak_ms": proj_s * 1e3, "proj_equal_peak_speedup": gpu_s / proj_s,
               "proj_equal_peak_bw_ms": proj_bw_s * 1e3,
               "proj_equal_peak_bw_speedup": gpu_s / proj_bw_s,
               "proj_bw_bytes_per_cycle": bw_bpc}
        if name == "decode":
            flat = _best(data, name)
            row["gpu_contiguous_backend"], row["gpu_contiguous_ms"] = flat["backend"], \
                flat["time_ms"]
        out.append(row)
    return out
