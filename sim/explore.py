"""Design-space exploration: a sweep over HardwareConfig fields and workloads, each point run
through the schedule generator and the area and energy estimates (sim/cost.py), in parallel on
this machine (a process pool) or on a Dask cluster (``distributed``), resumable from its results
file; then the Pareto front of cycles × area × energy per workload (docs/explore.md).

A sweep is a base configuration and a grid: hardware fields (``HW_FIELDS``, the config's own
names; ``sram_kb`` is ``sram_bytes`` in KiB, for short) and workload fields (``WL_FIELDS``),
each a list of values. Every combination is a point; a point the hardware cannot run (a head
dim over ``max_head_dim``, memory too small for one row, a value a field refuses) is recorded
as infeasible with the reason, and the sweep goes
on. A results file (JSON lines, one point each, written as points finish) makes a sweep
resumable: a rerun skips the points already in it.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path

from attenio.base import config as C
from attenio.base.errors import ConfigError, bad
from attenio.sim.fanout import RETRIES, fan_out

__all__ = ["HW_FIELDS", "WL_FIELDS", "parse_values", "parse_sets", "grid", "evaluate",
           "run_sweep", "pareto_front", "point_label", "plot_front"]

HW_FIELDS = ("mac_lines", "macs_per_line", "sram_kb", "sram_bytes", "tile_rows", "exp_lanes",
             "data_bits",
             "dram_bytes_per_cycle", "clock_mhz", "kv_ring_depth", "max_keys_per_step",
             "max_head_dim")
WL_FIELDS = ("n", "nk", "d", "heads", "kv_heads", "batch", "causal")
_FLOAT_FIELDS = ("clock_mhz",)
MAX_VALUES = 10_000      # values one --set range may expand to
MAX_POINTS = 1_000_000   # points a grid may hold


def parse_values(field: str, text: str) -> list:
    """``"a,b,c"`` or ``"lo:hi:step"`` (inclusive, integers) or one value; ``causal`` takes
    ``true``/``false``/``both``. Raises ConfigError for an unknown field, an empty or inverted
    range, or a value that is not a number."""
    if field not in HW_FIELDS + WL_FIELDS:
        raise bad("field", field, f"sweepable fields: {', '.join(HW_FIELDS + WL_FIELDS)}")
    text = str(text).strip()
    if field == "causal":
        opts = {"true": [True], "false": [False], "both": [False, True]}
        vals: list = []
        for part in text.split(","):
            if part.strip().lower() not in opts:
                raise bad(field, part, "true, false or both")
            vals += opts[part.strip().lower()]
        return vals
    kind = float if field in _FLOAT_FIELDS else int

    def conv(x):
        try:
            return kind(x)
        except ValueError:
            raise bad(field, text, "numbers separated by commas, or lo:hi:step") from None

    if ":" in text:
        parts = text.split(":")
        if len(parts) != 3:
            raise bad(field, text, "a range is lo:hi:step")
        lo, hi, step = (conv(x) for x in parts)
        if step <= 0:
            raise bad(field, text, "the step of a range must be positive")
        if hi < lo:
            raise bad(field, text, f"an inverted range ({hi} < {lo})")
        n = int(math.floor((hi - lo) / step + 1e-9)) + 1
        if n > MAX_VALUES:
            raise bad(field, text, f"a range of {n:,} values; at most {MAX_VALUES:,} (a "
                      "coarser step)")
        vals = [kind(lo + i * step) for i in range(n)]
    else:
        vals = [conv(x) for x in text.split(",") if x.strip()]
    if not vals:
        raise bad(field, text, "an empty list of values")
    return vals


def check_values(base: str | dict, hw_values: dict[str, list]) -> None:
    """Refuse a swept value that no point could use: one the base configuration refuses on
    its own field (out of the field's range), before any point runs. A value that fails only
    with others (a tile the memory cannot hold) stays a point, reported infeasible."""
    for f, vals in hw_values.items():
        names = {f, "sram_bytes" if f == "sram_kb" else f,
                 "exp_lanes" if f == "mac_lines" else f}
        for v in dict.fromkeys(vals):
            try:
                _hardware({"base": base, "hw": {f: v}, "wl": {}})
            except ConfigError as e:
                if str(e).split("=", 1)[0] in names:
                    raise bad(f, v, f"out of its range ({e})") from None


def parse_sets(sets) -> dict[str, list]:
    """``--set FIELD=VALUES`` options as ``{field: values}`` (:func:`parse_values`). Raises
    ConfigError for an item without ``=`` or a workload field (those have their own options)."""
    out = {}
    for item in sets:
        if "=" not in item:
            raise ConfigError(f"set={item!r} is invalid: give FIELD=VALUES, e.g. mac_lines=32,64")
        name, text = (x.strip() for x in item.split("=", 1))
        if name in WL_FIELDS:
            raise ConfigError(f"set={item!r} is invalid: {name} is a workload field; use "
                              f"--{name.replace('_', '-')}")
        out[name] = parse_values(name, text)
    return out


def grid(base: str | dict, hw_values: dict[str, list], wl_values: dict[str, list]) -> list[dict]:
    """Every combination as a point: ``{"base": …, "hw": {field: value}, "wl": {…}}``.
    ``base`` is a preset name or a HardwareConfig as a dict."""
    for f in hw_values:
        if f not in HW_FIELDS:
            raise bad("field", f, f"sweepable hardware fields: {', '.join(HW_FIELDS)}")
    if "sram_kb" in hw_values and "sram_bytes" in hw_values:
        raise bad("field", "sram_kb and sram_bytes", "one or the other: the same field")
    for f in wl_values:
        if f not in WL_FIELDS:
            raise bad("field", f, f"workload fields: {', '.join(WL_FIELDS)}")
    wl_values = {"n": [4096], "d": [64], **wl_values}
    hk, wk = list(hw_values), list(wl_values)
    total = math.prod(len(v) for v in [*hw_values.values(), *wl_values.values()])
    if total > MAX_POINTS:
        raise bad("grid", f"{total:,} points", f"at most {MAX_POINTS:,}: sweep fewer values")
    pts = []
    for hv in itertools.product(*(hw_values[k] for k in hk)):
        for wv in itertools.product(*(wl_values[k] for k in wk)):
            pts.append({"base": base, "hw": dict(zip(hk, hv, strict=True)),
                        "wl": dict(zip(wk, wv, strict=True))})
    return pts


def point_key(pt: dict) -> str:
    return json.dumps({"base": pt["base"], "hw": pt["hw"], "wl": pt["wl"]}, sort_keys=True)


def _hardware(pt: dict) -> C.HardwareConfig:
    base = pt["base"]
    hw = C.preset(base) if isinstance(base, str) else C.HardwareConfig.from_dict(base)
    changes = dict(pt["hw"])
    if "sram_kb" in changes:
        changes["sram_bytes"] = int(changes.pop("sram_kb")) * 1024
    if "mac_lines" in changes and "exp_lanes" not in changes and hw.exp_lanes == hw.mac_lines:
        changes["exp_lanes"] = changes["mac_lines"]   # the RTL's rule: a lane a line
    if "max_keys_per_step" not in changes:
        # keys per step are bounded by the lines and the ring: follow them down
        lines = changes.get("mac_lines", hw.mac_lines)
        ring = max(1, changes.get("kv_ring_depth", hw.kv_ring_depth) // 2)
        cap = 1 << max(0, min(lines, ring).bit_length() - 1)
        if hw.max_keys_per_step > cap:
            changes["max_keys_per_step"] = cap
    return C.replace(hw, **changes)


def _workload(pt: dict, hw: C.HardwareConfig) -> C.Workload:
    w = pt["wl"]
    heads = int(w.get("heads", 1))
    return C.Workload.from_options(
        hw, n=int(w["n"]), d=int(w["d"]), nk=int(w["nk"]) if w.get("nk") else None, heads=heads,
        kv_heads=int(w["kv_heads"]) if w.get("kv_heads") else None,
        batch=int(w.get("batch", 1)), causal=bool(w.get("causal", False)))


def evaluate(pt: dict, vs_fa2: bool = False) -> dict:
    """One point: the schedule's cycles, time, PE utilization by MAC and DRAM bytes, the ASIC
    area and energy estimates, the FPGA resource estimate; with ``vs_fa2`` also FA-2's
    cycles and energy on the same hardware. An infeasible point gets ``feasible: False`` and
    the reason."""
    from attenio.sim import cost
    from attenio.sim.schedule import schedule

    out = {"key": point_key(pt), **{f"hw.{k}": v for k, v in pt["hw"].items()},
           **{f"wl.{k}": v for k, v in pt["wl"].items()}}
    t0 = time.perf_counter()
    try:
        hw = _hardware(pt)
        wl = _workload(pt, hw)
        s = schedule(hw, wl, keep_spans=False)
    except (ConfigError, ValueError) as exc:
        return {**out, "feasible": False, "reason": str(exc)}
    area = cost.asic_area(hw)
    en = cost.energy(hw, s)
    # the FPGA estimate prices the RTL: a config the RTL cannot build gets none, and says why
    rtl = hw.rtl_reason()
    fp = {"DP16KD": None, "fits": False} if rtl else cost.fpga_area(hw)
    out.update(feasible=True, reason="", tiling=s.tiling.notes, cycles=s.total_cycles,
               time_us=s.time_us, pe_util_mac=s.pe_util_mac, dram_read=s.read_bytes,
               dram_write=s.write_bytes, area_mm2=area["total"], area_pe_mm2=area["pe"],
               area_cache_mm2=area["cache"], energy_uj=en["total"], energy_dram_uj=en["dram"],
               energy_mac_uj=en["mac"], energy_sram_uj=en["sram"],
               fpga_lut4=fp.get("LUT4"), fpga_dsp=fp.get("MULT18X18D"), fpga_bram=fp["DP16KD"],
               fpga_fits=fp["fits"], rtl=rtl or "buildable", estimate=cost.ESTIMATE)
    if vs_fa2:
        try:
            f = schedule(hw, wl, "fa2", keep_spans=False)
            ef = cost.energy(hw, f)
            out.update(fa2_cycles=f.total_cycles, fa2_energy_uj=ef["total"],
                       speedup_vs_fa2=f.total_cycles / s.total_cycles,
                       energy_eff_vs_fa2=ef["total"] / en["total"])
        except (ConfigError, ValueError) as exc:
            out.update(fa2_reason=str(exc))
    out["eval_s"] = round(time.perf_counter() - t0, 4)
    return out


def _load_done(path: Path | None) -> dict[str, dict]:
    done: dict[str, dict] = {}
    if path is None or not path.exists():
        return done
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue          # a line cut short by an interrupted run: redone
            done[r["key"]] = r
    return done


def _eval_many(chunk: list[dict], vs_fa2: bool) -> list[dict]:
    return [evaluate(pt, vs_fa2) for pt in chunk]


def run_sweep(points: list[dict], *, workers: int | None = None, results: str | None = None,
              scheduler: str | None = None, vs_fa2: bool = False, progress=None,
              chunk: int = 8) -> list[dict]:
    """Evaluate every point not already in ``results`` (JSON lines; appended as points
    finish) and return all rows in point order. ``scheduler``: ``None`` for a local process
    pool of ``workers`` (default: the CPU count), ``"local"`` or ``"local:N"`` for a Dask
    LocalCluster of N workers, or a Dask scheduler address (``tcp://host:8786``).
    ``progress(done, total)`` after each finished chunk. A chunk whose worker died is retried
    (``RETRIES`` times, sim/fanout.py), then its points are recorded as infeasible."""
    path = Path(results) if results else None
    done = _load_done(path)
    keys = [point_key(p) for p in points]
    todo = [p for p, k in zip(points, keys, strict=True) if k not in done]
    chunks = [todo[i:i + chunk] for i in range(0, len(todo), chunk)]
    if path and path.exists() and path.stat().st_size:
        with path.open("rb") as fh:          # a line cut short: start the next on its own
            fh.seek(-1, 2)
            cut = fh.read(1) != b"\n"
        if cut:
            with path.open("a") as fh:
                fh.write("\n")
    sink = path.open("a") if path else None
    count = len(points) - len(todo)

    def record(rows):
        nonlocal count
        for r in rows:
            done[r["key"]] = r
            if sink:
                sink.write(json.dumps(r) + "\n")
        if sink:
            sink.flush()
        count += len(rows)
        if progress:
            progress(count, len(points))

    def failed(chunk):
        return [{"key": point_key(p), "feasible": False,
                 "reason": f"its worker died {RETRIES + 1} times"} for p in chunk]

    try:
        fan_out(_eval_many, chunks, record, failed, workers=workers, scheduler=scheduler,
                vs_fa2=vs_fa2)
    finally:
        if sink:
            sink.close()
    return [done[k] for k in keys]


def pareto_front(rows: list[dict], axes=("time_us", "area_mm2", "energy_uj")) -> list[dict]:
    """The feasible rows no other row of the same workload beats on every axis (lower is
    better) and strictly on one. Time, not cycles, so that a swept clock counts (the two
    agree where the clock is fixed)."""
    by_wl: dict[str, list[dict]] = {}
    for r in rows:
        if r.get("feasible"):
            wl = json.dumps(json.loads(r["key"])["wl"], sort_keys=True)
            by_wl.setdefault(wl, []).append(r)
    front = []
    for group in by_wl.values():
        # in lexicographic order every row's dominators come before it, and a dominated
        # dominator has its own on the front: checking the front so far is enough
        mine: list[dict] = []
        for r in sorted(group, key=lambda r: tuple(r[a] for a in axes)):
            if not any(all(o[a] <= r[a] for a in axes) and any(o[a] < r[a] for a in axes)
                       for o in mine):
                mine.append(r)
        front += mine
    return front


def point_label(r: dict) -> str:
    """A point's hardware and workload fields as ``name=value`` words."""
    import json as _json

    k = _json.loads(r["key"])
    return " ".join(f"{a}={b}" for a, b in {**k["hw"], **k["wl"]}.items())


def plot_front(rows, front, path) -> dict:
    """Time against area, one marker per workload, coloured by energy (in µJ, mJ or J, by its
    size), each workload's Pareto front of the two plotted axes ringed and its points labelled
    by the hardware fields that vary (a PNG, SVG or PDF). ``front`` (the three-axis front the
    table lists) is not what the plot rings: on two axes it would ring points the plot shows
    as dominated. Returns what it drew so a test can check it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    del front
    keys = [json.loads(r["key"]) for r in rows]
    wls = sorted({json.dumps(k["wl"], sort_keys=True) for k in keys})
    varying = sorted({f for k in keys for f, v in k["hw"].items()
                      if len({json.dumps(k2["hw"].get(f)) for k2 in keys}) > 1})
    top = max((r["energy_uj"] for r in rows), default=1.0)
    unit, scale = (("J", 1e-6) if top >= 1e6 else ("mJ", 1e-3) if top >= 1e3 else ("µJ", 1.0))
    markers = "osD^vP*Xh<>"
    fig, ax = plt.subplots(figsize=(8, 5))
    vmin = min((r["energy_uj"] * scale for r in rows), default=0.0)
    vmax = max((r["energy_uj"] * scale for r in rows), default=1.0)
    drawn = {"energy_unit": unit, "workloads": [], "ringed": []}
    sc = None
    for i, wl in enumerate(wls):
        mine = [r for r, k in zip(rows, keys, strict=True)
                if json.dumps(k["wl"], sort_keys=True) == wl]
        label = " ".join(f"{a}={b}" for a, b in json.loads(wl).items())
        sc = ax.scatter([r["area_mm2"] for r in mine], [r["time_us"] for r in mine],
                        c=[r["energy_uj"] * scale for r in mine], cmap="viridis", vmin=vmin,
                        vmax=vmax, s=24, marker=markers[i % len(markers)], label=label)
        ring = pareto_front(mine, axes=("time_us", "area_mm2"))
        ax.scatter([r["area_mm2"] for r in ring], [r["time_us"] for r in ring],
                   facecolors="none", edgecolors="r", s=90, marker=markers[i % len(markers)])
        for j, r in enumerate(sorted(ring, key=lambda r: r["area_mm2"])):
            hw = json.loads(r["key"])["hw"]      # alternate above and below: neighbours differ
            ax.annotate(" ".join(f"{f}={hw[f]}" for f in varying), (r["area_mm2"], r["time_us"]),
                        xytext=(4, 5 if j % 2 == 0 else -10), textcoords="offset points",
                        fontsize=6)
        drawn["workloads"].append(label)
        drawn["ringed"] += [r["key"] for r in ring]
    ax.scatter([], [], facecolors="none", edgecolors="r", s=90,
               label="Pareto front of time and area (per workload)")
    ax.set_xlabel("area, mm² (22 nm estimate, calibrated to the paper's Table 3)")
    ax.set_ylabel("time, µs")
    ax.set_yscale("log")
    if sc is not None:
        fig.colorbar(sc, label=f"energy, {unit} (estimate)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn
