"""The finalize stage of the compute core: once a tile's steps are done, its O words are read row
by row (and, with ``lse``, each row's statistics word after them) through :class:`Finalize`
(``O / ℓ`` with one reciprocal per row) into the output FIFO, one word a cycle, never more in
flight than the FIFO can take."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.timing import TIMING
from attenio.hw.arith import data_reg, kept_copies
from attenio.hw.finalize import Finalize, out_word_layout
from attenio.hw.layouts import cmd_layout
from attenio.hw.pv_stage import acc_word_layout
from attenio.hw.sequencer import COUNTER_BITS
from attenio.hw.softmax_stage import ml_layout
from attenio.hw.streamfifo import StreamFIFO

__all__ = ["FinalizeStage", "FIN_READ_LATENCY", "FIFO_LATENCY"]

OUT_FIFO_DEPTH = TIMING.out_fifo_depth
# cycles from the step sequencer's end to the first finalize read of O: the last P V write
# (c4) is then done
PV_DRAIN = TIMING.pv_drain
# the finalize issue (c0) reads O and ℓ (c1), registers every bank's word beside its RAM (c2),
# then the selected row's (c3): the lane select is a register's fan-in, not a RAM's long net
FIN_READ_LATENCY = 3
FIFO_LATENCY = 2     # SyncFIFOBuffered: written in cycle t, readable in t + 2
FIN_LANE_SLICES = 4  # registers of the lane select, a slice of the O word each


class FinalizeStage(wiring.Component):
    """The tile's O (and statistics) → the output stream.

    Ports
    -----
    running, steps_left, words, cmd : the tile runs, steps are left, its words a row and its
        command (rows, keys, ``lse``).
    active : finalize owns the O and m/ℓ read ports (from ``PV_DRAIN`` cycles after the last
        step); ``o_addr`` and ``ml_addr`` are then its reads. ``active_next``,
        ``o_addr_next`` and ``ml_addr_next``: their values in the next cycle (the core's
        per-bank address registers load them a cycle ahead).
    o_data, ml_data : the banks' words (a bank per line: row ρ in bank ρ mod p).
    issue : a word was issued this cycle; ``all_issued``: every word of the tile was.
    drained : nothing is in flight (the Finalize pipeline, its registers, the FIFO).
    o : the output words (``q`` outputs of ``out_bits``), the tile's rows row-major.
    clear : the tile's end: back to the first row.
    fin_busy : cycles a word was issued (cumulative).

    Latency: ``FIN_READ_LATENCY + Finalize.LATENCY + FIFO_LATENCY`` from the issue to the
    word at the FIFO's head.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        p, gmax, wmax = cfg.mac_lines, cfg.row_groups, cfg.words_per_row
        super().__init__({
            "running": In(1), "steps_left": In(1), "words": In(range(wmax + 1)),
            "cmd": In(cmd_layout(cfg)), "clear": In(1),
            "active": Out(1), "ml_addr": Out(range(gmax + 1)),
            "ml_addr_next": Out(range(gmax + 1)),
            "o_addr": Out(range(gmax * wmax + 1)),
            "active_next": Out(1), "o_addr_next": Out(range(gmax * wmax + 1)),
            "o_data": In(data.ArrayLayout(acc_word_layout(cfg), p)),
            "ml_data": In(data.ArrayLayout(ml_layout(cfg), p)),
            "issue": Out(1), "all_issued": Out(1), "drained": Out(1),
            "o": Out(stream.Signature(out_word_layout(cfg))),
            "fin_busy": Out(COUNTER_BITS),
        })
        # the issue's row and word, the words issued and not yet taken from the FIFO (in the
        # pipeline or the FIFO) and the drain count (for the core's debug view)
        self.frow = Signal(range(cfg.tile_rows + 1), name="frow")
        self.fw = Signal(range(wmax + 1), name="fw")
        self.held = Signal(range(OUT_FIFO_DEPTH + 2), name="fin_held")
        self.drain = Signal(range(PV_DRAIN + 1), name="drain")

    def elaborate(self, platform):
        m = Module()
        cfg, p, wmax = self.cfg, self.cfg.mac_lines, self.cfg.words_per_row
        lp = p.bit_length() - 1
        c = self.cmd
        m.submodules.fin = fin = Finalize(cfg)
        m.submodules.ofifo = ofifo = StreamFIFO(out_word_layout(cfg), OUT_FIFO_DEPTH)
        frow, fw, held, drain = self.frow, self.fw, self.held, self.drain
        f_raw = Signal()    # the word issued is the row's statistics (lse): after its O words
        m.d.comb += f_raw.eq(fw == self.words)
        # a row's last word (its statistics word with lse) and the tile's last row: registers
        # of the command's fields (steady for the tile; finalize issues many cycles after the
        # command), so no adder sits before the compares on the issue's path to the next O
        # address (a board build's worst path, session 19: words + lse → the last-word compare
        # → the next row → the O banks' read-address registers)
        f_last_w = data_reg(range(-1, wmax + 2), "fin_last_w")
        f_last_row = data_reg(range(-1, cfg.tile_rows + 1), "fin_last_row")
        m.d.sync += [f_last_w.eq(self.words + c.lse - 1), f_last_row.eq(c.rows - 1)]
        f_all = self.all_issued
        no_keys = Signal()
        m.d.comb += no_keys.eq(c.keys == 0)
        # finalize owns the O and m/ℓ read ports from pv_drain cycles after the last step: a
        # register (the ports' address muxes select by it, off the sequencer's state), set
        # the cycle the drain count reaches pv_drain and cleared with the tile
        ready = Signal()
        m.d.comb += self.active_next.eq(self.running & ~self.steps_left
                                        & (drain >= PV_DRAIN - 1) & ~self.clear)
        m.d.sync += ready.eq(self.active_next)
        with m.If(self.running & ~self.steps_left & (drain != PV_DRAIN)):
            m.d.sync += drain.eq(drain + 1)
        # room for one more word: the words held (in flight or in the FIFO: + an issue, − a
        # word taken from the FIFO) below the depth, a register (``room``) of the count a
        # cycle ahead, so the issue enables see no adder
        # and compare (the board build's worst path, session 19: the FIFO's level → the room
        # compare → the issue → the next row → the O banks' read address)
        room = Signal(init=1, name="fin_room")
        taken = Signal()
        m.d.comb += taken.eq(self.o.valid & self.o.ready)
        held_n = held + self.issue - taken
        m.d.sync += [held.eq(held_n), room.eq(held_n < OUT_FIFO_DEPTH)]
        m.d.comb += [
            self.active.eq(ready),
            self.ml_addr.eq(frow >> lp),
            self.issue.eq(ready & ~f_all & room),
        ]
        # the issue's row and word in the next cycle, and so its O address a cycle ahead
        fw_n, frow_n = Signal.like(fw), Signal.like(frow)
        m.d.comb += [fw_n.eq(fw), frow_n.eq(frow)]
        with m.If(self.clear):
            m.d.comb += [fw_n.eq(0), frow_n.eq(0)]
        with m.Elif(self.issue):
            with m.If(fw == f_last_w):
                m.d.comb += [fw_n.eq(0), frow_n.eq(frow + 1)]
            with m.Else():
                m.d.comb += fw_n.eq(fw + 1)
        m.d.sync += [fw.eq(fw_n), frow.eq(frow_n)]
        m.d.comb += self.ml_addr_next.eq(frow_n >> lp)
        def o_address(row, word, raw):
            """A row's word in the banks (row ρ in bank ρ mod p); its statistics word
            (``raw``, after its O words) reads the row's first O word."""
            return (row >> lp) * wmax + Mux(raw, 0, word)

        m.d.comb += [self.o_addr.eq(o_address(frow, fw, f_raw)),
                     self.o_addr_next.eq(o_address(frow_n, fw_n, fw_n == self.words))]
        with m.If(self.issue):
            m.d.sync += self.fin_busy.eq(self.fin_busy + 1)
            with m.If((fw == f_last_w) & (frow == f_last_row)):
                m.d.sync += f_all.eq(1)
        # c1: the banks' words; c2: each bank's registered (placed beside its RAM); c3: the
        # selected row's, registered before the finalize unit
        # (the valid bits fv… are reset; the words, their lane and kind are data, off START's
        # reset: ``reset_less``, issue #47, each written before it is read)
        f_lane1 = data_reg(range(p))
        fv1, fv2 = Signal(), Signal()
        fraw1, fraw2 = data_reg(1), data_reg(1)
        m.d.sync += [fv1.eq(self.issue), fraw1.eq(f_raw), f_lane1.eq(frow[:lp] if lp else 0),
                     fv2.eq(fv1), fraw2.eq(fraw1)]
        o_reg = data_reg(data.ArrayLayout(acc_word_layout(cfg), p))
        ml_reg = data_reg(data.ArrayLayout(ml_layout(cfg), p))
        m.d.sync += [o_reg.eq(self.o_data), ml_reg.eq(self.ml_data)]
        sel_o = Signal(acc_word_layout(cfg))
        sel_l = Signal(cfg.row_sum_bits)
        sel_m = Signal(signed(cfg.max_bits + 1))
        # the lane select, a register a slice of the O word (and one for m, ℓ), loaded with
        # the word's issue (read the cycle after, c2): one register drove 776 LUT inputs a
        # bit on the fpga preset (session 18's netlist, scripts/fanout.py); a bit of the
        # slice's data keeps the copies apart (kept_copies)
        width = len(sel_o.as_value())
        cuts = [width * k // FIN_LANE_SLICES for k in range(FIN_LANE_SLICES + 1)]
        lanes = kept_copies(m, f_lane1, fv1, [o_reg[0].as_value()[lo] for lo in cuts[:-1]]
                            + [ml_reg[0].as_value()[0]], "f_lane", reset_less=True)
        for k, (lo, hi) in enumerate(zip(cuts, cuts[1:], strict=False)):
            with m.Switch(lanes[k]):
                for i in range(p):
                    with m.Case(i):
                        m.d.comb += sel_o.as_value()[lo:hi].eq(o_reg[i].as_value()[lo:hi])
        with m.Switch(lanes[-1]):
            for i in range(p):
                with m.Case(i):
                    m.d.comb += [sel_l.eq(ml_reg[i].l), sel_m.eq(ml_reg[i].m)]
        # the selected row's O word and ℓ are registered before the finalize unit (with lse,
        # then its statistics: a row that saw no key reports m_init, model.numerics.row_stats)
        fv3 = Signal()
        fin_in = Signal.like(fin.i.payload, name="fin_in", reset_less=True)
        empty = no_keys | (sel_l == 0)
        m.d.sync += [fv3.eq(fv2), fin_in.o.eq(sel_o),
                     fin_in.l.eq(Mux(no_keys, 0, sel_l)), fin_in.raw.eq(fraw2),
                     fin_in.m.eq(Mux(empty, -(1 << cfg.max_bits), sel_m))]
        m.d.comb += [fin.i.valid.eq(fv3), fin.i.payload.eq(fin_in)]
        # the finalize unit never waits: its words fit the FIFO by the issue rule above
        m.d.comb += [ofifo.i.valid.eq(fin.o.valid), ofifo.i.payload.eq(fin.o.payload)]
        wiring.connect(m, ofifo.o, wiring.flipped(self.o))
        # (the FIFO's level, not its output's valid: a word just written counts at once, where
        # its valid follows a cycle later; with valid the core ended a cycle early, the tile's
        # last word still in the FIFO, whenever it entered an empty one)
        # (``held`` counts both: the words in flight and those in the FIFO)
        m.d.comb += self.drained.eq((held == 0) & ~fv1 & ~fv2 & ~fv3)
        with m.If(self.clear):
            m.d.sync += [f_all.eq(0), drain.eq(0)]
        return m
