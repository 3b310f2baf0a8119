"""One run's plan, built once (:func:`build_plan`): the tiling of every sequence, the DRAM
layout (with the block table a paged cache walks: the caller's, or a seeded shuffle), the
softmax multipliers, the program and its timeline. The program emitter and the timeline make
it; the DRAM image (sim/image.py), the closed-form traffic, the RTL runner (verify/runner.py),
the integer model's call and the API read it, and none of them builds any part again."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attenio.base.blocktable import BlockTable
from attenio.base.config import HardwareConfig, VarlenWorkload, Workload
from attenio.base.errors import ConfigError, bad
from attenio.contract.program import INSTR_BYTES, encode, validate
from attenio.contract.timing import Timing, timing_for
from attenio.contract.variant import variant_of
from attenio.model import io_analysis as io
from attenio.model.numerics import (
    ScaleParams,
    softmax_scale,
    with_key_scales,
    with_value_scales,
)
from attenio.model.variants import capped, check_alibi, check_sinks, with_alibi, with_sinks
from attenio.sim.layout import Layout, block_table_for
from attenio.sim.phases import phase_model
from attenio.sim.program import (
    build_program,
    program_length,
    program_tiles,
    tile_keys_per_step,
)
from attenio.sim.shared import can_share, shared_runs
from attenio.sim.timeline import Schedule, simulate_program

__all__ = ["RunPlan", "build_plan"]


@dataclass(frozen=True)
class RunPlan:
    """What one run is: hardware, workload, dataflow, the softmax multipliers (``scale``:
    one pair for all rows, or per row and per key, :class:`ScaleParams`) and the schedule
    (tilings, program, timeline, ``layout`` with its block table). Frozen: every reader sees
    the same plan."""

    hw: HardwareConfig
    wl: Workload | VarlenWorkload
    dataflow: str
    scale: ScaleParams | None
    schedule: Schedule

    @property
    def layout(self) -> Layout | None:
        return self.schedule.layout

    @property
    def block_table(self) -> BlockTable | None:
        """The block table the program walks (a paged cache), the caller's or the shuffle."""
        return self.schedule.block_table

    @property
    def tilings(self) -> list[io.Tiling]:
        """Each sequence's tiling."""
        return self.schedule.tilings or [self.schedule.tiling] * self.wl.sequences

    @cached_property
    def program_bytes(self) -> bytes:
        """The program as the controller fetches it."""
        return encode(self.schedule.program)

    @cached_property
    def traffic(self) -> io.Traffic:
        """The closed form of the plan's DRAM traffic (model/io_analysis.py) under its
        tilings and its block table's rows."""
        return self.schedule.traffic

    def to_dict(self) -> dict:
        return self.schedule.to_dict()


def default_scale(hw: HardwareConfig, wl, softcap: float | None = None,
                  sinks=None, alibi_slopes=None, q_rows: bool = False,
                  key_scales: bool = False, value_scales: bool = False) -> ScaleParams:
    """The multipliers of inputs at full scale (one unit of each integer = 1/qmax): what a
    schedule without inputs uses (its timing does not depend on them); with ``softcap``, the
    capped logits' (the program's COMPUTE then carries the cap); with ``sinks`` (a number or
    one per query head), each Q row's side words (its multiplier and its head's sink: the Q
    rows grow by them, which the timeline counts); with ``alibi_slopes``, likewise each row's
    side words with its head's slope; ``q_rows``, ``key_scales``: one Q scale per row and
    one K scale per key (an 8-bit K/V cache's: each Q row carries its multiplier, each key
    its factor; all equal here); ``value_scales``: one V scale per key likewise (a paged
    cache's V factors)."""
    qmax = (1 << (hw.data_bits - 1)) - 1
    q, cap = capped(hw, 1.0 / qmax, softcap)
    sp = softmax_scale(hw, q, 1.0 / qmax if not key_scales else 2.0 / qmax, wl.head_dim)
    if q_rows:
        sp = dataclasses.replace(sp, c_m=np.full(1, sp.c_m), c_sh=np.full(1, sp.c_sh))
    if key_scales:          # every key at the largest scale, half the reference
        sp = with_key_scales(hw, sp, np.full(1, 1.0 / qmax), 2.0 / qmax)
    if value_scales:
        sp = with_value_scales(hw, sp, np.full(1, 1.0 / qmax), 2.0 / qmax)
    sp = with_sinks(hw, sp, check_sinks(hw, sinks, wl.heads), wl)
    sp = with_alibi(hw, sp, check_alibi(hw, alibi_slopes, wl.heads), wl)
    return sp if cap is None else dataclasses.replace(sp, cap=cap)


