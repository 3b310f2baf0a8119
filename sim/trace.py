"""Timeline exports: a Perfetto / Chrome trace (JSON) and a PNG Gantt and utilization plot."""

from __future__ import annotations

import json
from pathlib import Path

from attenio.sim.schedule import ENGINES, Schedule

TRACK_NAMES = {"dma_read": "DMA read", "dma_write": "DMA write", "pe": "PE array",
               "exp": "EXP (softmax)", "finalize": "finalize"}


def chrome_trace(sched: Schedule) -> dict:
    """The schedule as Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).

    One track (thread) per engine; timestamps are cycles shown as microseconds at 1 cycle/µs
    (the trace metadata gives the real clock). Each span carries its instruction's fields and
    tile index in ``args``.
    """
    events = [{"name": "process_name", "ph": "M", "pid": 1,
               "args": {"name": f"attenio {sched.dataflow} ({sched.hw.clock_mhz:g} MHz; "
                                "1 us in this trace = 1 cycle)"}}]
    for tid, eng in enumerate(ENGINES, start=1):
        events.append({"name": "thread_name", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"name": TRACK_NAMES[eng]}})
        events.append({"name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid,
                       "args": {"sort_index": tid}})
    tids = {eng: i for i, eng in enumerate(ENGINES, start=1)}
    for sp in sched.spans:
        events.append({"name": sp.name, "ph": "X", "pid": 1, "tid": tids[sp.engine],
                       "ts": sp.start, "dur": max(0, sp.end - sp.start),
                       "args": {k: int(v) if isinstance(v, bool) else v
                                for k, v in sp.args.items()}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"dataflow": sched.dataflow, "total_cycles": sched.total_cycles,
                          "clock_mhz": sched.hw.clock_mhz}}


def write_chrome_trace(sched: Schedule, path: str | Path) -> None:
    Path(path).write_text(json.dumps(chrome_trace(sched)))


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
