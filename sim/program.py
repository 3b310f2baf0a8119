"""Program emission: the instruction stream of a tiling (contract/isa.py, docs/isa.md), its
tiles enumerated once so the program's length is counted before any address is known."""

from __future__ import annotations

from attenio.config import HardwareConfig, Workload
from attenio.contract.program import Instr, Op
from attenio.model import io_analysis as io
from attenio.model.numerics import ScaleParams
from attenio.sim.layout import Layout

__all__ = ["build_program", "program_tiles", "program_length"]


def _keys_per_step(hw: HardwareConfig, rows: int, dataflow_b: int, ring_limit: int) -> int:
    if rows >= hw.mac_lines:
        return min(dataflow_b, ring_limit)
    return io.keys_per_step(hw.mac_lines, rows, min(ring_limit, hw.max_keys_per_step))


def program_tiles(wl: Workload, tiling: io.Tiling) -> list[tuple[int, int, int, int, int, int]]:
    """The tiles of ``wl`` under ``tiling`` in program order: (batch, K/V head, first query
    head, first query position, rows, keys) each."""
    causal = io.causal_mask(wl)      # a mask that hides nothing (decode) is not applied
    tiles = []
    for b in range(wl.batch):
        for hk in range(wl.kv_heads):
            for h0 in range(hk * wl.group_size, (hk + 1) * wl.group_size,
                            tiling.heads_per_tile):
                for p0, rows in io.query_tiles(wl.seq_q, tiling.positions, causal):
                    keys = io.tile_keys(p0, rows, wl.seq_q, wl.seq_k, causal, tiling.kv_block)
                    tiles.append((b, hk, h0, p0, rows, keys))
    return tiles


def program_length(tiles) -> int:
    """Instructions of the program of ``tiles`` (:func:`program_tiles`): five a tile, four for
    a tile with no keys (no ``LOAD_KV``), and ``END``. Counted before emission, so the layout
    that follows the program is known first."""
    return sum(5 if keys > 0 else 4 for *_, keys in tiles) + 1


def build_program(hw: HardwareConfig, wl: Workload, tiling: io.Tiling, layout: Layout,
                  scale: ScaleParams, tiles=None) -> list[Instr]:
    """The instruction stream for ``wl`` under ``tiling`` (attenio, fa2, fa2-uncapped).

    Per tile: ``LOAD_Q, LOAD_KV, COMPUTE, FINALIZE, STORE_O`` with tokens load→compute (Q
    ready, pushed by ``LOAD_Q``) and compute→load (Q buffer free, pushed by ``COMPUTE`` once
    the tile's last step has issued: the next tile's Q rows load while this one's output is
    finalized and stored, the third overlap level);
    ``LOAD_KV`` feeds ``COMPUTE`` and ``FINALIZE`` feeds ``STORE_O`` through streams, paired in
    program order. One ``END`` closes the program. Program length is ``5·tiles + 1``
    instructions, O(N/a) per head.
    """
    eb, ob = hw.element_bytes, hw.out_element_bytes
    d = wl.head_dim
    dp = hw.row_elements(d)      # a row's pitch in DRAM: whole words (Layout.packed)
    rs = int(scale.per_row)
    dq = hw.q_row_elements(d, bool(rs))      # a Q row's pitch: with its multiplier's word
    c_m, c_sh = (0, 0) if rs else (scale.c_m, scale.c_sh)
    ks = int(scale.k_m is not None)
    dk = hw.k_row_elements(d, bool(ks))     # a K row's pitch: with its factor's word
    g = tiling.heads_per_tile
    attenio_flow = tiling.dataflow == "attenio"
    causal = io.causal_mask(wl)      # a mask that hides nothing (decode) is not applied
    ring = hw.ring_rows if attenio_flow else tiling.keys_per_step
    tiles = program_tiles(wl, tiling) if tiles is None else tiles
    prog: list[Instr] = []
    last = len(tiles) - 1
    for t, (b, hk, h0, p0, rows, keys) in enumerate(tiles):
        kps = (_keys_per_step(hw, rows * g, 1, ring) if attenio_flow and not tiling.fixed_b
               else tiling.keys_per_step)
        q_addr = layout.q + ((b * wl.heads + h0) * wl.seq_q + p0) * dq * eb
        o_addr = layout.o + ((b * wl.heads + h0) * wl.seq_q + p0) * dp * ob
        kv_off = (b * wl.kv_heads + hk) * wl.seq_k * eb
        common = {"rows": rows, "heads": g, "d": d}
        prog.append(Instr(Op.LOAD_Q, {**common, "keys_per_step": kps, "addr": q_addr,
                                      "row_stride": dq * eb,
                                      "head_stride": wl.seq_q * dq * eb, "row_scales": rs},
                          pop_next=t > 0, push_next=True))
        if keys > 0:
            prog.append(Instr(Op.LOAD_KV, {"keys": keys, "d": d, "keys_per_step": kps,
                                           "k_addr": layout.k + kv_off * dk,
                                           "v_addr": layout.v + kv_off * dp,
                                           "row_stride": dk * eb,
                                           "key_scales": ks}))
        prog.append(Instr(Op.COMPUTE, {**common, "causal": int(causal), "keys": keys,
                                       "keys_per_step": kps, "q_pos": p0,
                                       "diag": wl.seq_k - wl.seq_q, "c_m": c_m,
                                       "c_sh": c_sh, "row_scales": rs, "key_scales": ks},
                          pop_prev=True, push_prev=t < last))
        # the Q buffer is free once the tile's steps have issued (the core takes the next
        # tile's Q rows then); FINALIZE needs no token
        prog.append(Instr(Op.FINALIZE, dict(common)))
        prog.append(Instr(Op.STORE_O, {**common, "addr": o_addr, "row_stride": dp * ob,
                                       "head_stride": wl.seq_q * dp * ob}))
    prog.append(Instr(Op.END))
    return prog