def build_plan(hw: HardwareConfig, wl: Workload | VarlenWorkload, dataflow: str = "attenio",
               *, timing: Timing | None = None, scale: ScaleParams | None = None,
               keep_spans: bool = False, tiling: io.Tiling | None = None, progress=None,
               block_table=None, checked: bool = False,
               share_prefix: bool | None = None) -> RunPlan:
    """Tile ``wl`` for ``dataflow`` on ``hw``, lay it out, emit and validate the program and
    compute its timeline, once.

    ``scale``: the run's multipliers (default: inputs at full scale); ``tiling`` overrides
    the chosen tiling (for example the paper's b = 1 rule: ``Tiling("attenio", rows=a,
    keys_per_step=1, fixed_b=True)``); ``block_table``: a paged cache's pages (a
    :class:`BlockTable`, or the caller's rows, checked here), a seeded shuffle without;
    ``checked``: the caller has checked ``wl`` against ``hw`` (else a varlen batch is checked
    here, each sequence against the hardware); ``share_prefix``: decode sequences whose block
    tables begin with the same pages read them once (sim/shared.py) — ``None`` where it is
    faster by the model (both schedules timed), ``True`` wherever the tables share (a
    :class:`ConfigError` where the workload cannot), ``False`` never.

    A :class:`VarlenWorkload` runs as one program: its sequences one after another, each cut
    by the tiling it would have alone (no tile spans two sequences, none is padded), and the
    third overlap level carries across them as across tiles of one sequence. Where GQA
    packing is a choice, both candidates are timed (each a full schedule) and the faster
    kept; no other part is built twice.

    Raises
    ------
    ConfigError
        An unknown dataflow, a workload the hardware cannot hold (head dim, one row of
        memory), a block table that does not fit the workload, or a program the controller
        would reject.
    """
    timing = timing or timing_for(hw)
    if dataflow not in io.DATAFLOWS:
        raise bad("dataflow", dataflow, f"choose one of: {', '.join(io.DATAFLOWS)}")
    if wl.head_dim > hw.max_head_dim:
        raise bad("head_dim", wl.head_dim, f"must be in [1, {hw.max_head_dim}] (max_head_dim)")
    for why in variant_of(wl).unbuilt():       # what the program format cannot say yet
        raise ConfigError(f"{why}")
    varlen = isinstance(wl, VarlenWorkload)
    if dataflow in ("flat", "standard"):
        if varlen or wl.page_size:
            what = "varlen batches" if varlen else "paged K/V caches"
            raise bad("dataflow", dataflow, f"{what} run on the dataflows with a program: "
                      "attenio, fa2, fa2-uncapped")
        sched = phase_model(hw, wl, tiling or io.choose_tiling(hw, wl, dataflow), timing)
        return RunPlan(hw, wl, dataflow, None, sched)
    if varlen and not checked:
        hw.check_workload(wl)
    scale = scale if scale is not None else default_scale(hw, wl)
    table = block_table_for(wl, block_table) if wl.page_size else None
    run = _Builder(hw, wl, dataflow, timing, scale, keep_spans, table)
    runs = _runs(run, share_prefix)
    if tiling is not None:
        tilings = [tiling] * wl.sequences if varlen else tiling
    elif varlen:
        tilings = _sequence_tilings(run)
    else:
        return RunPlan(hw, wl, dataflow, scale, _best_of_packing(run, progress))
    sched = run.schedule(tilings, progress, runs if share_prefix else ())
    if share_prefix is None and runs:       # the shared reads where the model finds them faster
        alt = run.schedule(tilings, None, runs)
        if (alt.total_cycles, alt.read_bytes) < (sched.total_cycles, sched.read_bytes):
            sched = alt
    return RunPlan(hw, wl, dataflow, scale, sched)


