"""Compare the accelerator's cycles with GPU baselines measured by scripts/gpu/gpu_baseline.py.

What is measured (the GPU CSV), what is modeled (the schedule generator) and what is projected
(the accelerator scaled to the GPU's peak, as the AttenIO paper's §5 does, and scaled to its peak
and DRAM bandwidth) are kept apart and labeled; docs/gpu-comparison.md explains each.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import ConfigError, bad
from attenio.sim.schedule import schedule

REQUIRED = ["backend", "dtype", "d", "n", "causal", "batch", "heads", "time_ms", "tflops",
            "sm_clock_mhz", "status"]
# H200 SXM dense BF16/FP16 tensor throughput and HBM3e bandwidth, NVIDIA H200 datasheet
# (989.4 TFLOP/s without sparsity; 4.8 TB/s).
H200_PEAK_TFLOPS = 989.4
H200_BANDWIDTH_TBS = 4.8
# The datasheet limits of each GPU measured (peak TFLOP/s, bandwidth TB/s), by a word of its
# name: the H100 SXM5's from NVIDIA's H100 datasheet (the same dense BF16 peak; 3.35 TB/s)
GPU_LIMITS = {"H100": (H200_PEAK_TFLOPS, 3.35), "H200": (H200_PEAK_TFLOPS, H200_BANDWIDTH_TBS)}
_UNIT_SUFFIXES = ("_s", "_us", "_ns", "_ms", "_mhz", "_ghz", "_hz")


# The measurements shipped with the package (data/gpu/ in the source tree, attenio/gpu_data/
# in an installed wheel): the attention shapes and the serving workloads on an H200. A name
# stands for one or more files, read together: every kernel measured competes.
BUNDLED = {"h200": ("h200-sdpa-2026-11-29.csv", "h200-flashinfer-dense-2026-12-06.csv"),
           "h200-serving": ("h200-serving-2026-12-02.json",
                            "h200-flashinfer-serving-2026-12-06.json")}


def bundled_dir() -> Path:
    """The folder of the bundled GPU measurements, installed or in the source tree."""
    here = Path(__file__).resolve().parents[1]
    for d in (here / "gpu_data", here / "data" / "gpu"):
        if (d / BUNDLED["h200"][0]).is_file():
            return d
    raise ConfigError("the bundled GPU measurements are missing from this installation "
                      "(reinstall attenio, or give --gpu FILE)")


def resolve_gpu_files(arg: str | None) -> list[str]:
    """``--gpu``: a bundled measurement's name (``h200``: attention shapes, ``h200-serving``:
    the serving workloads; ``None`` is ``h200``), or files (paths or bundled file names)
    separated by commas, all CSVs or all JSONs, read together."""
    if arg is None or arg in BUNDLED:
        return [str(bundled_dir() / f) for f in BUNDLED[arg or "h200"]]
    files = {f for fs in BUNDLED.values() for f in fs}
    out = []
    for part in arg.split(","):
        if Path(part).exists():
            out.append(part)
        elif part in files:
            out.append(str(bundled_dir() / part))
        else:
            raise bad("gpu", part if "," in arg else arg,
                      f"file not found (or name a bundled measurement: {', '.join(BUNDLED)})")
    kinds = {Path(p).suffix for p in out}
    if len(kinds) > 1:
        raise bad("gpu", arg, "mixes CSV and JSON files: give attention-shape CSVs "
                  "(scripts/gpu/gpu_baseline.py) or serving JSONs, not both")
    return out


@dataclasses.dataclass(frozen=True)
class GpuData:
    provenance: dict[str, str]
    rows: list[dict]
    path: str


def load_gpu_csvs(paths: list[str]) -> GpuData:
    """Several CSVs read as one: every row competes; the provenance is the first file's."""
    parts = [load_gpu_csv(p) for p in paths]
    return GpuData(parts[0].provenance, [r for d in parts for r in d.rows],
                   ", ".join(d.path for d in parts))


