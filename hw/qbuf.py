"""QBuffer: the tile's Q rows, loaded from the Q stream into one bank per MAC line."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.hw.arith import memory_banks, table_ram
from attenio.hw.layouts import q_side_layout, q_side_words, qcmd_layout, word_layout

__all__ = ["QBuffer"]


def _log2(x: int) -> int:
    return x.bit_length() - 1


class QBuffer(wiring.Component):
    """The Q loader and the Q buffer (``p = mac_lines`` banks of ``⌈tile_rows/p⌉·⌈d/q⌉``
    words).

    ``qcmd`` (rows, d, log2 keys per step) is taken when no tile's rows are loading or loaded
    and the buffer is not read: the core is idle (``core_busy`` low) or its tile's steps are
    all issued (``q_free``: the last ``Q Kᵀ`` read is past, so the next tile's rows load while
    this one's output is finalized and stored; ``qcmd.ready`` is a register, a cycle behind
    these); the ``q`` stream then carries the rows,
    ``⌈d/q⌉`` words each, lanes past d stored as 0. With one key per step, row ρ goes to bank
    ρ mod p at word (ρ div p)·⌈max_head_dim/q⌉ + w; with b = 2**k keys per step (one row
    group) row ρ is copied into the b banks ρ·b … ρ·b + b − 1 that take its b keys.
    ``loaded`` rises after the last word and stays until ``clear`` (the tile that uses the rows
    starts).

    With ``row_scales`` each row is followed by one more word, its multiplier
    (``row_scale_layout`` in the low bits), kept in a small table of the same banking (row ρ
    in bank ρ mod p at entry ρ div p, or copied like the row with b keys per step). With
    ``sinks`` (``sinks_unit``) or ``alibi`` (``alibi_unit``) by its side words
    (``cfg.q_side_words``: as many as hold ``side_word_bits``; all but the last are held,
    shifted in from the top), the table's entry their low bits (``q_side_layout``: the
    multiplier, the sink's start of the softmax, the ALiBi slope and the row's position).

    ``rd_addr`` reads word ``rd_addr`` of every bank: ``rd_data[i]`` the cycle after.
    ``sc_addr`` reads entry ``sc_addr`` (a row group) of the multiplier table: ``sc_data[i]``
    the cycle after (0 in a config whose word cannot hold a multiplier).
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        p = cfg.mac_lines
        self.wmax = cfg.words_per_row
        self.groups = cfg.row_groups
        self.depth = self.groups * self.wmax
        super().__init__({
            "qcmd": In(stream.Signature(qcmd_layout(cfg))),
            "q": In(stream.Signature(word_layout(cfg))),
            "core_busy": In(1), "q_free": In(1), "cmd_taken": In(1), "clear": In(1),
            "loaded": Out(1),
            "rd_addr": In(range(self.depth + 1)),
            "rd_data": Out(data.ArrayLayout(word_layout(cfg), p)),
            "sc_addr": In(range(self.groups + 1)),
            "sc_data": Out(data.ArrayLayout(q_side_layout(cfg), p)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        p, q = cfg.mac_lines, cfg.macs_per_line
        lp, lq = _log2(p), _log2(q)
        wmax = self.wmax
        lkmax = _log2(cfg.max_keys_per_step)
        q_rd, q_wr = memory_banks(m, "qbuf", word_layout(cfg), self.depth, p)
        for i in range(p):
            m.d.comb += [q_rd[i].addr.eq(self.rd_addr), self.rd_data[i].eq(q_rd[i].data)]
        scales = cfg.row_scales_supported
        if scales:
            s_rd, s_wr = memory_banks(m, "qscale", q_side_layout(cfg), self.groups, p,
                                      style=table_ram(cfg))
            for i in range(p):
                m.d.comb += [s_rd[i].addr.eq(self.sc_addr), self.sc_data[i].eq(s_rd[i].data)]

        qrow = Signal(range(cfg.tile_rows + 1))
        qw = Signal(range(wmax + 1))
        q_loading = Signal()
        q_done = self.loaded
        qc = Signal(qcmd_layout(cfg))
        side = cfg.q_side_words(True, cfg.sinks_unit or cfg.alibi_unit)
        q_words = Signal(range(wmax + side + 1))      # with row_scales, the side words
        qblog = Signal(range(lkmax + 1))
        m.d.comb += qblog.eq(qc.kps_log2)
        # ready is a register (off the path into the load engine's start and its queue's
        # pop): the buffer's state a cycle ago, low after a command is taken or a tile's
        # command is (``cmd_taken``: its rows are loading or loaded then, or it is a part of a
        # tile that holds them). It rises a cycle late as the steps end, the cycle the
        # COMPUTE's token that a LOAD_Q waits for reaches the load queue (docs/architecture.md,
        # the timing model's LOAD_Q).
        ready = Signal(init=1)
        m.d.sync += ready.eq((~self.core_busy | self.q_free) & ~q_loading & ~q_done
                             & ~(self.qcmd.valid & self.qcmd.ready) & ~self.cmd_taken)
        m.d.comb += self.qcmd.ready.eq(ready)
        with m.If(self.qcmd.valid & self.qcmd.ready):
            pl = self.qcmd.payload
            m.d.sync += [qc.eq(pl), q_loading.eq(1), qrow.eq(0), qw.eq(0),
                         q_words.eq(((pl.d + (q - 1)) >> lq)
                                    + (q_side_words(cfg, pl) if scales else 0))]
        # the row's last words are its side words (row_scales; its sink or ALiBi slope with
        # sinks or alibi): those before the last are held, shifted in from the top, and the
        # table's entry written with the last
        sc_word, side_word = Signal(), Signal()
        sides = q_side_words(cfg, qc) if scales else 0
        m.d.comb += [sc_word.eq(qc.row_scales & (qw == q_words - 1) if scales else 0),
                     side_word.eq(qc.row_scales & (qw >= q_words - sides) if scales else 0)]
        entry = Value.cast(self.q.payload)
        if side > 1:
            wb = len(entry)
            held = Signal(wb * (side - 1), name="q_side_lo")
            with m.If(self.q.valid & self.q.ready & side_word & ~sc_word):
                m.d.sync += held.eq(Cat(held[wb:], self.q.payload) if side > 2
                                    else self.q.payload)
            full = qc.sinks | qc.alibi
            entry = Mux(full, Cat(held, self.q.payload), self.q.payload)
        take = Signal()
        m.d.comb += take.eq(self.q.valid & self.q.ready)
        m.d.comb += self.q.ready.eq(q_loading)

        def q_lane_mask(word_idx, lane):
            return (word_idx << lq) + lane < qc.d

        for i in range(p):
            # b = 1: row ρ lives in bank ρ mod p; b > 1 (one row group): row ρ is copied into
            # the b lines ρ·b … ρ·b+b−1 that take its b keys of a step
            mine = Mux(qblog == 0, (qrow[:lp] == i) if lp else 1, (i >> qblog) == qrow)
            m.d.comb += [
                q_wr[i].addr.eq((qrow >> lp) * wmax + qw),
                q_wr[i].en.eq(take & mine & ~side_word),
            ]
            if scales:
                m.d.comb += [s_wr[i].addr.eq(qrow >> lp), s_wr[i].en.eq(take & mine & sc_word),
                             s_wr[i].data.eq(entry[:q_side_layout(cfg).size])]
            for lane in range(q):
                m.d.comb += q_wr[i].data[lane].eq(
                    Mux(q_lane_mask(qw, lane), self.q.payload[lane], 0))
        with m.If(self.q.valid & self.q.ready):
            with m.If(qw == q_words - 1):
                m.d.sync += qw.eq(0)
                m.d.sync += qrow.eq(qrow + 1)
                with m.If(qrow == qc.rows - 1):
                    m.d.sync += [q_done.eq(1), q_loading.eq(0)]
            with m.Else():
                m.d.sync += qw.eq(qw + 1)
        with m.If(self.clear):
            m.d.sync += q_done.eq(0)
        return m