def _runs(run: _Builder, share: bool | None) -> list:
    """The runs of sequences that share their first pages (sim/shared.py) where ``share``
    allows reading them once; a :class:`ConfigError` where it demands it and the workload
    cannot."""
    if share is False:
        return []
    why = can_share(run.wl, run.dataflow, run.scale.alibi_m is not None)
    if why and share:
        raise bad("share_prefix", share, f"shared prefixes are read once in paged decode "
                  f"batches only: this run has {why}")
    return [] if why else shared_runs(run.hw, run.wl, run.table)


@dataclass(frozen=True)
class _Builder:
    """The inputs of a schedule that stay fixed while its tiling is chosen."""

    hw: HardwareConfig
    wl: Workload | VarlenWorkload
    dataflow: str
    timing: Timing
    scale: ScaleParams
    keep_spans: bool
    table: BlockTable | None
    # what the timeline simulated, shared by every candidate's schedule (same hardware,
    # timing and ring; the keys are relative, so a repeat is exact)
    memos: dict = dataclasses.field(default_factory=dict, compare=False)
    # validate each program built (off for a varlen batch's sequences timed alone to choose
    # their tilings: the batch's own program, with those tilings, is validated)
    check: bool = True

    def schedule(self, tiling: io.Tiling | list[io.Tiling], progress=None,
                 runs=()) -> Schedule:
        """The program of ``wl`` under ``tiling`` (or one tiling per sequence), validated, and
        its timeline; ``runs``: sequences that read their shared pages once. The schedule
        reports the tiling of the longest sequence and keeps the list."""
        hw, wl = self.hw, self.wl
        rs, ks = self.scale.per_row, self.scale.k_m is not None
        vs = self.scale.v_m is not None
        tiles = program_tiles(wl, tiling, self.scale.sink_m is not None, runs)
        # tiles whose heads interleave read and write a position's rows together: Q and O
        # then lie position by position
        tm = any(t.head_pos for t in (tiling if isinstance(tiling, list) else [tiling]))
        layout = Layout.packed(hw, wl, program_length(tiles) * INSTR_BYTES, rs, ks, self.table,
                               sinks=self.scale.side_words, token_major=tm, value_scales=vs)
        program = build_program(hw, wl, tiling, layout, self.scale, tiles)
        tilings = list(tiling) if isinstance(tiling, list) else None
        if tilings is not None:
            longest = max(range(len(tilings)), key=lambda i: wl.segments()[i].seq_q)
            tiling = tilings[longest]
        ring = None if self.dataflow == "attenio" else max(t.keys_per_step
                                                           for t in tilings or [tiling])
        if self.check and ring is None:
            validate(program, hw)
        elif self.check:
            rows = max(t.rows for t in tilings or [tiling])
            validate(program, _with_ring(hw, 2 * ring, rows), rtl=False)
        total, stats, rb, wb, spans = simulate_program(
            hw, wl, program, self.timing, ring, self.keep_spans, progress,
            entries=layout.entries if layout.paged else None,
            memos=self.memos.setdefault(ring, {}))
        return Schedule(hw, wl, self.dataflow, tiling, program, total, stats.busy,
                        stats.stalls, stats.useful_macs, rb, wb, spans, self.timing,
                        activity=stats.activity, tilings=tilings, requests=stats.requests,
                        layout=layout, shared_runs=list(runs) or None)