def load_gpu_csv(path: str | Path) -> GpuData:
    """Read a CSV written by scripts/gpu/gpu_baseline.py ('#' provenance lines, then a header).

    Raises :class:`ConfigError` naming what is wrong: a missing file, missing columns, a time
    or clock column in other units than ``time_ms`` / ``sm_clock_mhz``, or unparsable values.
    """
    p = Path(path)
    if not p.is_file():
        raise bad("gpu csv", str(p), "file not found (make one with scripts/gpu/gpu_baseline.py)")
    prov: dict[str, str] = {}
    lines = p.read_text().splitlines()
    body = []
    for line in lines:
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            prov[key.strip()] = value.strip()
        elif line.strip():
            body.append(line)
    if not body:
        raise bad("gpu csv", str(p), "has no header row")
    reader = csv.DictReader(body)
    cols = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in cols]
    if missing:
        odd = [c for c in cols if c.endswith(_UNIT_SUFFIXES) and c not in REQUIRED]
        hint = (f"; found {', '.join(odd)}: unknown units, expected time_ms and sm_clock_mhz"
                if odd else "")
        raise ConfigError(f"gpu csv={str(p)!r} is invalid: missing columns "
                          f"{', '.join(missing)}{hint}")
    rows = []
    for i, r in enumerate(reader, start=2):
        if r["status"] != "ok":
            continue
        try:
            rows.append({"backend": r["backend"], "dtype": r["dtype"], "d": int(r["d"]),
                         "n": int(r["n"]), "causal": bool(int(r["causal"])),
                         "batch": int(r["batch"]), "heads": int(r["heads"]),
                         "time_ms": float(r["time_ms"]), "tflops": float(r["tflops"]),
                         "sm_clock_mhz": float(r["sm_clock_mhz"])})
        except (TypeError, ValueError) as e:
            raise ConfigError(f"gpu csv={str(p)!r} is invalid: data row {i}: {e}") from None
    return GpuData(prov, rows, str(p))


def best_gpu_row(data: GpuData, n: int, d: int, causal: bool, dtype: str, filled: bool,
                 backend: str | None = None) -> dict:
    """The fastest backend's row for a shape (or ``backend``'s); ``filled`` picks the batch ×
    heads shape."""
    cands = [r for r in data.rows if r["n"] == n and r["d"] == d and r["causal"] == causal
             and r["dtype"] == dtype and ((r["batch"] * r["heads"] > 1) == filled)]
    shape = "filled batch×heads" if filled else "one head"
    if not cands:
        raise ConfigError(f"gpu csv={data.path!r} is invalid: no measured row for N={n} d={d} "
                          f"causal={causal} dtype={dtype} ({shape})")
    if backend is not None:
        named = [r for r in cands if r["backend"] == backend]
        if not named:
            raise bad("baseline", backend, f"was not measured for N={n} d={d} causal={causal} "
                      f"dtype={dtype} ({shape}); measured: "
                      + ", ".join(dict.fromkeys(r["backend"] for r in cands)))
        cands = named
    return min(cands, key=lambda r: r["time_ms"] / (r["batch"] * r["heads"]))


def attention_flops(n: int, d: int, causal: bool) -> float:
    """Useful FLOPs of one head (4·N²·d; half under a causal mask), as the GPU script counts."""
    return 4.0 * n * n * d / (2 if causal else 1)


def projection(hw: HardwareConfig, gpu_peak_tflops: float, gpu_bandwidth_tbs: float):
    """What the projections need: the accelerator's peak (TFLOP/s), the factor that scales it
    to the GPU's peak, and the accelerator with the GPU's bytes per FLOP (DRAM bytes per cycle
    for its MAC count; that config and the bytes per cycle)."""
    acc_flops_per_cycle = 2 * hw.macs
    acc_peak_tflops = acc_flops_per_cycle * hw.clock_mhz * 1e6 / 1e12
    bw_bpc = max(1, round(acc_flops_per_cycle * gpu_bandwidth_tbs / gpu_peak_tflops))
    return (acc_peak_tflops, acc_peak_tflops / gpu_peak_tflops,
            dataclasses.replace(hw, dram_bytes_per_cycle=bw_bpc), bw_bpc)


