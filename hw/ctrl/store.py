"""StoreEngine: the store queue's ``STORE_O`` as AXI4 write bursts of the core's output words."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, Value
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.base.errors import ErrorCode
from attenio.contract.program import INSTR_BITS, Op
from attenio.contract.timing import TIMING
from attenio.hw.arith import data_reg
from attenio.hw.ctrl.axi import ADDR_BITS, axi4_ports, held_while_waiting, log2
from attenio.hw.ctrl.bursts import BurstRegs, BurstSplitter, drive_address, prepared_transfer
from attenio.hw.ctrl.dispatch import engine_ports, prepared_head
from attenio.hw.ctrl.layouts import raise_error, view
from attenio.hw.finalize import out_word_layout
from attenio.hw.streamfifo import StreamFIFO

__all__ = ["StoreEngine"]

MAX_OUTSTANDING = TIMING.max_outstanding


def sext(v, bits):
    """A signed value sign-extended (or truncated) to ``bits`` bits."""
    v = Value.cast(v)
    return v[:bits] if len(v) >= bits else Cat(v, v[-1].replicate(bits - len(v)))


class StoreEngine(wiring.Component):
    """Runs the store queue: each ``STORE_O`` writes a tile's output rows (per head; one burst
    sequence per head when rows are contiguous, else per row) from the core's output stream.
    An output word of ``q`` elements is ``⌈q·out bytes / beat⌉`` beats; the first burst of an
    instruction waits for the first word. After an error the W bursts already requested are
    completed with strobes 0. The instruction ends (its pushes go out) when every response of
    its bursts is back.

    Ports
    -----
    queue : :func:`queue_signature` (``In``).
    aw*, w*, b* : the data AXI4 write channels.
    o : the core's output words.
    win_base, win_size : the address window.
    fail, fail_code : ``TOKEN_UNDERFLOW``, ``ADDRESS_RANGE`` or ``AXI_WRITE``.
    idle : no write burst in flight or waiting for data. ended : the queue reached ``END``.
    request, beat, response : AW, W and B handshakes. kept : a W beat with its strobes set.
    started : an instruction started.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        super().__init__({
            **engine_ports(),
            **axi4_ports("", cfg.axi_data_bytes * 8, read=False),
            "o": In(stream.Signature(out_word_layout(cfg))),
            "win_base": In(64), "win_size": In(64),
            "idle": Out(1), "request": Out(1), "beat": Out(1),
            "response": Out(1), "kept": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ab = cfg.axi_data_bytes
        lab = log2(ab)
        q = cfg.macs_per_line
        ob = cfg.out_element_bytes
        k_out = q * ob // ab                     # AXI beats per output word

        def fail(code):
            raise_error(m, self, code)

        def words_of(d):
            return (d + (q - 1)) >> log2(q)

        shead = self.queue.head.payload
        sop = view(shead.insn).opcode
        # (the instruction and the head's base are data, loaded with the start and read only
        # while busy; the next row's and head's bases are registers of them each cycle: off
        # START's reset, issue #47)
        sraw = data_reg(INSTR_BITS, "sraw")
        s_busy = Signal()
        s_wait = Signal()
        store_end = Signal()
        s_ok, s_under = self.queue.ok, self.queue.under
        s_start = Signal()
        s_pop_end = Signal()
        m.submodules.bursts = splitter = BurstSplitter(ab)
        m.d.comb += [splitter.win_base.eq(self.win_base), splitter.win_size.eq(self.win_size)]
        sb = BurstRegs(m, splitter, "st")
        s_h = Signal(8)
        s_hbase = data_reg(ADDR_BITS, "s_hbase")
        s_trow = Signal(16)
        s_contig = Signal()
        wr_out = Signal(range(MAX_OUTSTANDING + 1))
        s_out = Signal(range(MAX_OUTSTANDING + 1))   # this instruction's bursts in flight
        s_prep = prepared_head(m, self.queue, "st")
        with m.If(self.queue.head.valid & ~s_busy & ~store_end & self.go & ~self.stop):
            with m.If(sop == int(Op.END)):
                m.d.comb += s_pop_end.eq(1)
                m.d.sync += store_end.eq(1)
            with m.Elif(s_ok):
                m.d.comb += s_start.eq(s_prep)
            with m.Elif(s_under):
                fail(ErrorCode.TOKEN_UNDERFLOW)
        m.d.comb += self.queue.start.eq(s_start)
        m.d.comb += self.queue.head.ready.eq(s_pop_end | s_start)
        # the head's beats, prepared in two stages (a row's words: its O, and with lse its
        # statistics word; all rows at once when they are contiguous)
        sv = view(shead.insn, Op.STORE_O)
        wd_shead = (words_of(sv.d) + sv.lse) * k_out
        beats2, contig2, _ = prepared_transfer(m, wd_shead, sv.rows, sv.row_stride, lab, "st")
        with m.If(s_start):
            m.d.sync += [sraw.eq(shead.insn), s_busy.eq(1), s_wait.eq(0), s_h.eq(0),
                         s_hbase.eq(sv.addr), sb.base.eq(sv.addr), sb.off.eq(0), s_trow.eq(0),
                         s_contig.eq(contig2), sb.beats.eq(beats2)]
        # the beats of each requested burst, in order (W follows AW)
        m.submodules.wq = wq = StreamFIFO(9, MAX_OUTSTANDING)
        s_want = Signal()
        s_first = Signal()   # the instruction's first burst: it waits for the first output word
        with m.If(s_start):
            m.d.sync += s_first.eq(1)
        # room for a burst: wr_out < MAX_OUTSTANDING, a register moved with wr_out (off the
        # request's path). The W queue's room follows: it holds a burst from its AW to its
        # last W beat, and wr_out counts the burst until its response, which AXI4 sends
        # only after that beat (a slave waits for WLAST before BVALID), so the queue holds
        # at most wr_out bursts
        wr_room = Signal(init=1)
        m.d.comb += s_want.eq(s_busy & sb.ready & ~s_wait & ~self.stop & wr_room
                              & (~s_first | self.o.valid))
        with m.If(splitter.window_fail):
            fail(ErrorCode.ADDRESS_RANGE)
        aw = drive_address(m, splitter, {k: getattr(self, f"aw{k}") for k in
                                         ("valid", "ready", "addr", "len", "size", "burst")},
                           s_want)
        m.d.comb += sb.moved.eq(s_start | aw)
        with m.If(aw):
            m.d.sync += s_first.eq(0)
        # what follows the current row, as registers (the state moves only with a request)
        s_row_last, s_head_last = Signal(), Signal()
        s_rowbase, s_nhbase = data_reg(ADDR_BITS, "s_rowbase"), data_reg(ADDR_BITS, "s_nhbase")
        m.d.sync += [
            s_row_last.eq(s_trow == view(sraw, Op.STORE_O).rows - 1),
            s_head_last.eq(s_h == view(sraw, Op.STORE_O).heads - 1),
            s_rowbase.eq(sb.base + view(sraw, Op.STORE_O).row_stride),
            s_nhbase.eq(s_hbase + view(sraw, Op.STORE_O).head_stride),
        ]
        s_unit_done = sb.last & (s_contig | s_row_last)
        with m.If(aw):
            m.d.sync += sb.off.eq(sb.off + sb.len)
            with m.If(sb.last):
                m.d.sync += sb.off.eq(0)
                with m.If(s_unit_done & s_head_last):
                    m.d.sync += s_wait.eq(1)
                with m.Elif(~s_unit_done):
                    m.d.sync += [s_trow.eq(s_trow + 1), sb.base.eq(s_rowbase)]
                with m.Else():
                    m.d.sync += [s_h.eq(s_h + 1), s_hbase.eq(s_nhbase), sb.base.eq(s_nhbase),
                                 s_trow.eq(0)]
        m.d.comb += [wq.i.valid.eq(aw), wq.i.payload.eq(sb.len)]
        # W: output words cut into beats
        wcnt = Signal(9)
        part = Signal(range(max(2, k_out)))
        packed = Cat(*[sext(self.o.payload[i], ob * 8) for i in range(q)])
        w_ok = Signal()
        m.d.comb += w_ok.eq(wq.o.valid & (self.stop | self.o.valid))
        # after an error the bursts already requested are completed with strobes 0; a beat
        # already offered keeps the strobes and data it was offered with (the core's output
        # may change under a waiting beat after an error: found by verify/formal.py)
        data_now = Signal(ab * 8)
        with m.Switch(part):
            for j in range(k_out):
                with m.Case(j):
                    m.d.comb += data_now.eq(packed[j * ab * 8:(j + 1) * ab * 8])
        payload = held_while_waiting(m, self.wvalid, self.wready,
                                     Cat(Mux(self.stop, 0, (1 << ab) - 1), data_now))
        strb = payload[:ab]
        wlast = wcnt == wq.o.payload - 1
        m.d.comb += [
            self.wvalid.eq(w_ok), self.wlast.eq(wlast),
            self.wstrb.eq(strb), self.wdata.eq(payload[ab:]),
        ]
        w = self.wvalid & self.wready
        m.d.comb += self.o.ready.eq(w & ~self.stop & (part == k_out - 1))
        with m.If(w):
            m.d.sync += [wcnt.eq(Mux(wlast, 0, wcnt + 1)),
                         part.eq(Mux(part == k_out - 1, 0, part + 1))]
        m.d.comb += wq.o.ready.eq(w & wlast)
        b = self.bvalid & self.bready
        m.d.comb += self.bready.eq(1)
        with m.If(b & (self.bresp != 0)):
            fail(ErrorCode.AXI_WRITE)
        m.d.sync += [wr_out.eq(wr_out + aw - b), s_out.eq(s_out + aw - b),
                     wr_room.eq(wr_out + aw - b < MAX_OUTSTANDING)]
        s_end = Signal()
        m.d.comb += s_end.eq(s_busy & s_wait & (s_out == 0))
        with m.If(s_end):
            m.d.sync += s_busy.eq(0)
        done = view(sraw)
        m.d.comb += self.queue.push_prev.eq(s_end & ~self.stop & done.push_prev)
        m.d.comb += self.queue.quiet.eq(store_end)

        # ---- end of run, drain, watchdog ----


        m.d.comb += [self.idle.eq((wr_out == 0) & ~wq.o.valid & ~self.awvalid),
                     self.ended.eq(store_end),
                     self.request.eq(aw), self.beat.eq(w), self.response.eq(b),
                     self.kept.eq(w & (strb != 0)), self.started.eq(s_start)]
        return m
