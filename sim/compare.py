"""The paper's dataflow experiment on our model: every dataflow, same hardware, N and d swept."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

from attenio.base.config import HardwareConfig, Workload
from attenio.model import io_analysis as io
from attenio.sim.schedule import schedule

# AttenIO paper (ASPLOS 2026), §6.1-6.2: geometric means over N = 8K..128K at 512 KB, FP16.
# traffic: baseline / AttenIO data movement (Fig. 11); speedup: AttenIO over the baseline
# (Fig. 10); pe_util: AttenIO's PE utilization by time (Fig. 12a).
PAPER = {
    64: {"traffic": {"flat": 273.7, "standard": 57.0, "fa2": 26.8},
         "speedup": {"flat": 8.8, "standard": 2.5, "fa2": 1.6}, "pe_util": 0.821},
    128: {"traffic": {"flat": 148.8, "standard": 16.4, "fa2": 7.3},
          "speedup": {"flat": 9.9, "standard": 1.9, "fa2": 1.3}, "pe_util": 0.903},
}


def compare_dataflows(hw: HardwareConfig, ns: list[int], ds: list[int], causal: bool = False,
                      progress: Callable[[str], None] | None = None) -> list[dict]:
    """One row per (d, N, dataflow): traffic, cycles, utilization, stall share."""
    rows = []
    for d in ds:
        for n in ns:
            wl = Workload.square(n, d, causal=causal)
            if progress:
                progress(f"d={d} N={n}")
            for flow in io.DATAFLOWS:
                sch = schedule(hw, wl, flow, keep_spans=False)
                tr = io.workload_traffic(hw, wl, flow, sch.tiling)
                rows.append({
                    "d": d, "n": n, "dataflow": flow, "tiling": sch.tiling.notes,
                    "elements": tr.elements, "read_bytes": sch.read_bytes,
                    "write_bytes": sch.write_bytes, "cycles": sch.total_cycles,
                    "pe_util_time": round(sch.pe_util_time, 6),
                    "pe_util_mac": round(sch.pe_util_mac, 6),
                    "stall_share": round(sch.stall_share, 6),
                    "regime": regime(sch),
                })
    return rows


def regime(sch) -> str:
    """'compute' when the PE array is busy more than the read channel, else 'memory'."""
    return "compute" if sch.busy["pe"] >= sch.busy["dma_read"] else "memory"


def geomean(rows: list[dict], flow: str, key: str) -> float:
    """Geometric mean over N of ``flow``'s ``key`` relative to attenio's."""
    ratios = []
    for r in rows:
        if r["dataflow"] != flow:
            continue
        base = next(x for x in rows if x["dataflow"] == "attenio" and x["n"] == r["n"]
                    and x["d"] == r["d"])
        ratios.append(r[key] / base[key])
    return math.exp(sum(map(math.log, ratios)) / len(ratios))


def bandwidth_sweep(hw: HardwareConfig, n: int, d: int, causal: bool = False,
                    bandwidths=(2, 4, 8, 16, 32, 64, 128)):
    """Cycles of every dataflow as DRAM bytes/cycle varies (AXI widened to match)."""
    for bw in bandwidths:
        h = dataclasses.replace(hw, dram_bytes_per_cycle=bw,
                                axi_data_bits=max(hw.axi_data_bits, min(1024, bw * 8)))
        wl = Workload.square(n, d, causal=causal)
        yield bw, {f: schedule(h, wl, f, keep_spans=False).total_cycles for f in io.DATAFLOWS}