def compare(hw: HardwareConfig, data: GpuData, ns: list[int], ds: list[int],
            causals: list[bool], dtype: str = "bf16", gpu_peak_tflops: float = H200_PEAK_TFLOPS,
            gpu_bandwidth_tbs: float = H200_BANDWIDTH_TBS, progress=None,
            baseline: str | None = None) -> list[dict]:
    """One row per (N, d, causal): measured GPU (its fastest backend for the shape, or
    ``baseline``), modeled accelerator, two projections; ``progress(fraction)`` after each
    row, if given."""
    acc_peak_tflops, scale, hw_bw, bw_bpc = projection(hw, gpu_peak_tflops, gpu_bandwidth_tbs)
    out = []
    for d in ds:
        for n in ns:
            for causal in causals:
                one = best_gpu_row(data, n, d, causal, dtype, False, baseline)
                full = best_gpu_row(data, n, d, causal, dtype, True, baseline)
                wl = Workload.square(n, d, causal=causal)
                sch = schedule(hw, wl, keep_spans=False)
                sch_bw = schedule(hw_bw, wl, keep_spans=False)
                fl = attention_flops(n, d, causal)
                acc_s = sch.total_cycles / (hw.clock_mhz * 1e6)
                proj_peak_s = acc_s * scale
                proj_bw_s = sch_bw.total_cycles / (hw.clock_mhz * 1e6) * scale
                heads_full = full["batch"] * full["heads"]
                gpu_one_s = one["time_ms"] * 1e-3
                gpu_full_s = full["time_ms"] * 1e-3 / heads_full
                out.append({
                    "n": n, "d": d, "causal": causal, "dtype": dtype,
                    "gpu_backend_one": one["backend"], "gpu_one_us": gpu_one_s * 1e6,
                    "gpu_one_cycles": round(gpu_one_s * one["sm_clock_mhz"] * 1e6),
                    "gpu_one_tflops": fl / gpu_one_s / 1e12,
                    "gpu_backend_filled": full["backend"], "gpu_filled_heads": heads_full,
                    "gpu_filled_us_per_head": gpu_full_s * 1e6,
                    "gpu_filled_tflops": fl / gpu_full_s / 1e12,
                    "gpu_filled_pct_peak": 100 * fl / gpu_full_s / 1e12 / gpu_peak_tflops,
                    "sm_clock_mhz": full["sm_clock_mhz"],
                    "acc_cycles": sch.total_cycles, "acc_us": acc_s * 1e6,
                    "acc_pct_peak": 100 * fl / acc_s / 1e12 / acc_peak_tflops,
                    "acc_read_bytes": sch.read_bytes, "acc_write_bytes": sch.write_bytes,
                    "rtl_cycles": None,  # filled in where an RTL simulation exists
                    "proj_equal_peak_us": proj_peak_s * 1e6,
                    "proj_equal_peak_speedup": gpu_full_s / proj_peak_s,
                    "proj_equal_peak_bw_us": proj_bw_s * 1e6,
                    "proj_equal_peak_bw_speedup": gpu_full_s / proj_bw_s,
                    "proj_bw_bytes_per_cycle": bw_bpc,
                })
                if progress is not None:
                    progress(len(out) / (len(ds) * len(ns) * len(causals)))
    return out


