"""The model zoo's runs (``attenio model run``): each layer type of a model (model/zoo.py) as a
workload under the caller's prefill or decode batch, with its variant, scheduled on a preset:
cycles, PE utilization by MAC, DRAM bytes and time at the preset's clock; and, where a GPU
kernel was measured on the same layer and batch (scripts/gpu/gpu_zoo.py), the GPU's time beside
the accelerator's projections (sim/gpu.py's: scaled to the GPU's peak, and to its peak and
bandwidth)."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

from attenio.base.config import HardwareConfig
from attenio.base.errors import ConfigError
from attenio.base.workload import workload_from_options
from attenio.contract.variant import variant_of
from attenio.model.zoo import LayerType, ZooModel
from attenio.sim.plan import default_scale
from attenio.sim.schedule import schedule

__all__ = ["LayerRun", "layer_workload", "run_model", "gpu_zoo_data", "compare_gpu",
           "GPU_ZOO_FILE"]

# FlashInfer on the zoo's prefill layers (scripts/gpu/gpu_zoo.py; data/gpu/README.md)
GPU_ZOO_FILE = "h100-flashinfer-zoo-2026-12-07.json"
# dense BF16 tensor peak without sparsity and HBM bandwidth, from NVIDIA's H100 (SXM5) and
# H200 datasheets: the projections scale the accelerator to the GPU that was measured
GPU_LIMITS = {"H100": (989.4, 3.35), "H200": (989.4, 4.8)}


@dataclass
class LayerRun:
    """One layer type's run: its workload and schedule, or why it did not run."""

    layer: LayerType
    workload: object | None = None
    cycles: int | None = None
    pe_util_mac: float | None = None
    read_bytes: int | None = None
    write_bytes: int | None = None
    time_us: float | None = None
    refused: str | None = None

    def to_dict(self) -> dict:
        d = {"layer": self.layer.name, "count": self.layer.count,
             "attention": self.layer.describe()}
        if self.refused:
            return {**d, "refused": self.refused}
        return {**d, "workload": self.workload.to_dict(), "cycles": self.cycles,
                "pe_util_mac": self.pe_util_mac, "read_bytes": self.read_bytes,
                "write_bytes": self.write_bytes, "time_us": self.time_us,
                "time_us_all_layers": self.time_us * self.layer.count}


def layer_workload(hw: HardwareConfig, lt: LayerType, **opts):
    """The workload of layer type ``lt`` under the batch options ``opts`` (``n``,
    ``seqlens``, ``decode`` with ``cache_lens``, ``page_size``, ``batch``: as the CLI's),
    causal, its window as FlashAttention's ``(window − 1, 0)``."""
    window = (lt.window - 1, 0) if lt.window else (-1, -1)
    return workload_from_options(hw, d=lt.head_dim, heads=lt.heads, kv_heads=lt.kv_heads,
                                 causal=True, window=window, **opts)


def run_model(hw: HardwareConfig, model: ZooModel, phase: str, progress=None,
              **opts) -> list[LayerRun]:
    """Each of ``model``'s layer types that runs in ``phase`` (``prefill`` or ``decode``)
    scheduled on ``hw`` under the batch options ``opts`` (:func:`layer_workload`); a layer
    the hardware cannot run (a head dim past the preset's) comes back ``refused`` with the
    reason. ``progress(fraction)`` after each."""
    todo = [lt for lt in model.layers if lt.phase in (None, phase)]
    out = []
    for i, lt in enumerate(todo):
        wl = layer_workload(None, lt, **opts)            # the batch's options checked here
        if lt.head_dim_v is not None:
            wl = replace(wl, head_dim_v=lt.head_dim_v, v_in_k=lt.v_in_k)
        sinks = [0.0] * lt.heads if lt.sinks else None      # their values move no cycle
        why = variant_of(wl, lt.softmax_scale, lt.softcap, sinks).unbuilt()
        if not why:
            try:
                hw.check_workload(wl)
            except ConfigError as e:                    # a head dim past this preset's …
                why = [str(e)]
        if why:
            out.append(LayerRun(lt, wl, refused="; ".join(why)))
        else:
            sch = _schedule(hw, wl, lt)
            out.append(LayerRun(lt, wl, sch.total_cycles, sch.pe_util_mac, sch.read_bytes,
                                sch.write_bytes, sch.total_cycles / hw.clock_mhz))
        if progress is not None:
            progress((i + 1) / len(todo))
    return out


