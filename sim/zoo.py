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

from attenio.base.config import HardwareConfig, VarlenWorkload, Workload
from attenio.base.errors import ConfigError, bad
from attenio.base.workload import workload_from_options
from attenio.contract.variant import variant_of
from attenio.model.zoo import LayerType, ZooModel
from attenio.sim.plan import default_scale
from attenio.sim.schedule import schedule

__all__ = ["LayerRun", "layer_workload", "run_model", "gpu_data", "compare_gpu",
           "decode_matches", "GPU_ZOO_FILES"]

# FlashInfer on the zoo's prefill layers (scripts/gpu/gpu_zoo.py; data/gpu/README.md): two
# runs of one prompt (4K, 16K), one of the serving trace's varlen prefill and one of the four
# fa3 kernels that run did not compile in time, on four H100s of the device tool, read together
GPU_ZOO_FILES = ("h100-flashinfer-zoo-2026-12-07.json", "h100-flashinfer-zoo-2026-12-07-run2.json",
                 "h100-flashinfer-zoo-varlen-2026-12-07.json",
                 "h100-flashinfer-zoo-varlen-fa3-2026-12-07.json")


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


def gpu_data(path: str | None, phase: str) -> dict:
    """The GPU measurements ``model run`` compares with: ``path`` (JSONs of
    scripts/gpu/gpu_zoo.py, separated by commas and read together, or a serving JSON of
    gpu_flashinfer.py / gpu_serving.py), a bundled one by name (``h100-zoo``: the zoo's
    prefill layers, :data:`GPU_ZOO_FILES`, four runs; ``h200-serving``: the serving traces,
    sim/gpu.py's), or (``None``) the bundled one for ``phase``. Every row of the files read
    together competes (the fastest kernel measured is the GPU's time)."""
    from attenio.sim.gpu import bundled_dir, resolve_gpu_files
    from attenio.sim.serving import load_serving_jsons

    if path == "h200-serving" or (path is None and phase == "decode"):
        return {**load_serving_jsons(resolve_gpu_files("h200-serving")), "kind": "serving"}
    paths = ([bundled_dir() / f for f in GPU_ZOO_FILES] if path in (None, "h100-zoo")
             else [Path(x) for x in path.split(",")])
    parts = [(p, _read_json(p)) for p in paths]
    serving = [_is_serving(d) for _, d in parts]
    if serving == [True]:
        return {**load_serving_jsons([str(paths[0])]), "kind": "serving"}
    for (p, d), srv in zip(parts, serving, strict=True):
        if "measurements" not in d or srv:
            raise bad("gpu", str(p), "a JSON file written by scripts/gpu/gpu_zoo.py "
                                     "(it has no 'measurements', or it is a serving JSON)")
    gpus = {d.get("provenance", {}).get("gpu") for _, d in parts}
    if len(gpus) > 1:
        raise bad("gpu", path, f"files of one GPU, read together (these are of {sorted(gpus)})")
    first = parts[0][1]
    traces = {}
    for _, d in parts:
        traces.update(d.get("traces", {}))
    return {**first, "kind": "zoo", "traces": traces,
            "sources": {p.name: d["provenance"] for p, d in parts},
            "measurements": [{**m, "source": p.name} for p, d in parts
                             for m in d["measurements"]]}


def _is_serving(d: dict) -> bool:
    """A serving JSON (scripts/gpu/gpu_flashinfer.py, gpu_serving.py: its head dim ``d`` and
    decode traces), not a zoo one (whose ``traces`` hold the varlen prefill's lengths alone)."""
    return "d" in d and "decode_cache_lengths" in d.get("traces", {})


def _read_json(p: Path) -> dict:
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError) as e:
        raise bad("gpu", str(p), "h100-zoo, h200-serving, none, or a JSON file written by "
                                 f"scripts/gpu/gpu_zoo.py ({e})") from None
    if not isinstance(data, dict):
        raise bad("gpu", str(p), "a JSON object written by scripts/gpu/gpu_zoo.py")
    return data


def gpu_limits(data: dict) -> tuple[float, float, str]:
    """(peak TFLOP/s, bandwidth TB/s, GPU name) of the measured GPU, from the datasheets
    (sim/gpu.py's ``GPU_LIMITS``): the projections scale the accelerator to that GPU."""
    from attenio.sim.gpu import GPU_LIMITS

    name = data.get("provenance", {}).get("gpu", "")
    for key, lim in GPU_LIMITS.items():
        if key in name:
            return lim[0], lim[1], name
    raise ConfigError(f"gpu is invalid: {name or 'an unnamed GPU'} has no datasheet limits "
                      f"here (known: {', '.join(GPU_LIMITS)})")


def _measured_n(wl, data: dict):
    """The ``n`` of the file's rows that ran workload ``wl``: its length for one causal prompt,
    "prefill" for the serving trace's varlen prefill (the file's ``traces``), else None."""
    if isinstance(wl, Workload):
        return wl.seq_q if wl.batch == 1 and wl.seq_q == wl.seq_k else None
    trace = data.get("traces", {}).get("prefill_lengths")
    if trace and tuple(wl.seqlens_q) == tuple(wl.seqlens_k) == tuple(trace):
        return "prefill"
    return None