def roofline_plot(rows: list[dict], hw: HardwareConfig, path: str | Path,
                  gpu_peak_tflops: float = H200_PEAK_TFLOPS,
                  gpu_bandwidth_tbs: float = H200_BANDWIDTH_TBS,
                  gpu_gemm_tflops: float | None = None) -> dict:
    """Two panels. Left: log-log roofline of both machines, every point at its workload's
    compulsory intensity (FLOP per byte of reading Q, K, V and writing O once: one x for both
    machines, a property of the workload); the GPU's roof at its measured GEMM throughput
    (``gpu_gemm_tflops``; the datasheet peak dashed above it), the accelerator's at its peak;
    GPU points measured, accelerator points modeled; colour is N, marker d, filled = causal.
    Right: the projection, the accelerator scaled to the GPU's peak (and to its bytes per
    FLOP), as a speedup over the measured GPU, against N. Returns what it drew (the points and
    the roofs) so a test can check the figure's data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    acc_peak = 2 * hw.macs * hw.clock_mhz * 1e6 / 1e12
    acc_bw = hw.dram_bytes_per_cycle * hw.clock_mhz * 1e6 / 1e12
    gpu_roof = gpu_gemm_tflops or gpu_peak_tflops
    eb = hw.element_bytes
    pts = []
    for r in rows:
        fl = attention_flops(r["n"], r["d"], r["causal"])
        x = fl / (4 * r["n"] * r["d"] * eb)
        pts.append((r, x, r["gpu_filled_tflops"], x, fl / (r["acc_us"] * 1e-6) / 1e12))
    xs_all = [p[1] for p in pts] + [gpu_roof / gpu_bandwidth_tbs, acc_peak / acc_bw]
    lo, hi = min(xs_all) / 2, max(xs_all) * 2
    xs = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5.5),
                                  gridspec_kw={"width_ratios": [1.25, 1]})
    ax.plot(xs, [min(gpu_roof, gpu_bandwidth_tbs * x) for x in xs], "k-", lw=1.2,
            label=f"GPU roof ({gpu_roof:g} TFLOP/s "
                  + ("measured GEMM" if gpu_gemm_tflops else "datasheet")
                  + f", {gpu_bandwidth_tbs:g} TB/s)")
    if gpu_gemm_tflops:
        ax.axhline(gpu_peak_tflops, color="k", ls="--", lw=0.8,
                   label=f"GPU datasheet peak ({gpu_peak_tflops:g} TFLOP/s)")
    ax.plot(xs, [min(acc_peak, acc_bw * x) for x in xs], "r-", lw=1.2,
            label=f"accelerator roof ({acc_peak:.2f} TFLOP/s, {acc_bw:.3f} TB/s)")
    ns = sorted({r["n"] for r in rows})
    norm = LogNorm(vmin=min(ns), vmax=max(ns) if max(ns) > min(ns) else min(ns) * 2)
    cmap = plt.get_cmap("viridis")
    marks = {64: "o", 128: "^"}
    for r, gi, gt, ai, at in pts:
        mk = marks.get(r["d"], "s")
        col = cmap(norm(r["n"]))
        face = col if r["causal"] else "none"
        ax.plot(gi, gt, mk, mec=col, mfc=face, ms=7, mew=1.4)
        ax.plot(ai, at, mk, mec=col, mfc=face, ms=7, mew=1.4)
    ax.annotate("GPU (measured)", xy=(min(p[1] for p in pts), max(p[2] for p in pts)),
                xytext=(6, 8), textcoords="offset points", fontsize=8)
    ax.annotate("accelerator (modeled)", xy=(min(p[3] for p in pts), max(p[4] for p in pts)),
                xytext=(-10, 10), textcoords="offset points", fontsize=8, color="r")
    for d, mk in marks.items():
        if any(r["d"] == d for r in rows):
            ax.plot([], [], mk, color="gray", mfc="none", label=f"d = {d}")
    ax.plot([], [], "o", color="gray", label="filled: causal")
    sm = plt.cm.ScalarMappable(norm=norm, cmap=cmap)
    fig.colorbar(sm, ax=ax, label="N (sequence length)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("compulsory intensity (FLOP per byte of Q, K, V read and O written once)")
    ax.set_ylabel("attained TFLOP/s")
    ax.set_title("Roofline: measured GPU vs modeled accelerator, each at its own peak",
                 fontsize=10)
    ax.legend(fontsize=7, loc="center left")
    ax.grid(True, which="both", alpha=0.3)
    for d in sorted({r["d"] for r in rows}):
        for causal in (False, True):
            sub = sorted((r for r in rows if r["d"] == d and r["causal"] == causal),
                         key=lambda r: r["n"])
            if not sub:
                continue
            style = dict(marker=marks.get(d, "s"), mfc="none" if not causal else None)
            lab = f"d = {d}{', causal' if causal else ''}"
            line, = ax2.plot([r["n"] for r in sub], [r["proj_equal_peak_speedup"] for r in sub],
                             "-", label=f"{lab}: equal peak", **style)
            ax2.plot([r["n"] for r in sub], [r["proj_equal_peak_bw_speedup"] for r in sub], ":",
                     color=line.get_color(), label=f"{lab}: equal peak and bytes/FLOP",
                     **style)
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("N (sequence length)")
    ax2.set_ylabel("projected speedup over the measured GPU (×)")
    ax2.set_title("Projection (an estimate): the accelerator scaled to the GPU's peak",
                  fontsize=10)
    ax2.legend(fontsize=7)
    ax2.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"gpu_roof_tflops": gpu_roof, "acc_roof_tflops": acc_peak,
            "points": [{"n": r["n"], "d": r["d"], "causal": r["causal"], "x": gi,
                        "gpu_tflops": gt, "acc_tflops": at} for r, gi, gt, _, at in pts]}


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))
