"""Timeline exports: a Perfetto / Chrome trace (JSON) and a PNG Gantt and utilization plot."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from attenio.sim.schedule import ENGINES, Schedule

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
    (``start_cycle``, ``end_cycle``), its tile and its instruction's fields.
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


def write_plot(sched: Schedule, path: str | Path) -> None:
    """A PNG: Gantt chart of the engines' spans above each engine's utilization."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (gantt, bars) = plt.subplots(2, 1, figsize=(11, 6),
                                      gridspec_kw={"height_ratios": [3, 1.4]})
    colors = {"dma_read": "#4c72b0", "dma_write": "#55a868", "pe": "#c44e52",
              "exp": "#8172b2", "finalize": "#ccb974"}
    for row, eng in enumerate(ENGINES):
        segs = [(sp.start, max(1, sp.end - sp.start)) for sp in sched.spans if sp.engine == eng]
        gantt.broken_barh(segs, (row - 0.4, 0.8), color=colors[eng])
    gantt.set_yticks(range(len(ENGINES)), [TRACK_NAMES[e] for e in ENGINES])
    gantt.invert_yaxis()
    gantt.set_xlim(0, sched.total_cycles)
    gantt.set_xlabel("cycle (bars: each instruction's active interval on its engine)")
    wl = sched.workload
    gantt.set_title(f"{sched.dataflow}: N={wl.seq_q}×{wl.seq_k} d={wl.head_dim}, "
                    f"{sched.total_cycles:,} cycles, PE {sched.pe_util_time:.1%} by time, "
                    f"{sched.pe_util_mac:.1%} by MAC")
    util = [sched.busy[e] / sched.total_cycles for e in ENGINES]
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
