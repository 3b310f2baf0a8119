"""The serving workloads (issue #29) against a GPU: varlen prefill, a sliding window and a paged
decode batch, each measured on the GPU by scripts/gpu/gpu_serving.py and modeled on the accelerator
with the same traces and heads, with the projections of sim/gpu.py (the accelerator scaled to
the GPU's peak; and to its peak and bytes per FLOP). docs/gpu-comparison.md explains them.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from attenio.base.config import HardwareConfig, VarlenWorkload, Workload
from attenio.base.errors import ConfigError, bad
from attenio.sim.gpu import H200_BANDWIDTH_TBS, H200_PEAK_TFLOPS, projection
from attenio.sim.schedule import schedule

__all__ = ["load_serving_json", "load_serving_jsons", "compare_serving", "PAGED_BACKENDS",
           "candidates", "VARIANTS"]

# GPU paths that read K/V out of pages (the others read contiguous caches)
PAGED_BACKENDS = ("sdpa-gathered-pages", "flex-paged", "flashinfer-decode", "flashinfer-decode-tc",
                  "flashinfer-paged-fa3")
WORKLOADS = ("prefill", "window", "decode")
# the decode trace from an 8-bit K/V cache (issue #46): against the GPU's FP8-K/V kernels, the
# accelerator with 8-bit elements (:func:`kv8`), each key's K and V scales in its pages
FP8 = ("decode-fp8",)
# decode batches whose sequences share a prefix's pages (issue #46), where the file has them
SHARED = ("shared-4k", "shared-32k")
PER_HEAD = ("prefill", "window")   # compared one head: the GPU's time over its heads


def load_serving_json(path: str | Path) -> dict:
    """Read a JSON written by scripts/gpu/gpu_serving.py or gpu_flashinfer.py; :class:`ConfigError`
    names what is missing (the file, its traces, its measurements)."""
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
    for m in data["measurements"]:
        m.setdefault("source", p.name)
    return data


def load_serving_jsons(paths: list[str]) -> dict:
    """Several serving JSONs read as one (every kernel competes). They must share the traces
    the accelerator is modeled on (prefill and decode lengths, window, d): a file that differs
    is named."""
    parts = [load_serving_json(p) for p in paths]
    first = parts[0]
    for other in parts[1:]:
        for key in ("prefill_lengths", "decode_cache_lengths", "window"):
            if other["traces"].get(key) != first["traces"].get(key):
                raise bad("gpu json", other["path"],
                          f"its traces' {key} differ from {first['path']}'s: measure both on "
                          "the same traces (scripts/gpu/serving_traces.py)")
        if other["d"] != first["d"]:
            raise bad("gpu json", other["path"], f"d={other['d']} differs from {first['path']}'s "
                      f"d={first['d']}")
    traces = {}                         # each file's traces (those they share agree)
    for d in parts:
        traces = {**d["traces"], **traces}
    return {**first, "traces": traces, "path": ", ".join(d["path"] for d in parts),
            "provenance": first["provenance"],
            "sources": {Path(d["path"]).name: d["provenance"] for d in parts},
            "measurements": [m for d in parts for m in d["measurements"]]}


def candidates(data: dict, workload: str) -> list[dict]:
    """The measured rows of ``workload`` that can be its baseline, each with ``unit_ms`` (per
    head for prefill and window, the whole batch for decode), fastest first. Decode counts only
    the paths that read pages, as the accelerator does."""
    rows = [m for m in data["measurements"] if m["workload"] == workload and m["status"] == "ok"
            and (not workload.startswith("decode") or m["backend"] in PAGED_BACKENDS)]
    unit = (lambda m: m["time_ms"] / m["heads"]) if workload in PER_HEAD else \
        (lambda m: m["time_ms"])
    return sorted(({**m, "unit_ms": unit(m)} for m in rows), key=lambda m: m["unit_ms"])


def _best(data: dict, workload: str, baseline: str | None = None) -> dict:
    rows = candidates(data, workload)
    if not rows:
        raise ConfigError(f"gpu json={data['path']!r} is invalid: no measured {workload} row"
                          + (" that reads pages" if workload.startswith("decode") else ""))
    if baseline is None:
        return rows[0]
    named = [r for r in rows if r["backend"] == baseline]
    if not named:
        raise bad("baseline", baseline, f"was not measured for {workload}; measured: "
                  + ", ".join(dict.fromkeys(r["backend"] for r in rows)))
    return named[0]


def _shared(data: dict, name: str):
    """A shared-prefix decode trace as the GPU ran it (scripts/gpu/serving_traces.py): every
    sequence's table begins with the prefix's pages, its own suffix's pages after them (each
    page its own). Returns (workload, block table)."""
    t = data["traces"]
    tr = next(x for x in t["shared"] if x["name"] == name)
    dec, page = t["decode"], t["decode"]["page_size"]
    own, pre = _uniform(tr), tr["prefix"] // page
    rows, nxt = [], pre
    for n in own:
        k = -(-n // page)
        rows.append(list(range(pre)) + list(range(nxt, nxt + k)))
        nxt += k
    lens = [tr["prefix"] + n for n in own]
    wl = VarlenWorkload(seqlens_q=[1] * len(lens), seqlens_k=lens, head_dim=data["d"],
                        heads=dec["heads"], kv_heads=dec["kv_heads"], page_size=page)
    return wl, rows


def kv8(hw: HardwareConfig) -> HardwareConfig:
    """``hw`` with 8-bit elements (Q, K and V; an 8-bit K/V cache's decode): the same array,
    buffers and bus, each word holding twice the elements, and a K/V ring of twice the rows in
    the same bytes, and the V factor unit (configs/asplos26-kv8.toml is asplos26's)."""
    return dataclasses.replace(hw, data_bits=8, kv_ring_depth=2 * hw.kv_ring_depth,
                               value_scales_unit=True)


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


# The model zoo's variant layers measured on the GPU (scripts/gpu/gpu_flashinfer.py; issue
# #46): each against the fastest kernel measured for it, the whole layer (all its heads) on
# both sides, on the accelerator with the unit it needs (``+softcap`` …) and, for MLA's
# absorbed decode, head dims to 576 (configs/asplos26-576.toml).
VARIANTS = ("softcap", "softcap-off", "alibi", "sinks-window", "sinks-full", "mla-decode")


def _uniform(trace: dict) -> list[int]:
    """A trace's lengths drawn uniformly from [low, high], seeded: what
    scripts/gpu/serving_traces.py's ``uniform_lengths`` draws for the GPU."""
    rng = np.random.default_rng(trace["seed"])
    return [int(v) for v in rng.integers(trace["low"], trace["high"] + 1, trace["sequences"])]


def _variant(hw: HardwareConfig, data: dict, name: str):
    """(hardware, workload, scale) of a variant row: the trace the GPU ran, the unit it needs."""
    from attenio.model.variants import alibi_slopes_standard
    from attenio.sim.plan import default_scale

    t = data["traces"]
    if name == "mla-decode":
        m = t["mla"]
        hw = dataclasses.replace(hw, max_head_dim=max(hw.max_head_dim, m["d_ckv"] + m["d_kpe"]))
        wl = VarlenWorkload(seqlens_q=[1] * m["sequences"], seqlens_k=_uniform(m),
                            head_dim=m["d_ckv"] + m["d_kpe"], head_dim_v=m["d_ckv"],
                            heads=m["heads"], kv_heads=1, page_size=m["page_size"], v_in_k=True)
        return hw, wl, None
    if name.startswith("sinks"):
        c = t["sinks"]
        hw = dataclasses.replace(hw, sinks_unit=True)
        window = (c["window"] - 1, 0) if name == "sinks-window" else (-1, -1)
        wl = Workload(seq_q=c["n"], seq_k=c["n"], head_dim=c["d"], heads=c["heads"],
                      kv_heads=c["kv_heads"], causal=True, window_left=window[0],
                      window_right=window[1])
        return hw, wl, default_scale(hw, wl, sinks=[1.0] * c["heads"])
    c = t["softcap"]
    wl = Workload(seq_q=c["n"], seq_k=c["n"], head_dim=data["d"], heads=c["heads"],
                  kv_heads=c["kv_heads"], causal=True)
    if name == "softcap":
        hw = dataclasses.replace(hw, softcap_unit=True)
        return hw, wl, default_scale(hw, wl, softcap=c["cap"])
    if name == "alibi":
        hw = dataclasses.replace(hw, alibi_unit=True)
        return hw, wl, default_scale(hw, wl, alibi_slopes=alibi_slopes_standard(c["heads"]))
    return hw, wl, None


def compare_serving(hw: HardwareConfig, data: dict, gpu_peak_tflops: float = H200_PEAK_TFLOPS,
                    gpu_bandwidth_tbs: float = H200_BANDWIDTH_TBS, progress=None,
                    baselines: dict[str, str] | None = None,
                    variants: bool = False, only: tuple[str, ...] | None = None) -> list[dict]:
    """One row per serving workload against the GPU's fastest measured kernel for it (per
    head for prefill and window, the decode batch whole, among the paths that read pages;
    ``baselines`` maps a workload to another backend), the accelerator's modeled cycles on the
    same workload, and the two projections. Each side is shown against its limits: the GPU's %
    of its peak and of its measured HBM read rate (where the file has one), the accelerator's
    % of its compute roof and of its DRAM bandwidth busy. Every candidate's time is kept in
    ``gpu_candidates``. ``variants``: the variant layers (:data:`VARIANTS`) the file measured
    too, each its whole layer; ``only``: just those rows. ``progress(fraction)`` after each
    schedule."""
    ceilings = [v.get("hbm_read_tbs") for v in data.get("sources", {}).values()]
    read_ceiling = max((c for c in ceilings if c), default=data["provenance"].get("hbm_read_tbs"))
    names = list(WORKLOADS) + [n for n in FP8 + SHARED if candidates(data, n)]
    if variants:
        names += [n for n in VARIANTS if candidates(data, n)]
    if only is not None:
        names = [n for n in names if n in only]
    out = []
    for i, name in enumerate(names):
        gpu = _best(data, name, (baselines or {}).get(name))
        per_head = name in PER_HEAD
        table = None
        if name in VARIANTS:
            hw_v, wl, sp = _variant(hw, data, name)
        elif name in SHARED:
            (wl, table), hw_v, sp = _shared(data, name), hw, None
        elif name in FP8:           # per-row Q scales, each key's K and V factors in the pages
            from attenio.sim.plan import default_scale

            hw_v = kv8(hw)
            wl = _workload(hw_v, data, "decode", gpu["heads"])
            sp = default_scale(hw_v, wl, q_rows=True, key_scales=True, value_scales=True)
        else:
            hw_v, sp = hw, None
            wl = _workload(hw, data, name, 1 if per_head else gpu["heads"])
        acc_peak, scale, hw_bw, bw_bpc = projection(hw_v, gpu_peak_tflops, gpu_bandwidth_tbs)
        sch = schedule(hw_v, wl, keep_spans=False, scale=sp, block_table=table)
        if progress:
            progress((2 * i + 1) / (2 * len(names)))
        sch_bw = schedule(hw_bw, wl, keep_spans=False, scale=sp, block_table=table)
        if progress:
            progress((2 * i + 2) / (2 * len(names)))
        acc_s = sch.total_cycles / (hw_v.clock_mhz * 1e6)
        unit = gpu["heads"] if per_head else 1
        gpu_s = gpu["time_ms"] * 1e-3 / unit
        flops = gpu["flops"] / unit
        proj_s = acc_s * scale
        proj_bw_s = sch_bw.total_cycles / (hw.clock_mhz * 1e6) * scale
        moved = sch.read_bytes + sch.write_bytes
        row = {"workload": name, "compared": "one head" if per_head else (
                   "the layer" if name in VARIANTS else "the batch"),
               "gpu_heads": gpu["heads"], "gpu_backend": gpu["backend"],
               "gpu_source": gpu.get("source"), "gpu_chosen": "named" if (baselines or {})
               .get(name) else "fastest measured",
               "gpu_call_ms": gpu["time_ms"], "gpu_ms": gpu_s * 1e3,
               "gpu_tflops": flops / gpu_s / 1e12, "flops": flops,
               "gpu_pct_peak": 100 * flops / gpu_s / 1e12 / gpu_peak_tflops,
               "gpu_pct_read_ceiling": (100 * gpu["kv_bytes_touched"] / unit / gpu_s / 1e12
                                        / read_ceiling
                                        if read_ceiling and "kv_bytes_touched" in gpu else None),
               "gpu_read_ceiling_tbs": read_ceiling,
               "gpu_candidates": {c["backend"] + ("" if not per_head else f" ({c['heads']}h)"):
                                  c["unit_ms"] for c in candidates(data, name)},
               "acc_cycles": sch.total_cycles, "acc_ms": acc_s * 1e3,
               "acc_units": [u for u in ("softcap_unit", "sinks_unit", "alibi_unit",
                                         "value_scales_unit")
                             if getattr(hw_v, u)], "acc_max_head_dim": hw_v.max_head_dim,
               "acc_pct_peak": 100 * flops / acc_s / 1e12 / acc_peak,
               "acc_pct_dram_busy": 100 * moved / (sch.total_cycles * hw_v.dram_bytes_per_cycle),
               "acc_read_bytes": sch.read_bytes,
               # sequences whose shared pages the schedule read once (0: the plain program
               # was faster), at the accelerator's bandwidth and at the projected one
               "acc_shared_seqs": sum(n for _, n, _ in sch.shared_runs or ()),
               "acc_bw_shared_seqs": sum(n for _, n, _ in sch_bw.shared_runs or ()),
               "proj_equal_peak_ms": proj_s * 1e3, "proj_equal_peak_speedup": gpu_s / proj_s,
               "proj_equal_peak_bw_ms": proj_bw_s * 1e3,
               "proj_equal_peak_bw_speedup": gpu_s / proj_bw_s,
               "proj_bw_bytes_per_cycle": bw_bpc}
        if name in FP8:
            row["acc_data_bits"] = hw_v.data_bits
        if name == "decode":
            flat = [m for m in data["measurements"] if m["workload"] == "decode"
                    and m["status"] == "ok" and m["backend"] not in PAGED_BACKENDS]
            if flat:
                f = min(flat, key=lambda m: m["time_ms"])
                row["gpu_contiguous_backend"], row["gpu_contiguous_ms"] = f["backend"], \
                    f["time_ms"]
        out.append(row)
    return out