def _best_of_packing(run: _Builder, progress=None) -> Schedule:
    """One shape's schedule under its chosen tiling; with GQA packing a choice, the faster
    (by the model's cycles, then bytes) of packed and one head a tile."""
    tiling = io.choose_tiling(run.hw, run.wl, run.dataflow)
    two = tiling.heads_per_tile > 1

    def part(i):                       # progress of candidate i of the one or two
        if progress is None:
            return None
        return lambda f: progress((i + f) / 2 if two else f)

    best = run.schedule(tiling, part(0))
    if two:
        # GQA packing shares K/V but makes tiles of fewer positions: keep it only when it
        # wins by the model's cycles (then bytes). One head a tile reads each K/V head once per
        # query head: where those bytes alone take longer at the read channel's rate than the
        # packed run takes whole, it cannot win, and is not timed (MLA's decode: 128 heads)
        alone = io.choose_tiling(run.hw, run.wl, run.dataflow, pack=False)
        if _floor(run, alone) <= best.total_cycles:
            mha = run.schedule(alone, part(1))
            if (mha.total_cycles, mha.read_bytes) < (best.total_cycles, best.read_bytes):
                best = mha
    return best


def _floor(run: _Builder, tiling: io.Tiling) -> int:
    """A bound no schedule of ``tiling`` beats: its read bytes at the read channel's rate, or
    its steps, each a Q Kᵀ and a P V phase of at least ``min_phase`` cycles one after another
    on the PE array (a one-head tile of a short window is mostly that padding)."""
    hw, wl = run.hw, run.wl
    rate = min(hw.dram_bytes_per_cycle, hw.axi_data_bytes)
    read = io.workload_traffic(hw, wl, run.dataflow, tiling).read_bytes // rate
    if run.dataflow != "attenio":
        return read
    steps = sum(-(-t.keys // tile_keys_per_step(hw, wl, t, run.scale.k_m is not None))
                for t in program_tiles(wl, tiling, run.scale.sink_m is not None))
    return max(read, 2 * steps * run.timing.min_phase)


def _sequence_tilings(run: _Builder) -> list[io.Tiling]:
    """Each sequence's tiling, as a run of the sequence alone would choose it (GQA packing
    kept where it wins on that sequence's own cycles: the one case that times candidates);
    one choice per shape."""
    hw, wl = run.hw, run.wl
    chosen: dict[tuple[int, int], io.Tiling] = {}
    out = []
    for i in range(wl.sequences):
        if wl.empty(i):     # no keys to tile for: its tiles (if it has queries) are keyless
            one = Workload(seq_q=max(1, wl.seqlens_q[i]), seq_k=1, head_dim=wl.head_dim,
                           heads=wl.heads, kv_heads=wl.kv_heads, page_size=wl.page_size,
                           lse=wl.lse)
        else:
            one = wl.sequence(i)
        shape = (wl.seqlens_q[i], wl.seqlens_k[i])
        if shape not in chosen:
            t = io.choose_tiling(hw, one, run.dataflow, pack=not wl.empty(i))
            if t.heads_per_tile > 1:
                alone = dataclasses.replace(run, wl=one, keep_spans=False, table=(
                    block_table_for(one) if one.page_size else None), check=False)
                t = _best_of_packing(alone).tiling
            chosen[shape] = t
        out.append(chosen[shape])
    return out


def _with_ring(hw: HardwareConfig, ring: int, rows: int | None = None) -> HardwareConfig:
    # Baselines keep their K/V blocks in the unified memory, not in the row ring: give the
    # validator a ring (and tile) of the size the baseline's tiling uses.
    return dataclasses.replace(hw, kv_ring_depth=max(hw.kv_ring_depth, ring),
                               tile_rows=max(hw.tile_rows, rows or 0))
