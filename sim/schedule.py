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

from attenio.config import HardwareConfig, VarlenWorkload, Workload
from attenio.contract.program import INSTR_BYTES, validate
from attenio.contract.timing import Timing
from attenio.errors import bad
from attenio.model import io_analysis as io
from attenio.model.numerics import ScaleParams, softmax_scale
from attenio.sim.engines import ENGINES
from attenio.sim.layout import Layout
from attenio.sim.phases import phase_model
from attenio.sim.program import build_program, program_length, program_tiles
from attenio.sim.timeline import Schedule, simulate_program

__all__ = ["Timing", "Layout", "Schedule", "schedule", "build_program", "simulate_program",
           "ENGINES"]


def schedule(hw: HardwareConfig, wl: Workload | VarlenWorkload, dataflow: str = "attenio", *,
             timing: Timing | None = None, scale: ScaleParams | None = None,
             keep_spans: bool = True, tiling: io.Tiling | None = None,
             progress=None, block_tables=None) -> Schedule:
    """Tile ``wl`` for ``dataflow`` on ``hw``, emit the program and compute the timeline.

    ``tiling`` overrides the chosen tiling (for example the paper's b = 1 rule:
    ``Tiling("attenio", rows=a, keys_per_step=1, fixed_b=True)``). ``block_tables``: where a
    paged cache's pages lie (sim/layout.py, ``PagedCache.place``; a seeded shuffle without).

    A :class:`VarlenWorkload` runs as one program: its sequences one after another, each cut
    by the tiling it would have alone (no tile spans two sequences, none is padded), and the
    third overlap level carries across them as across tiles of one sequence.

    Raises
    ------
    ConfigError
        An unknown dataflow, a workload the hardware cannot hold (head dim, one row of
        memory), or a program the controller would reject.
    """
    timing = timing or Timing()
    if dataflow not in io.DATAFLOWS:
        raise bad("dataflow", dataflow, f"choose one of: {', '.join(io.DATAFLOWS)}")
    if wl.head_dim > hw.max_head_dim:
        raise bad("head_dim", wl.head_dim, f"must be in [1, {hw.max_head_dim}] (max_head_dim)")
    varlen = isinstance(wl, VarlenWorkload)
    if dataflow in ("flat", "standard"):
        if varlen or wl.page_size:
            what = "varlen batches" if varlen else "paged K/V caches"
            raise bad("dataflow", dataflow, f"{what} run on the dataflows with a program: "
                      "attenio, fa2, fa2-uncapped")
        return phase_model(hw, wl, tiling or io.choose_tiling(hw, wl, dataflow), timing)
    if scale is None:
        qmax = (1 << (hw.data_bits - 1)) - 1
        scale = softmax_scale(hw, 1.0 / qmax, 1.0 / qmax, wl.head_dim)
    if varlen:
        hw.check_workload(wl)
        tilings = ([tiling] * wl.sequences if tiling is not None
                   else _sequence_tilings(hw, wl, dataflow, timing, scale))
        return _schedule_tiling(hw, wl, dataflow, tilings, timing, scale, keep_spans, progress,
                                block_tables)
    if tiling is not None:
        return _schedule_tiling(hw, wl, dataflow, tiling, timing, scale, keep_spans, progress,
                                block_tables)
    tiling = io.choose_tiling(hw, wl, dataflow)
    two = tiling.heads_per_tile > 1

    def part(i):                       # progress of candidate i of the one or two
        if progress is None:
            return None
        return lambda f: progress((i + f) / 2 if two else f)

    best = _schedule_tiling(hw, wl, dataflow, tiling, timing, scale, keep_spans, part(0),
                            block_tables)
    if two:
        # GQA packing shares K/V but makes tiles of fewer positions: keep it only when it
        # wins by the model's cycles (then bytes)
        mha = _schedule_tiling(hw, wl, dataflow, io.choose_tiling(hw, wl, dataflow, pack=False),
                               timing, scale, keep_spans, part(1), block_tables)
        if (mha.total_cycles, mha.read_bytes) < (best.total_cycles, best.read_bytes):
            best = mha
    return best


def _sequence_tilings(hw: HardwareConfig, wl: VarlenWorkload, dataflow: str, timing: Timing,
                      scale: ScaleParams) -> list[io.Tiling]:
    """Each sequence's tiling, as :func:`schedule` chooses it for the sequence alone (GQA
    packing kept where it wins on that sequence's own cycles); one choice per shape."""
    chosen: dict[tuple[int, int], io.Tiling] = {}
    out = []
    for i in range(wl.sequences):
        one = wl.sequence(i)
        shape = (one.seq_q, one.seq_k)
        if shape not in chosen:
            chosen[shape] = schedule(hw, one, dataflow, timing=timing, scale=scale,
                                     keep_spans=False).tiling
        out.append(chosen[shape])
    return out


def _schedule_tiling(hw: HardwareConfig, wl: Workload | VarlenWorkload, dataflow: str,
                     tiling: io.Tiling | list[io.Tiling], timing: Timing, scale: ScaleParams,
                     keep_spans: bool, progress=None, block_tables=None) -> Schedule:
    """The program of ``wl`` under ``tiling`` (or one tiling per sequence), validated, and its
    timeline. The schedule reports the tiling of the longest sequence and keeps the list."""
    rs, ks = scale.per_row, scale.k_m is not None
    tiles = program_tiles(wl, tiling)
    layout = Layout.packed(hw, wl, program_length(tiles) * INSTR_BYTES, rs, ks, block_tables)
    program = build_program(hw, wl, tiling, layout, scale, tiles)
    tilings = list(tiling) if isinstance(tiling, list) else None
    if tilings is not None:
        longest = max(range(len(tilings)), key=lambda i: wl.segments()[i].seq_q)
        tiling = tilings[longest]
    ring = None if dataflow == "attenio" else max(t.keys_per_step for t in tilings or [tiling])
    if ring is None:
        validate(program, hw)
    else:
        rows = max(t.rows for t in tilings or [tiling])
        validate(program, _with_ring(hw, 2 * ring, rows), rtl=False)
    total, stats, rb, wb, spans = simulate_program(
        hw, wl, program, timing, ring, keep_spans, progress,
        entries=layout.entries if layout.paged else None)
    return Schedule(hw, wl, dataflow, tiling, program, total, stats.busy, stats.stalls,
                    stats.useful_macs, rb, wb, spans, timing, activity=stats.activity,
                    tilings=tilings, requests=stats.requests)


def _with_ring(hw: HardwareConfig, ring: int, rows: int | None = None) -> HardwareConfig:
    # Baselines keep their K/V blocks in the unified memory, not in the row ring: give the
    # validator a ring (and tile) of the size the baseline's tiling uses.
    import dataclasses
    return dataclasses.replace(hw, kv_ring_depth=max(hw.kv_ring_depth, ring),
                               tile_rows=max(hw.tile_rows, rows or 0))