def compare_gpu(hw: HardwareConfig, model: ZooModel, runs: list[LayerRun],
                data: dict) -> dict[str, dict]:
    """For each layer run that the GPU file measured on the same workload (one causal
    sequence of the same length, or the serving trace's varlen prefill; ``model/layer`` among
    the measurement's layers): the fastest kernel's time beside the accelerator's, the
    kernels of the layer that were not measured there, and the accelerator projected to the
    GPU's peak
    (its cycles at the GPU's FLOP/s) and to its peak and bandwidth (scheduled again with the
    GPU's DRAM bytes per FLOP): layer name -> row. A serving JSON (``data["kind"]``) is
    matched on its decode batches instead (:func:`_compare_decode`)."""
    from attenio.sim.gpu import projection

    if data.get("kind") == "serving":
        return _compare_decode(hw, runs, data)

    peak, bw, gpu_name = gpu_limits(data)
    acc_peak, scale, hw_bw, bw_bpc = projection(hw, peak, bw)
    out = {}
    for r in runs:
        wl = r.workload
        n = None if r.refused else _measured_n(wl, data)
        if n is None:
            continue
        tag = f"{model.key}/{r.layer.name}"
        tried = [m for m in data["measurements"]
                 if tag in m.get("layers", ()) and m.get("n") == n]
        found = [m for m in tried if m.get("status") == "ok"]
        if not found:
            continue
        # kernels that ran nowhere for this layer (not compiled in the run's time …)
        missing = sorted({m["backend"] for m in tried} - {m["backend"] for m in found})
        best = min(found, key=lambda m: m["time_ms"])
        gpu_s = best["time_ms"] * 1e-3
        acc_s = r.cycles / (hw.clock_mhz * 1e6)
        proj_s = acc_s * scale
        proj_bw_s = _schedule(hw_bw, wl, r.layer).total_cycles / (hw.clock_mhz * 1e6) * scale
        out[r.layer.name] = {
            "gpu": gpu_name, "flashinfer": data["provenance"].get("flashinfer"),
            "gpu_backend": best["backend"], "gpu_ms": best["time_ms"],
            "gpu_source": best.get("source"), "gpu_not_measured": missing,
            "gpu_tflops": best["flops"] / gpu_s / 1e12,
            "gpu_pct_peak": 100 * best["flops"] / gpu_s / 1e12 / peak,
            "gpu_candidates": {m["backend"]: m["time_ms"] for m in found},
            "gpu_peak_tflops": peak, "gpu_bandwidth_tbs": bw,
            "acc_peak_tflops": acc_peak, "acc_ms": acc_s * 1e3,
            "proj_equal_peak_ms": proj_s * 1e3, "proj_equal_peak_speedup": gpu_s / proj_s,
            "proj_bw_bytes_per_cycle": bw_bpc, "proj_equal_peak_bw_ms": proj_bw_s * 1e3,
            "proj_equal_peak_bw_speedup": gpu_s / proj_bw_s}
    return out


# the serving JSON's decode workloads a zoo layer can be (sim/serving.py builds each)
_DECODE_ROWS = ("decode", "mla-decode")


def _same_batch(a, b) -> bool:
    """Two decode workloads alike in what the GPU ran: lengths, heads, dims, pages, V."""
    keys = ("seqlens_q", "seqlens_k", "heads", "kv_heads", "head_dim", "page_size", "v_in_k",
            "window_left", "window_right")
    return all(tuple(getattr(a, k)) == tuple(getattr(b, k)) if k.startswith("seqlens")
               else getattr(a, k) == getattr(b, k) for k in keys) \
        and (a.head_dim_v or a.head_dim) == (b.head_dim_v or b.head_dim)


def decode_matches(hw: HardwareConfig, runs: list[LayerRun], data: dict) -> dict[str, str]:
    """The decode layer runs whose batch a serving JSON measured (its GQA decode trace, MLA's
    absorbed decode): layer name -> the JSON's workload. No scheduling: a cheap test."""
    from attenio.sim.serving import _variant, _workload, candidates

    out = {}
    for r in runs:
        if r.refused or not isinstance(r.workload, VarlenWorkload):
            continue
        for name in _DECODE_ROWS:
            if not candidates(data, name):
                continue
            if name == "mla-decode":
                ref = _variant(hw, data, name)[1]
            else:
                ref = _workload(hw, data, name, data["traces"]["decode"]["heads"])
            if _same_batch(r.workload, ref):
                out[r.layer.name] = name
    return out


def _compare_decode(hw: HardwareConfig, runs: list[LayerRun], data: dict) -> dict[str, dict]:
    """Each decode layer run whose batch the serving JSON measured (:func:`decode_matches`):
    ``attenio compare``'s row for it (sim/serving.py: the accelerator's side scheduled there
    again on the same workload, and at the GPU's bytes per FLOP)."""
    from attenio.sim.serving import _best, compare_serving

    out = {}
    for layer, name in decode_matches(hw, runs, data).items():
        best = _best(data, name)
        src = data.get("sources", {}).get(best.get("source"), data["provenance"])
        peak, bw, gname = gpu_limits({"provenance": src})
        row = compare_serving(hw, data, peak, bw, variants=True, only=(name,))[0]
        out[layer] = {**row, "gpu": gname, "flashinfer": src.get("flashinfer"),
                      "gpu_peak_tflops": peak, "gpu_bandwidth_tbs": bw}
    return out
