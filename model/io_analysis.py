"""Closed-form DRAM traffic of exact attention under each dataflow (the paper's §3 and baselines).

Traffic is counted in elements (the paper's unit) and in bytes (reads at the input element size,
writes at the output element size of our datapath). One head is ``seq_q`` query rows against
``seq_k`` keys with head dim ``d``; whole workloads multiply by batch and heads, with GQA sharing
K/V passes across a group where the dataflow allows it.

Dataflows (brief §2):

========================= =================================================================
``attenio``               Q tile of ``a`` rows resident with its O accumulator; K and V stream
                          row by row (``b`` keys per step): ``T = 2Nd(1 + ⌈N/a⌉)`` (Eq. 13)
``fa2``                   FlashAttention-2, the paper's rule ``Br = min(⌈M/4d⌉, d)``,
                          ``Bc = ⌈M/4d⌉``: ``2Nd + 2Nd⌈N/Br⌉``
``fa2-uncapped``          FlashAttention-2 with ``Br = ⌈M/4d⌉``
``flat``                  FLAT, R full rows of S on chip, ``R = ⌊(M − 2d)/(N + 2d + 2)⌋``
``standard``              unfused: S and P round-trip off-chip, each GEMM pebble-tiled
========================= =================================================================

``M`` is the on-chip memory in elements (:func:`memory_elements`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import ConfigError, bad
from attenio.contract.rules import ENTRY_BYTES, PageWalk, key_span, keys_seen

__all__ = [
    "DATAFLOWS",
    "Tiling",
    "Traffic",
    "memory_elements",
    "attenio_rows",
    "attenio_rows_eq14",
    "choose_tiling",
    "head_traffic",
    "workload_traffic",
    "compulsory",
    "lower_bound_reference",
    "search_attenio_tiling",
]

DATAFLOWS = ("attenio", "fa2", "fa2-uncapped", "flat", "standard")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def memory_elements(hw: HardwareConfig) -> int:
    """On-chip memory M in elements.

    ``sram_bytes / element_bytes`` where the config sets a unified budget (model presets, as the
    paper counts it); otherwise the physical buffers: Q tile and O accumulator
    (``tile_rows × max_head_dim`` each), the K/V ring (``kv_ring_depth × max_head_dim``) and
    three statistics per row, counted in elements as Eq. 14 does.
    """
    if hw.sram_bytes is not None:
        return hw.sram_bytes // hw.element_bytes
    return (2 * hw.tile_rows * hw.max_head_dim + hw.kv_ring_depth * hw.max_head_dim
            + 3 * hw.tile_rows)


def attenio_rows_eq14(m: int, d: int, b: int = 1) -> int:
    """Largest ``a`` with ``a·d + b·d + a·b + a·d + 3a ≤ M`` (paper Eq. 14; ``(M−d)/(2d+4)`` at
    b = 1). Raises :class:`ConfigError` when not even one row fits."""
    a = (m - b * d) // (2 * d + b + 3)
    if a < 1:
        need = b * d + 2 * d + b + 3
        raise ConfigError(f"head_dim={d} is invalid: on-chip memory of {m} elements holds no "
                          f"query row (Eq. 14 needs at least {need} elements)")
    return a


@dataclass(frozen=True)
class Tiling:
    """A dataflow's tiling for one workload.

    ``rows``: query rows per tile (a, Br or R). ``keys_per_step``: keys the PE array handles at
    once (b, or Bc for FlashAttention-2). ``heads_per_tile``: GQA query heads sharing one tile
    (their rows are ``rows // heads_per_tile`` positions each). ``kv_block``: granularity at which
    causal skipping can drop keys. ``fixed_b``: every tile, the remainder included, uses
    ``keys_per_step`` (the paper's b = 1 rule); otherwise a short tile takes ``⌊P/rows⌋``.
    ``head_pos``: the packed heads' rows interleave, a position's heads side by side
    (``COMPUTE.head_pos``), so a window's or causal mask skips row groups in them too.
    """

    dataflow: str
    rows: int
    keys_per_step: int = 1
    heads_per_tile: int = 1
    kv_block: int = 1
    notes: str = ""
    fixed_b: bool = False  # every tile uses keys_per_step (else a short tile may take more)
    head_pos: bool = False  # packed heads interleaved: row ρ is head ρ mod heads_per_tile

    @property
    def positions(self) -> int:
        """Query positions per tile (per head)."""
        return self.rows // self.heads_per_tile


def keys_per_step(lines: int, rows: int, ring_half: int) -> int:
    """Keys the array takes per step: the largest power of two ``b`` with ``rows·b ≤ lines``
    and ``b ≤ ring_half`` (1 when the tile has at least as many rows as MAC lines). A power
    of two, so the hardware splits lines into chains with shifts."""
    b = 1
    while rows * b * 2 <= lines and b * 2 <= max(1, ring_half):
        b *= 2
    return b


def attenio_rows(hw: HardwareConfig, d: int) -> int:
    """Query rows our buffers hold for head dim ``d``: Eq. 14 on the unified budget, or the
    physical Q/O capacity (``tile_rows``), whichever is smaller."""
    if d > hw.max_head_dim:
        raise bad("head_dim", d, f"must be in [1, {hw.max_head_dim}] (max_head_dim)")
    if hw.sram_bytes is None:
        return hw.tile_rows
    return min(hw.tile_rows, attenio_rows_eq14(memory_elements(hw), d))


def causal_mask(wl: Workload) -> bool:
    """Whether the causal mask hides anything: with one query (decode) bottom-right alignment
    lets it see every key, so the work is the non-causal one (and GQA heads can share a
    tile)."""
    return wl.causal and wl.seq_q > 1


def choose_tiling(hw: HardwareConfig, wl: Workload, dataflow: str = "attenio", *,
                  pack: bool = True) -> Tiling:
    """The tiling a dataflow uses for ``wl`` on ``hw`` (see the module table).

    For ``attenio``: ``a`` from :func:`attenio_rows`; when ``a`` is below the number of MAC
    lines the array takes ``b`` keys per step (:func:`keys_per_step`),
    re-solving Eq. 14 for that ``b`` on a unified budget; GQA packs the group's heads into one
    tile when ``pack``, ``a ≥ group`` and the causal mask hides nothing (:func:`causal_mask`).
    Whether packing is worth it is the schedule's call (``sim.schedule.schedule`` keeps it only
    when its cycles win).
    """
    if dataflow not in DATAFLOWS:
        raise bad("dataflow", dataflow, f"choose one of: {', '.join(DATAFLOWS)}")
    d = wl.head_dim
    m = memory_elements(hw)
    if dataflow == "attenio":
        a = attenio_rows(hw, d)
        g = wl.group_size
        if pack and wl.windowed and 1 < g <= hw.mac_lines and g & (g - 1) == 0 and a >= g:
            return _head_pos_tiling(hw, wl, a, g)
        # (a window's tiles are one head's: its rows' edges differ per position, unless the
        # heads interleave, above)
        heads = g if (pack and g > 1 and a >= g and not wl.windowed) else 1
        if heads > 1 and causal_mask(wl):
            # the core's mask of packed heads needs each head's rows in a tile to fill a row
            # group (≥ mac_lines), in every tile the causal order makes
            pos = min(a, wl.seq_q * heads) // heads
            if min(r for _, r in query_tiles(wl.seq_q, pos, True)) < hw.mac_lines:
                heads = 1
        rows_needed = wl.seq_q * heads
        a = min(a, rows_needed)
        if wl.windowed and a > hw.mac_lines:
            # whole row groups: a window's steps skip groups, and a part-filled last group
            # costs a whole group's step for each key it sees
            a -= a % hw.mac_lines
        a -= a % heads  # whole positions per head
        # The array holds one row per MAC line (its MACs split the columns), so a tile with
        # fewer rows than lines takes several keys per step to keep the lines busy.
        lines = hw.mac_lines
        cap = _kps_cap(hw, wl)
        b = keys_per_step(lines, a, cap)
        if b > 1 and hw.sram_bytes is not None:
            a2 = min(a, attenio_rows_eq14(m, d, b))
            a2 -= a2 % heads
            b = keys_per_step(lines, a2, cap)
            a = a2
        return Tiling("attenio", rows=a, keys_per_step=b, heads_per_tile=heads, kv_block=1,
                      notes=f"a={a}, b={b}" + (f", {heads} heads per tile" if heads > 1 else ""))
    bc = _cdiv(m, 4 * d)
    if dataflow == "fa2":
        br = min(bc, d)
        return Tiling("fa2", rows=min(br, wl.seq_q), keys_per_step=bc, kv_block=bc,
                      notes=f"Br=min(ceil(M/4d), d)={br}, Bc={bc}")
    if dataflow == "fa2-uncapped":
        return Tiling("fa2-uncapped", rows=min(bc, wl.seq_q), keys_per_step=bc, kv_block=bc,
                      notes=f"Br=Bc=ceil(M/4d)={bc}")
    if dataflow == "flat":
        r = (m - 2 * d) // (wl.seq_k + 2 * d + 2)
        spill = r < 1
        return Tiling("flat", rows=max(1, min(r, wl.seq_q)), keys_per_step=1, kv_block=1,
                      notes=f"R={max(r, 1)}" + (" (a row of S spills off-chip)" if spill else ""))
    # standard: pebble-optimal tiles of each GEMM (reported for information)
    return Tiling("standard", rows=wl.seq_q, notes=f"GEMM tiles of about sqrt(M)={math.isqrt(m)}")


def _kps_cap(hw: HardwareConfig, wl: Workload) -> int:
    """The most keys a step may take: the ring's half, the array's chains and, from a paged
    cache, a page (a block lies in one page)."""
    cap = min(hw.ring_rows, hw.max_keys_per_step)
    return min(cap, wl.page_size) if wl.page_size else cap


# COMPUTE's heads field: the positions of a tile whose heads interleave (head_pos)
HEAD_POS_MAX = 255


def _head_pos_tiling(hw: HardwareConfig, wl: Workload, a: int, g: int) -> Tiling:
    """A window's GQA group in one tile with its heads interleaved (``head_pos``): each row
    group holds ``mac_lines/g`` positions of every head, so the window's edges skip whole row
    groups, step by step, as one head's would. As many positions as the tile and the
    instruction's heads field hold, in whole row groups: the K/V a tile reads (its positions
    plus the window) is then shared by the most rows; the skipping keeps the compute near the
    window's own."""
    per_group = max(1, hw.mac_lines // g)
    pos = min(a // g, HEAD_POS_MAX, wl.seq_q)
    if pos >= per_group:
        pos -= pos % per_group
    b = keys_per_step(hw.mac_lines, pos * g, _kps_cap(hw, wl))
    return Tiling("attenio", rows=pos * g, keys_per_step=b, heads_per_tile=g, kv_block=1,
                  head_pos=True, notes=f"a={pos * g}, b={b}, {g} heads per tile interleaved")


@dataclass(frozen=True)
class Traffic:
    """DRAM traffic: element counts by operand and the byte totals."""

    reads: dict[str, int] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)
    read_bytes: int = 0
    write_bytes: int = 0

    @property
    def read_elements(self) -> int:
        return sum(self.reads.values())

    @property
    def write_elements(self) -> int:
        return sum(self.writes.values())

    @property
    def elements(self) -> int:
        return self.read_elements + self.write_elements

    @property
    def bytes(self) -> int:
        return self.read_bytes + self.write_bytes

    def __add__(self, other: Traffic) -> Traffic:
        keys = lambda a, b: {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}  # noqa: E731
        return Traffic(keys(self.reads, other.reads), keys(self.writes, other.writes),
                       self.read_bytes + other.read_bytes, self.write_bytes + other.write_bytes)

    def scaled(self, k: int) -> Traffic:
        return Traffic({n: v * k for n, v in self.reads.items()},
                       {n: v * k for n, v in self.writes.items()},
                       self.read_bytes * k, self.write_bytes * k)


def _make(hw: HardwareConfig, reads: dict[str, int], writes: dict[str, int],
          spill_bytes_per_element: int | None = None) -> Traffic:
    eb = hw.element_bytes
    ob = hw.out_element_bytes
    sb = spill_bytes_per_element or eb
    rb = sum(v * (sb if k in ("S", "P") else eb) for k, v in reads.items())
    wb = sum(v * (sb if k in ("S", "P") else ob) for k, v in writes.items())
    return Traffic(reads, writes, rb, wb)


def keys_visible(tile_last_pos: int, seq_q: int, seq_k: int) -> int:
    """Keys a causal query tile must see: up to its last row's diagonal (bottom-right aligned)."""
    return keys_seen(tile_last_pos, seq_k - seq_q, seq_k)


def query_tiles(seq_q: int, positions: int, causal: bool) -> list[tuple[int, int]]:
    """(first position, rows) of each query tile. Full tiles of ``positions`` rows; the
    remainder tile goes last, except under a causal mask, where it goes first: the first tile
    sees the fewest keys, so the short tile there wastes the least K/V traffic."""
    full, rem = divmod(seq_q, positions)
    sizes = [positions] * full
    if rem:
        sizes = [rem] + sizes if causal else sizes + [rem]
    out, p0 = [], 0
    for r in sizes:
        out.append((p0, r))
        p0 += r
    return out


def tile_keys(p0: int, rows: int, seq_q: int, seq_k: int, causal: bool, kv_block: int) -> int:
    """Keys a query tile streams: all of them, or (causal) up to its last row's diagonal,
    rounded up to the dataflow's K/V block."""
    if not causal:
        return seq_k
    need = keys_visible(p0 + rows - 1, seq_q, seq_k)
    return min(seq_k, _cdiv(need, kv_block) * kv_block)


def tile_span(p0: int, rows: int, seq_q: int, seq_k: int, causal: bool, kv_block: int,
              window=(-1, -1), page: int = 0) -> tuple[int, int]:
    """The keys ``[first, end)`` a query tile streams: those some row of it sees
    (``contract.rules.key_span``: causal, the sliding window) widened to whole K/V blocks of
    the dataflow; ``(0, tile_keys(…))`` without a window. ``first == end`` when it sees none.
    From a paged cache (``page`` keys a page) ``first`` is a page's first key."""
    if window == (-1, -1):
        return 0, tile_keys(p0, rows, seq_q, seq_k, causal, kv_block)
    first, end = key_span(p0, p0 + rows - 1, seq_k - seq_q, seq_k, causal, window)
    if first >= end:
        return 0, 0
    first -= first % kv_block
    end = min(seq_k, first + _cdiv(end - first, kv_block) * kv_block)
    return (first - first % page if page else first), end


def _kv_reads(seq_q: int, seq_k: int, positions: int, causal: bool,
              kv_block: int, window=(-1, -1), page: int = 0, table0: int = 0,
              per_word: int = 1, sinks: bool = False,
              group: int = 0) -> tuple[int, int, int]:
    """Keys (K rows, and as many V rows) read by a dataflow that streams K/V once per query
    tile, and from a paged cache the block-table words (of ``per_word`` entries) its walks
    read, the sequence's table starting ``table0`` entries into a word
    (``contract.rules.PageWalk``). With ``sinks`` a tile that sees no key reads one, masked
    (sim.program.program_tiles: its rows' softmax starts from their sinks). The third count:
    K factor words read, with ``group`` > 0 (the keys a factor word serves: 1 for a word
    after each K row, a page's factor group in a paged cache, whose spans start on a page)."""
    total = words = factors = 0
    for p0, r in query_tiles(seq_q, positions, causal):
        first, end = tile_span(p0, r, seq_q, seq_k, causal, kv_block, window, page)
        if sinks and first == end and seq_k:
            first = min(first, seq_k - 1)
            first -= first % page if page else 0
            end = first + 1
        total += end - first
        factors += _cdiv(end - first, group) if group else 0
        if page and end > first:        # the table words its walk reads (tables 4 KB aligned)
            words += PageWalk(ENTRY_BYTES * (table0 + first // page), end - first,
                              page.bit_length() - 1, per_word * ENTRY_BYTES).words
    return total, words, factors


def factor_group(hw: HardwareConfig, wl, key_scales: bool) -> int:
    """Keys one K factor word serves (0 without ``key_scales``): one (the word after each K
    row) or, in a paged cache, a page's :meth:`~HardwareConfig.factor_group`."""
    if not key_scales:
        return 0
    return hw.factor_group(wl.page_size) if wl.page_size else 1


def head_traffic(hw: HardwareConfig, wl: Workload, tiling: Tiling, table0: int = 0,
                 sinks: bool = False, side: bool = False, key_scales: bool = False,
                 row_scales: bool = False, value_scales: bool = False) -> Traffic:
    """Traffic of one K/V head's work: ``heads_per_tile`` query heads (1 without GQA sharing).
    A paged cache adds the block-table words each ``LOAD_KV`` reads (its sequence's table at
    entry ``table0`` of the tables, which start on a 4 KB line). ``sinks``: as
    :func:`workload_traffic`; ``side``: the Q rows carry their side words (ALiBi's slope);
    ``key_scales``: the K rows' factor words (``KF``, :func:`factor_group`); ``row_scales``:
    each Q row's multiplier word (its side words, with ``sinks`` or ``side``);
    ``value_scales``: a paged cache's V factor words (``VF``, as many as K's would be)."""
    nq, nk, d = wl.seq_q, wl.seq_k, wl.head_dim
    dv = wl.d_v                     # V's and O's rows (contract/variant.py)
    h = tiling.heads_per_tile
    if tiling.dataflow == "standard":
        return _standard(hw, nq, nk, d).scaled(h)
    per_word = max(1, hw.axi_data_bytes // ENTRY_BYTES)
    keys, words, factors = _kv_reads(nq, nk, tiling.positions, causal_mask(wl),
                                     tiling.kv_block, wl.window, wl.page_size, table0,
                                     per_word, sinks,
                                     factor_group(hw, wl, key_scales or value_scales))
    # V read from K's rows (LOAD_KV.v_in_k): none of its own
    reads = {"Q": h * nq * (d + _q_side(hw, sinks or side, row_scales)), "K": keys * d,
             "V": 0 if wl.v_in_k else keys * dv}
    if factors and key_scales:
        reads["KF"] = factors * hw.macs_per_line
    if factors and value_scales:
        reads["VF"] = factors * hw.macs_per_line
    writes = {"O": h * nq * dv}
    if wl.lse:          # each row's statistics: one output word (docs/isa.md)
        writes["LSE"] = h * nq * hw.macs_per_line
    if tiling.dataflow == "flat" and "spills" in tiling.notes:
        # S for one row does not fit: the partial row goes out and comes back once.
        reads["S"] = nq * nk
        writes["S"] = nq * nk
    t = _make(hw, reads, writes)
    return dataclasses.replace(t, read_bytes=t.read_bytes + words * hw.axi_data_bytes)


def _gemm_tile(m: int, n: int, mem: int) -> tuple[int, int]:
    """Output-stationary GEMM tile x×y (y ≤ n) maximizing reuse with ``x·y + x + y ≤ M``."""
    side = max(1, math.isqrt(mem) - 1)
    y = min(n, side)
    x = max(1, min(m, (mem - y) // (y + 1)))
    return x, y


def _standard(hw: HardwareConfig, nq: int, nk: int, d: int) -> Traffic:
    """Unfused attention: S = QKᵀ and O = PV as pebble-tiled GEMMs, softmax reading S and
    writing P. A GEMM C(m×n) += A(m×k)·B(k×n) with an x×y output tile reads A ⌈n/y⌉ times and
    B ⌈m/x⌉ times and writes C once."""
    m = memory_elements(hw)
    x, y = _gemm_tile(nq, nk, m)
    q_reads = nq * d * _cdiv(nk, y)
    k_reads = nk * d * _cdiv(nq, x)
    x2, y2 = _gemm_tile(nq, d, m)
    p_reads = nq * nk * _cdiv(d, y2)
    v_reads = nk * d * _cdiv(nq, x2)
    reads = {"Q": q_reads, "K": k_reads, "S": nq * nk, "P": p_reads, "V": v_reads}
    writes = {"S": nq * nk, "P": nq * nk, "O": nq * d}
    return _make(hw, reads, writes)


def workload_traffic(hw: HardwareConfig, wl, dataflow: str = "attenio",
                     tiling: Tiling | list[Tiling] | None = None,
                     table_starts: list[int] | None = None, sinks: bool = False,
                     side: bool = False, skip=frozenset(), key_scales: bool = False,
                     row_scales: bool = False, value_scales: bool = False) -> Traffic:
    """Traffic of a whole workload: every batch, every K/V head and its query heads; of a
    varlen batch (``VarlenWorkload``), the sum of its sequences', each under its own tiling
    (``tiling``: one per sequence, or one for all). A paged cache reads each sequence's table
    from entry ``table_starts[i]`` of the tables (default: the rows one after another, each
    exactly its pages: the seeded shuffle's layout). ``sinks``: each Q row carries its side
    words (its multiplier and its sink, ``HardwareConfig.q_side_words``) and a tile that sees
    no key reads one; ``side``: each Q row carries its side words without a sink (ALiBi's
    slope rides there). ``skip``: sequences left out (a shared-prefix run's, counted by
    ``sim.shared.run_traffic``); ``key_scales``, ``row_scales``: each key's K factor read
    with it, each Q row's multiplier; ``value_scales``: a paged cache's V factor words
    (:func:`head_traffic`)."""
    tilings = tiling if isinstance(tiling, list) else [tiling] * wl.sequences
    if not isinstance(wl, Workload) or (wl.page_size and wl.batch > 1):
        # sequence by sequence (a paged cache: each with its own table row)
        total, table0 = Traffic(), 0
        segments = wl.segments()
        for i, t in enumerate(tilings):
            if table_starts is not None:
                table0 = table_starts[i]
            if i in skip:
                pass
            elif wl.empty(i):
                total = total + _keyless_traffic(hw, wl, wl.seqlens_q[i], sinks or side,
                                                 row_scales)
                continue
            else:
                total = total + _sequence_traffic(hw, wl.sequence(i), dataflow, t, table0,
                                                  sinks, side, key_scales, row_scales,
                                                  value_scales)
            table0 += _cdiv(segments[i].seq_k, wl.page_size) if wl.page_size else 0
        return total
    return _sequence_traffic(hw, wl, dataflow, tilings[0],
                             table_starts[0] if table_starts else 0, sinks, side, key_scales,
                             row_scales, value_scales)


def _q_side(hw: HardwareConfig, sinks: bool, row_scales: bool = False) -> int:
    """Elements a Q row carries after its data: with sinks its side words, with
    ``row_scales`` alone its multiplier's word, else none."""
    return hw.q_side_words(row_scales or sinks, sinks) * hw.macs_per_line


def _keyless_traffic(hw: HardwareConfig, wl, rows: int, sinks: bool = False,
                     row_scales: bool = False) -> Traffic:
    """An empty sequence's traffic: none without queries; with queries but no keys, its Q rows
    read and its O rows written (0, and with ``lse`` their statistics words: m_init, ℓ = 0),
    no K, V or table word."""
    if rows == 0:
        return Traffic()
    writes = {"O": wl.heads * rows * wl.d_v}
    if wl.lse:
        writes["LSE"] = wl.heads * rows * hw.macs_per_line
    return _make(hw, {"Q": wl.heads * rows * (wl.head_dim + _q_side(hw, sinks, row_scales))},
                 writes)


def _sequence_traffic(hw, wl: Workload, dataflow: str, tiling, table0: int = 0,
                      sinks: bool = False, side: bool = False,
                      key_scales: bool = False, row_scales: bool = False,
                      value_scales: bool = False) -> Traffic:
    t = tiling or choose_tiling(hw, wl, dataflow)
    per_kv_head_units = wl.group_size // t.heads_per_tile
    one = head_traffic(hw, wl, t, table0, sinks, side, key_scales, row_scales, value_scales)
    return one.scaled(wl.batch * wl.kv_heads * per_kv_head_units)


def compulsory(wl: Workload) -> int:
    """Elements every dataflow must move: read Q, K, V once and write O once (4Nd at Nq = Nk)."""
    per = 2 * wl.seq_q * wl.head_dim * wl.heads + 2 * wl.seq_k * wl.head_dim * wl.kv_heads
    return wl.batch * per


def lower_bound_reference(n: int, d: int, m: int) -> float:
    """The Θ(N²d²/M) term of the unconditional lower bound (Saha & Ye 2024; FlashAttention
    Prop. 3), as ``4N²d²/M``: a reference scale, not a tight constant."""
    return 4.0 * n * n * d * d / m


def search_attenio_tiling(n: int, d: int, m: int) -> tuple[int, int, int]:
    """Exhaustively search feasible (a, b) under Eq. 14's memory constraint and return the
    smallest traffic ``2Nd(1 + ⌈N/a⌉)`` with its (a, b) (for the optimality test)."""
    best = None
    for b in range(1, n + 1):
        for a in range(1, n + 1):
            if a * d + b * d + a * b + a * d + 3 * a > m:
                break
            t = 2 * n * d * (1 + _cdiv(n, a))
            if best is None or t < best[0]:
                best = (t, a, b)
        if b * d + 2 * d + b + 3 > m:
            break
    if best is None:
        raise ConfigError(f"memory={m} is invalid: holds no tile at d={d}")
    return best
