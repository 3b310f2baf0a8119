"""Cycle-level schedule generator: tiling, the program, and every engine's timeline.

``schedule(hw, wl, dataflow)`` chooses the tiling (model/io_analysis.py), emits the program
(contract/program.py, docs/isa.md) and runs the timing model of docs/architecture.md's engines:

* **DMA read**: one AXI read port; requests in order, one per cycle, at most
  ``Timing.max_outstanding`` in flight; each burst's data starts ``dram_latency`` cycles after its
  request (or when the channel frees) and takes ``⌈bytes / rate⌉`` cycles, ``rate =
  min(dram_bytes_per_cycle, AXI bytes)``. Bursts split at 256 beats and 4 KB boundaries.
* **DMA write**: the same for writes; a burst's response returns ``dram_latency`` after its data.
* **PE array**: ``mac_lines = p`` lines of ``macs_per_line = q`` MACs; a line owns one query
  row, its MACs ``q`` columns (one memory word). Per step of b keys over the tile's r rows,
  ``QK`` and ``PV`` each issue ``⌈r·b/p⌉·⌈d/q⌉`` (row group, word) pairs, one per cycle, and
  last at least ``Timing.min_phase`` cycles; order ``QK0, QK1, PV0, QK2, PV1, …`` so the
  softmax of key j hides behind ``QK(j+1)``.
* **EXP**: a pipeline fed by the ``QK`` step, one row group per cycle; a step's p values are
  ready ``Timing.p_ready_latency`` cycles after its last ``QK`` issue.
* **Finalize**: ``Timing.pv_drain`` cycles after the last ``PV``, one output word (q elements of
  one row) per cycle into a FIFO that the paired ``STORE_O`` drains; the core is free for the
  next tile when the last word has left.
* **Fetch and dispatch**: a separate instruction read port fetches chunks of
  ``Timing.fetch_chunk`` instructions, two chunks ahead; instructions dispatch in order into
  queues of depth ``Timing.queue_depth``.

The timeline is exact for this model (integer cycles). Inside a tile the key loop reaches a
periodic steady state within a few ring depths; once the loop's state (all pending times,
relative to one of them) repeats, the remaining periods are skipped arithmetically, which makes
a 128K-token head cost milliseconds per tile, not per key.

``flat`` and ``standard`` do not fit this instruction set (their tiles hold whole rows of S, or
S and P leave the chip); they run a phase-level model on the same engines and DRAM model and
emit no program.
"""

from __future__ import annotations

from attenio.base.config import HardwareConfig, VarlenWorkload, Workload
from attenio.contract.timing import Timing
from attenio.model import io_analysis as io
from attenio.model.numerics import ScaleParams
from attenio.sim.engines import ENGINES
from attenio.sim.layout import Layout
from attenio.sim.program import build_program
from attenio.sim.timeline import Schedule, simulate_program

__all__ = ["Timing", "Layout", "Schedule", "schedule", "build_program", "simulate_program",
           "ENGINES"]


def schedule(hw: HardwareConfig, wl: Workload | VarlenWorkload, dataflow: str = "attenio", *,
             timing: Timing | None = None, scale: ScaleParams | None = None,
             keep_spans: bool = True, tiling: io.Tiling | None = None,
             progress=None, block_table=None) -> Schedule:
    """Tile ``wl`` for ``dataflow`` on ``hw``, emit the program and compute the timeline: the
    schedule of the run plan (:func:`attenio.sim.plan.build_plan`, which takes the same
    arguments; ``block_table``: where a paged cache's pages lie, the caller's table or a
    seeded shuffle without)."""
    from attenio.sim.plan import build_plan

    return build_plan(hw, wl, dataflow, timing=timing, scale=scale, keep_spans=keep_spans,
                      tiling=tiling, progress=progress, block_table=block_table).schedule
