"""Timeline exports: a Perfetto / Chrome trace (JSON) and a PNG Gantt and utilization plot."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from attenio.base.errors import ConfigError
from attenio.sim.schedule import ENGINES, Schedule

# the Gantt's zoom shows this many PE steps of a tile (the step-level view of the overlap)
ZOOM_STEPS = 24

TRACK_NAMES = {"dma_read": "DMA read", "dma_write": "DMA write", "pe": "PE array",
               "exp": "EXP (softmax)", "finalize": "finalize"}


def _stream(sp) -> str:
    """The track family of a span: the DMA read engine carries two streams (Q rows and the
    K/V stream), which overlap in time, so each gets its own tracks."""
    if sp.engine == "dma_read":
        return "Q" if sp.name.startswith("LOAD_Q") else "K/V"
    return ""


def chrome_trace(sched: Schedule) -> dict:
    """The schedule as Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).

    Tracks (threads) per engine, and per stream on the DMA read engine (Q, K/V); a span that
    would overlap the one before it on its track without nesting goes to a further track of the
    same name (``… 2``), so every track's slices nest, as the format requires. ``ts``/``dur``
    are microseconds of the preset's clock; each span's ``args`` carry its cycles
    (``start_cycle``, ``end_cycle``), its tile and its instruction's fields. Inside a tile,
    each step the model simulates is a slice (``QK s``, ``PV s`` on a second PE track; the
    data of each K/V block, ``K s``/``V s``, on a second K/V track) and the periods its steady
    state skips one ``steady state`` slice, for the tiles that start before the trace holds
    ``STEP_SPAN_LIMIT`` spans.
    """
    mhz = sched.hw.clock_mhz
    events = [{"name": "process_name", "ph": "M", "pid": 1,
               "args": {"name": f"attenio {sched.dataflow} ({mhz:g} MHz)"}}]
    lanes: dict[tuple[str, str], list[int]] = {}   # (engine, stream) → end cycle per lane
    tids: dict[tuple[str, str, int], int] = {}
    order = {eng: i for i, eng in enumerate(ENGINES)}
    slices = []
    for sp in sorted(sched.spans, key=lambda sp: (order[sp.engine], sp.start, -sp.end)):
        key = (sp.engine, _stream(sp))
        ends = lanes.setdefault(key, [])
        lane = next((i for i, e in enumerate(ends) if e <= sp.start), None)
        if lane is None:
            lane = len(ends)
            ends.append(sp.end)
        else:
            ends[lane] = sp.end
        slices.append((sp, (*key, lane)))
    streams = {"": 0, "Q": 0, "K/V": 1}
    for eng, stream, lane in sorted({t for _, t in slices},
                                    key=lambda t: (order[t[0]], streams[t[1]], t[2])):
        tid = len(tids) + 1
        tids[(eng, stream, lane)] = tid
        name = TRACK_NAMES[eng] + (f" ({stream})" if stream else "") + \
            (f" {lane + 1}" if lane else "")
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"name": name}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"sort_index": tid}})
    for sp, track in slices:
        args = {k: int(v) if isinstance(v, bool) else v for k, v in sp.args.items()}
        args.update(start_cycle=sp.start, end_cycle=sp.end)
        events.append({"name": sp.name, "ph": "X", "pid": 1, "tid": tids[track],
                       "ts": sp.start / mhz, "dur": max(0, sp.end - sp.start) / mhz,
                       "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"dataflow": sched.dataflow, "total_cycles": sched.total_cycles,
                          "clock_mhz": mhz, "time_unit": "us"}}


def write_chrome_trace(sched: Schedule, path: str | Path) -> int:
    """Write the trace; a path ending in ``.gz`` is gzipped (Perfetto opens both). Returns
    the bytes written."""
    data = json.dumps(chrome_trace(sched)).encode()
    if str(path).endswith(".gz"):
        data = gzip.compress(data)
    Path(path).write_bytes(data)
    return len(data)


def busy_density(records, lo: float, hi: float, bins: int):
    """Busy fraction of each of ``bins`` equal bins over [lo, hi) from ``(start, end, busy)``
    records (each spreads its busy cycles evenly over its interval)."""
    import numpy as np

    edges = np.linspace(lo, hi, bins + 1)
    if not records:
        return np.zeros(bins)
    a = np.asarray(records, dtype=np.float64)
    s, e, busy = a[:, 0], a[:, 1], a[:, 2]
    rate = busy / np.maximum(e - s, 1e-9)
    times = np.concatenate([s, e])
    dr = np.concatenate([rate, -rate])
    order = np.argsort(times, kind="stable")
    times, dr = times[order], dr[order]
    r = np.cumsum(dr)                                    # rate after each event
    integral = np.concatenate([[0.0], np.cumsum(r[:-1] * np.diff(times))])
    cum = np.interp(edges, times, integral, left=0.0, right=integral[-1])
    return np.clip(np.diff(cum) / np.diff(edges), 0.0, 1.0)


def write_plot(sched: Schedule, path: str | Path, label: str = "") -> dict:
    """A PNG: each engine's busy fraction over the run (binned, a linear scale with its colour
    bar), the first steps of the second tile zoomed in (the step-level view), and each engine's
    utilization; time in µs or ms of the preset's clock; the title names ``label`` (the preset)
    and the workload. Returns what it drew (panel titles, each panel's mean busy fraction per
    engine, the zoom window in cycles), so a test can check the figure's data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import LinearSegmentedColormap, Normalize

    colors = {"dma_read": "#4c72b0", "dma_write": "#55a868", "pe": "#c44e52",
              "exp": "#8172b2", "finalize": "#ccb974"}
    if sched.dataflow in ("flat", "standard"):
        raise ConfigError(f"dataflow={sched.dataflow!r} has no timeline to plot: flat and "
                          "standard are phase models (use attenio, fa2, fa2-uncapped)")
    total = sched.total_cycles
    us = total / sched.hw.clock_mhz
    unit, per_cycle = ("ms", 1e-3 / sched.hw.clock_mhz) if us > 2000 else \
        ("µs", 1 / sched.hw.clock_mhz)
    act = sched.activity or {e: [(sp.start, sp.end, sp.end - sp.start) for sp in sched.spans
                                 if sp.engine == e] for e in ENGINES}
    fig, (whole, zoom, bars) = plt.subplots(3, 1, figsize=(11, 8.5),
                                            gridspec_kw={"height_ratios": [3, 3, 1.6]})
    drawn: dict = {"panels": []}

    def strips(ax, lo, hi, bins, title):
        means = {}
        for row, eng in enumerate(ENGINES):
            dens = busy_density(act[eng], lo, hi, bins)
            cmap = LinearSegmentedColormap.from_list(eng, ["#ffffff", colors[eng]])
            ax.imshow(dens[None, :], aspect="auto", cmap=cmap, norm=Normalize(0, 1),
                      extent=(lo * per_cycle, hi * per_cycle, row + 0.4, row - 0.4),
                      interpolation="nearest")
            means[eng] = float(busy_density(act[eng], lo, hi, 1)[0])
            ax.text(hi * per_cycle, row, f" {means[eng]:.1%}", va="center", fontsize=7)
        ax.set_ylim(len(ENGINES) - 0.5, -0.5)
        ax.set_yticks(range(len(ENGINES)), [TRACK_NAMES[e] for e in ENGINES])
        ax.set_xlim(lo * per_cycle, hi * per_cycle)
        ax.set_xlabel(f"time ({unit} at {sched.hw.clock_mhz:g} MHz); colour: busy fraction of "
                      f"each of {bins} bins; right: busy over the window")
        ax.set_title(title, fontsize=9)
        bar = fig.colorbar(ScalarMappable(Normalize(0, 1), "Greys"), ax=ax, pad=0.06,
                           fraction=0.025)
        bar.set_label("busy", fontsize=7)
        drawn["panels"].append({"title": title, "window": (lo, hi), "mean_busy": means})

    wl = sched.workload
    what = ((f"{label}: " if label else "")
            + f"{sched.dataflow}, N={wl.seq_q}×{wl.seq_k} d={wl.head_dim}, heads "
            + f"{wl.heads}/{wl.kv_heads}, batch {wl.batch}"
            + (", causal" if wl.causal else "") + (", windowed" if wl.windowed else ""))
    strips(whole, 0, total, 600,
           f"{what}: {total:,} cycles ({us * (1e-3 if unit == 'ms' else 1):,.1f} {unit}), PE "
           f"{sched.pe_util_time:.1%} by time, {sched.pe_util_mac:.1%} by MAC")
    tiles = sorted({sp.args.get("tile") for sp in sched.spans if "tile" in sp.args})
    if tiles:
        t = tiles[1] if len(tiles) > 1 else tiles[0]
        mine = sorted((sp for sp in sched.spans if sp.args.get("tile") == t),
                      key=lambda sp: sp.start)
        lo, hi = mine[0].start, max(sp.end for sp in mine)
        pe = [sp for sp in mine if sp.engine == "pe" and sp.name.split()[0] in ("QK", "PV")]
        steps = ZOOM_STEPS
        if len(pe) > steps:                # the step-level view: the tile's first steps
            hi = pe[steps - 1].end
        shown = f"PE steps 1–{steps} of {len(pe)}" if len(pe) > steps else "whole"
        strips(zoom, lo, max(hi, lo + 1), 300,
               f"tile {tiles.index(t) + 1} of {len(tiles)} ({shown}), zoomed in")
        whole.axvspan(lo * per_cycle, hi * per_cycle, color="k", alpha=0.06)
    else:
        zoom.set_visible(False)
    util = [sched.busy[e] / total for e in ENGINES]
    drawn["utilization"] = dict(zip(ENGINES, util, strict=True))
    bars.barh(range(len(ENGINES)), util, color=[colors[e] for e in ENGINES])
    bars.set_yticks(range(len(ENGINES)), [TRACK_NAMES[e] for e in ENGINES])
    bars.invert_yaxis()
    bars.set_xlim(0, 1)
    bars.set_xlabel("busy fraction of all cycles")
    for i, u in enumerate(util):
        bars.text(min(u, 0.9) + 0.01, i, f"{u:.1%}", va="center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return drawn
