"""Program emission: the instruction stream of a tiling (contract/isa.py, docs/isa.md), its
tiles enumerated once so the program's length is counted before any address is known."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from attenio.base.config import HardwareConfig, VarlenWorkload, Workload
from attenio.base.errors import bad
from attenio.base.workload import Segment
from attenio.contract.program import Instr, Op
from attenio.contract.rules import ENTRY_BYTES
from attenio.model import io_analysis as io
from attenio.model.numerics import ScaleParams
from attenio.sim.layout import Layout
from attenio.sim.shared import SharedTile

# a tile of one COMPUTE: no parts (COMPUTE.cont, .more, .select: docs/isa.md)
NO_PARTS = {"cont": 0, "more": 0, "select": 0, "sel_row": 0}

__all__ = ["build_program", "program_tiles", "program_length", "Tile", "tile_keys_per_step"]


def _keys_per_step(hw: HardwareConfig, rows: int, dataflow_b: int, ring_limit: int) -> int:
    if rows >= hw.mac_lines:
        return min(dataflow_b, ring_limit)
    return io.keys_per_step(hw.mac_lines, rows, min(ring_limit, hw.max_keys_per_step))


class Tile(NamedTuple):
    """One tile of a program: sequence ``seg`` (its place in the tensors), K/V head ``hk``,
    query heads ``h0 …`` (``tiling.heads_per_tile`` of them), query positions ``p0 …
    p0+rows−1`` of the sequence, the ``keys`` it streams, and the tiling it was cut by."""

    seg: Segment
    hk: int
    h0: int
    p0: int
    rows: int
    keys: int
    tiling: io.Tiling
    causal: bool       # the causal mask hides something here (not for one query row)
    first: int = 0     # the first key it streams (a sliding window starts past 0)


def program_tiles(wl: Workload | VarlenWorkload,
                  tiling: io.Tiling | Sequence[io.Tiling], sinks: bool = False,
                  runs: Sequence[tuple[int, int, int]] = ()) -> list[Tile | SharedTile]:
    """The tiles of ``wl`` in program order: sequence by sequence (``wl.segments()``; a tile
    never spans two), then K/V head, query heads and query positions. ``tiling`` is one for
    every sequence or one per sequence. With ``sinks`` a tile whose rows see none of their
    sequence's keys streams one (masked) key all the same: its rows' softmax then starts
    from their sinks, as every row's does (their lse is the sink's, not −∞); a sequence with
    no keys streams none. ``runs``: decode sequences that share their first pages
    (sim/shared.py, ``shared_runs``), one :class:`SharedTile` a K/V head in their place."""
    segments = wl.segments()
    tilings = list(tiling) if isinstance(tiling, (list, tuple)) else [tiling] * len(segments)
    if len(tilings) != len(segments):
        raise bad("tilings", f"{len(tilings)} tilings", f"one per sequence: {len(segments)}")
    tiles: list[Tile | SharedTile] = []
    in_run = {i: r for r in runs for i in range(r[0], r[0] + r[1])}
    for i, (seg, t) in enumerate(zip(segments, tilings, strict=True)):
        if i in in_run:
            first, n, pages = in_run[i]
            keys = pages * wl.page_size
            if i == first:
                own = tuple(wl.seqlens_k[j] - keys for j in range(first, first + n))
                tiles += [SharedTile(first, hk, keys, own) for hk in range(wl.kv_heads)]
            continue
        if seg.seq_q == 0:           # an empty sequence without queries: no tile
            continue
        # (no keys: its tiles stream none, and their rows give 0, lse −∞)
        causal = io.causal_mask(wl.sequence(i)) if not wl.empty(i) else False
        for hk in range(wl.kv_heads):
            for h0 in range(hk * wl.group_size, (hk + 1) * wl.group_size, t.heads_per_tile):
                for p0, rows in io.query_tiles(seg.seq_q, t.positions, causal):
                    # (a paged LOAD_KV starts at a page's first key)
                    first, end = io.tile_span(p0, rows, seg.seq_q, seg.seq_k, causal,
                                              t.kv_block, wl.window, wl.page_size)
                    if sinks and first == end and seg.seq_k:
                        first = min(first, seg.seq_k - 1)
                        first -= first % wl.page_size if wl.page_size else 0
                        end = first + 1
                    tiles.append(Tile(seg, hk, h0, p0, rows, end - first, t, causal, first))
    return tiles


def _mask_fields(wl, seg: Segment, causal: bool, first: int,
                 alibi: bool = False) -> dict[str, int]:
    """``COMPUTE``'s mask of a tile whose keys start at key ``first`` of its sequence: the
    upper edge (causal, or a window's right side) as ``causal`` with its ``diag``, the window's
    left side as ``window`` with ``win_diag`` (docs/isa.md), both relative to ``first``. With
    ``alibi`` and no upper edge, ``diag`` is the sequence's relative to ``first`` (ALiBi's
    distance ``|row + q_pos + diag − key|`` reads it)."""
    left, right = wl.window
    upper = seg.diag if causal else (seg.diag + right if right >= 0 else None)
    return {"causal": int(upper is not None),
            "diag": (seg.diag - first if alibi else seg.diag) if upper is None
            else upper - first,
            "window": int(left >= 0),
            "win_diag": seg.diag - left - first if left >= 0 else 0}


def _paged_fields(layout: Layout, seq: int, hk: int, first: int, page: int) -> dict[str, int]:
    """A paged ``LOAD_KV``'s fields (docs/isa.md, "Paged K/V"): the table from the entry of
    the page holding key ``first`` of sequence ``seq``; ``k_addr``, ``v_addr``: K/V head
    ``hk``'s rows in a page slot, and V's pool's distance from K's (sim/layout.py)."""
    pc = layout.paged
    return {"paged": 1, "page_log2": page.bit_length() - 1,
            "table": layout.tables + ENTRY_BYTES * (pc.table_start[seq] + first // page),
            "k_addr": hk * pc.k_head, "v_addr": layout.v - layout.k + hk * pc.v_head}


def tile_keys_per_step(hw: HardwareConfig, wl: Workload | VarlenWorkload, t: Tile,
                       key_scales: bool = False) -> int:
    """The keys a step of tile ``t`` takes (its ``COMPUTE.keys_per_step``): the tiling's, or
    for attenio as many as its rows leave lines for, within the ring (half of it with V in K's
    rows: a K block waits for V slots freed two blocks back) and a page (with K factors
    or V factors (``key_scales``) a page's factor group: a block's factors lie in one word)."""
    tl = t.tiling
    if tl.dataflow != "attenio" or tl.fixed_b:
        return tl.keys_per_step
    ring = hw.ring_rows
    if wl.v_in_k:
        ring = max(1, ring // 2)
    if wl.page_size:
        ring = min(ring, hw.factor_group(wl.page_size) if key_scales else wl.page_size)
    return _keys_per_step(hw, t.rows * tl.heads_per_tile, 1, ring)


def program_length(tiles) -> int:
    """Instructions of the program of ``tiles`` (:func:`program_tiles`): five a tile, four for
    a tile with no keys (no ``LOAD_KV``), a shared tile's (``SharedTile.instructions``), and
    ``END``. Counted before emission, so the layout
    that follows the program is known first."""
    return sum(t.instructions if isinstance(t, SharedTile) else 5 if t.keys > 0 else 4
               for t in tiles) + 1


def build_program(hw: HardwareConfig, wl: Workload | VarlenWorkload,
                  tiling: io.Tiling | Sequence[io.Tiling], layout: Layout,
                  scale: ScaleParams, tiles=None) -> list[Instr]:
    """The instruction stream for ``wl`` under ``tiling`` (attenio, fa2, fa2-uncapped; one
    tiling or one per sequence, :func:`program_tiles`).

    Per tile: ``LOAD_Q, LOAD_KV, COMPUTE, FINALIZE, STORE_O`` with tokens load→compute (Q
    ready, pushed by ``LOAD_Q``) and compute→load (Q buffer free, pushed by ``COMPUTE`` once
    the tile's last step has issued: the next tile's Q rows load while this one's output is
    finalized and stored, the third overlap level);
    ``LOAD_KV`` feeds ``COMPUTE`` and ``FINALIZE`` feeds ``STORE_O`` through streams, paired in
    program order. One ``END`` closes the program. Program length is ``5·tiles + 1``
    instructions, O(N/a) per head. A sequence's tiles address its own rows and keys
    (``Segment.q0``, ``k0`` on the sequence axis) and mask with its own ``diag``.
    """
    eb, ob = hw.element_bytes, hw.out_element_bytes
    d, dv = wl.d_qk, wl.d_v      # Q·K's head dim; V's and O's (contract.variant.Variant)
    vk = int(wl.v_in_k)          # V is the first dv elements of each K row: no V region
    dvf = {"dv": dv if dv != d else 0}                       # 0: V's head dim is d
    dp = hw.row_elements(dv)     # a V row's pitch in DRAM: whole words (Layout.packed)
    rs = int(scale.per_row)
    sk = int(scale.sink_m is not None)       # the rows' sinks ride in their side words
    al = int(scale.alibi_m is not None)      # and so do their ALiBi slopes
    if al and not wl.causal and wl.window_right >= 0:
        raise bad("window", wl.window, "ALiBi with a window's right edge on a non-causal run "
                  "is not built (COMPUTE's diag then holds the edge, not the diagonal ALiBi "
                  "measures from): use causal=True, or a window of (left, -1)")
    dq = hw.q_row_elements(d, bool(rs), scale.side_words)   # a Q row's pitch: its side words
    c_m, c_sh = (0, 0) if rs else (scale.c_m, scale.c_sh)
    ks = int(scale.k_m is not None)
    vs = int(scale.v_m is not None)          # V factors in the V pages (paged only)
    if vs and not wl.page_size:
        raise bad("v_scale", "one per key", "V factors lie in a paged cache's V pages: give "
                  "the workload a page_size")
    lse = int(wl.lse)
    cap = ({"softcap": 0, "cap": 0} if scale.cap is None
           else {"softcap": 1, "cap": int(scale.cap)})
    do = hw.o_row_elements(dv, bool(lse))    # an O row's pitch: with its statistics' word
    # a K row's pitch: with its factor's word (a paged cache packs the factors by page)
    dk = hw.k_row_elements(d, bool(ks) and not wl.page_size)
    tiles = program_tiles(wl, tiling, sk) if tiles is None else tiles
    seq_of = {seg: i for i, seg in enumerate(wl.segments())}
    page = wl.page_size
    prog: list[Instr] = []
    last = len(tiles) - 1
    # strides between heads and between positions (rows), by the layout's order
    tm = layout.token_major
    q_head, o_head = (dq * eb, do * ob) if tm else (wl.seq_q * dq * eb, wl.seq_q * do * ob)
    q_pos_st, o_pos_st = (wl.heads * dq * eb, wl.heads * do * ob) if tm else (dq * eb, do * ob)
    # what every COMPUTE of the program says alike
    same = {"d": d, **dvf, "c_m": c_m, "c_sh": c_sh, "row_scales": rs, "key_scales": ks,
            "value_scales": vs, "lse": lse, "sinks": sk, "alibi": al, **cap}
    for t, tile in enumerate(tiles):
        if isinstance(tile, SharedTile):
            prog += _shared_tile(hw, wl, layout, tile, same, t, last,
                                 (dq * eb, do * ob, dk * eb, dp * eb))
            continue
        seg, hk, h0, p0, rows, keys, tl, causal, first = tile
        g = tl.heads_per_tile
        kps = tile_keys_per_step(hw, wl, tiles[t], bool(ks or vs))
        if page and kps > page:
            raise bad("page_size", page, f"the {tl.dataflow} tiling streams blocks of {kps} "
                      "keys: pages must hold at least one block")
        if page and (ks or vs) and kps > hw.factors_per_word:
            raise bad("keys_per_step", kps, f"the {tl.dataflow} tiling streams blocks of "
                      f"{kps} keys: with K factors in a paged cache a block's factors lie in "
                      f"one word ({hw.factors_per_word} of them)")
        q_row = ((seg.batch * wl.seq_q + seg.q0 + p0) * wl.heads + h0 if tm
                 else (seg.batch * wl.heads + h0) * wl.seq_q + seg.q0 + p0)
        q_addr = layout.q + q_row * dq * eb
        o_addr = layout.o + q_row * do * ob
        kv_off = ((seg.batch * wl.kv_heads + hk) * wl.seq_k + seg.k0 + first) * eb
        q_strides = {"row_stride": q_pos_st, "head_stride": q_head}
        o_strides = {"row_stride": o_pos_st, "head_stride": o_head}
        hp = int(tl.head_pos)
        if hp:      # heads interleaved: each position a "head" of its query heads' rows
            rows, g = g, rows
            q_strides = {"row_stride": q_head, "head_stride": q_pos_st}
            o_strides = {"row_stride": o_head, "head_stride": o_pos_st}
        common = {"rows": rows, "heads": g, "d": d}
        out = {"rows": rows, "heads": g, "d": dv}            # the output rows: V's head dim
        prog.append(Instr(Op.LOAD_Q, {**common, "keys_per_step": kps, "addr": q_addr,
                                      **q_strides, "row_scales": rs,
                                      "sinks": sk, "alibi": al},
                          pop_next=t > 0, push_next=True))
        if keys > 0:
            kv = {"k_addr": layout.k + kv_off * dk, "v_addr": layout.v + kv_off * dp,
                  "paged": 0, "page_log2": 0, "table": 0}
            if page:
                kv = _paged_fields(layout, seq_of[seg], hk, first, page)
            prog.append(_load_kv(kv, keys, kps, same, vk, dk * eb))
        prog.append(Instr(Op.COMPUTE, {**common, **same, **NO_PARTS, "keys": keys,
                                       "keys_per_step": kps, "q_pos": p0, "head_pos": hp,
                                       **_mask_fields(wl, seg, causal, first, bool(al))},
                          pop_prev=True, push_prev=t < last))
        # the Q buffer is free once the tile's steps have issued (the core takes the next
        # tile's Q rows then); FINALIZE needs no token
        prog.append(Instr(Op.FINALIZE, {**out, "lse": lse}))
        prog.append(Instr(Op.STORE_O, {**out, "addr": o_addr, **o_strides, "lse": lse}))
    prog.append(Instr(Op.END))
    return prog


def _load_kv(kv: dict, keys: int, kps: int, same: dict, vk: int, k_row: int,
             pop_next: bool = False) -> Instr:
    """A ``LOAD_KV`` of ``keys`` keys from ``kv``'s addresses (contiguous or paged); with V in
    K's rows (``vk``) V has no rows of its own: its address is K's (unread)."""
    kv = {**kv, "v_addr": kv["k_addr"]} if vk else kv
    return Instr(Op.LOAD_KV, {"keys": keys, "d": same["d"], "dv": same["dv"], "v_in_k": vk,
                              "keys_per_step": kps, **kv, "row_stride": k_row,
                              "key_scales": same["key_scales"],
                              "value_scales": same["value_scales"]}, pop_next=pop_next)


def _shared_tile(hw: HardwareConfig, wl: VarlenWorkload, layout: Layout, tile: SharedTile,
                 same: dict, t: int, last: int, rows: tuple[int, int, int, int]) -> list[Instr]:
    """A shared tile's instructions (sim/shared.py): its query rows (``rows`` = the tile's
    query heads, ``heads`` = its sequences, each sequence's heads side by side), the shared
    pages once to all of them, then each sequence's own pages to its rows alone
    (``select``), every part continuing the rows' softmax (``cont``); one key a step. A part
    after the first loads its K/V once the part before it has ended (a compute→load token:
    the ring's credits are then its own). ``rows``: the bytes of a Q, O, K and V row."""
    q_row, o_row, k_row, v_row = rows
    g, n, keys, page = wl.group_size, tile.seqs, tile.keys, wl.page_size
    seg = wl.segments()[tile.first]
    q_at = (seg.batch * wl.heads + tile.hk * g) * wl.seq_q + seg.q0
    geo = {"rows": g, "heads": n, "d": wl.d_qk}
    q_st = {"row_stride": wl.seq_q * q_row, "head_stride": q_row}     # a head; a sequence
    o_st = {"row_stride": wl.seq_q * o_row, "head_stride": o_row}
    prog = [Instr(Op.LOAD_Q, {**geo, "keys_per_step": 1, "addr": layout.q + q_at * q_row,
                              **q_st, "row_scales": same["row_scales"],
                              "sinks": same["sinks"], "alibi": same["alibi"]},
                  pop_next=t > 0, push_next=True)]
    parts = [(tile.first, 0, keys, 0)] + [(tile.first + s, keys, own, 1)
                                          for s, own in enumerate(tile.own) if own]
    vk = int(wl.v_in_k)
    for j, (seq, first, nk, sel) in enumerate(parts):
        kv = _paged_fields(layout, seq, tile.hk, first, page)
        more = j < len(parts) - 1
        prog.append(_load_kv(kv, nk, 1, same, vk, k_row, pop_next=j > 0))
        prog.append(Instr(Op.COMPUTE, {
            **geo, **same, "keys": nk, "keys_per_step": 1, "q_pos": 0, "head_pos": 0,
            "causal": 0, "diag": 0, "window": 0, "win_diag": 0, "cont": int(j > 0),
            "more": int(more), "select": sel, "sel_row": (seq - tile.first) * g * sel},
            pop_prev=j == 0, push_prev=more or t < last))
    out = {"rows": g, "heads": n, "d": wl.d_v}
    prog.append(Instr(Op.FINALIZE, {**out, "lse": same["lse"]}))
    prog.append(Instr(Op.STORE_O, {**out, "addr": layout.o + q_at * o_row, **o_st,
                                   "lse": same["lse"]}))
    return prog