def _schedule(hw: HardwareConfig, wl, lt: LayerType):
    sinks = [0.0] * lt.heads if lt.sinks else None      # their values move no cycle
    return schedule(hw, wl, "attenio", keep_spans=False,
                    scale=default_scale(hw, wl, lt.softcap, sinks))


def gpu_zoo_data(path: str | None = None) -> dict:
    """The zoo's GPU measurements: ``path``, or the bundled file (:data:`GPU_ZOO_FILE`)."""
    from attenio.base.errors import bad
    from attenio.sim.gpu import bundled_dir

    p = Path(path) if path else bundled_dir() / GPU_ZOO_FILE
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise bad("gpu", str(p), f"a JSON file written by scripts/gpu/gpu_zoo.py ({e})") \
            from None
    if not isinstance(data, dict) or "measurements" not in data:
        raise bad("gpu", str(p), "a JSON file written by scripts/gpu/gpu_zoo.py "
                                 "(it has no 'measurements')")
    return data


def gpu_limits(data: dict) -> tuple[float, float, str]:
    """(peak TFLOP/s, bandwidth TB/s, GPU name) of the measured GPU, from the datasheets."""
    name = data.get("provenance", {}).get("gpu", "")
    for key, lim in GPU_LIMITS.items():
        if key in name:
            return lim[0], lim[1], name
    raise ConfigError(f"gpu is invalid: {name or 'an unnamed GPU'} has no datasheet limits "
                      f"here (known: {', '.join(GPU_LIMITS)})")


def compare_gpu(hw: HardwareConfig, model: ZooModel, runs: list[LayerRun],
                data: dict) -> dict[str, dict]:
    """For each layer run that the GPU file measured on the same workload (one causal
    sequence of the same length, ``model/layer`` among the measurement's layers): the fastest
    kernel's time beside the accelerator's, and the accelerator projected to the GPU's peak
    (its cycles at the GPU's FLOP/s) and to its peak and bandwidth (scheduled again with the
    GPU's DRAM bytes per FLOP): layer name -> row."""
    from attenio.sim.gpu import projection

    peak, bw, gpu_name = gpu_limits(data)
    acc_peak, scale, hw_bw, bw_bpc = projection(hw, peak, bw)
    out = {}
    for r in runs:
        wl = r.workload
        if r.refused or not hasattr(wl, "seq_q") or wl.batch != 1 or wl.seq_q != wl.seq_k:
            continue
        tag = f"{model.key}/{r.layer.name}"
        found = [m for m in data["measurements"] if m.get("status") == "ok"
                 and tag in m.get("layers", ()) and m.get("n") == wl.seq_q]
        if not found:
            continue
        best = min(found, key=lambda m: m["time_ms"])
        gpu_s = best["time_ms"] * 1e-3
        acc_s = r.cycles / (hw.clock_mhz * 1e6)
        proj_s = acc_s * scale
        proj_bw_s = _schedule(hw_bw, wl, r.layer).total_cycles / (hw.clock_mhz * 1e6) * scale
        out[r.layer.name] = {
            "gpu": gpu_name, "gpu_backend": best["backend"], "gpu_ms": best["time_ms"],
            "gpu_tflops": best["flops"] / gpu_s / 1e12,
            "gpu_pct_peak": 100 * best["flops"] / gpu_s / 1e12 / peak,
            "gpu_candidates": {m["backend"]: m["time_ms"] for m in found},
            "gpu_peak_tflops": peak, "gpu_bandwidth_tbs": bw,
            "acc_peak_tflops": acc_peak, "acc_ms": acc_s * 1e3,
            "proj_equal_peak_ms": proj_s * 1e3, "proj_equal_peak_speedup": gpu_s / proj_s,
            "proj_bw_bytes_per_cycle": bw_bpc, "proj_equal_peak_bw_ms": proj_bw_s * 1e3,
            "proj_equal_peak_bw_speedup": gpu_s / proj_bw_s}
    return out
