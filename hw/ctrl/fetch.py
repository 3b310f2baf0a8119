"""ProgramFetch: the program read in bursts from DRAM, assembled, decoded and buffered."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.base.errors import ErrorCode
from attenio.contract.program import INSTR_BITS, INSTR_BYTES, Op
from attenio.contract.timing import TIMING
from attenio.hw.arith import data_reg
from attenio.hw.ctrl.axi import ADDR_BITS, axi4_ports, kept_offered, log2
from attenio.hw.ctrl.decode import InstructionDecoder
from attenio.hw.ctrl.layouts import (
    RH_BITS,
    error_ports,
    fetch_entry_layout,
    raise_error,
    tile_layout,
)
from attenio.hw.streamfifo import StreamFIFO

__all__ = ["ProgramFetch"]

FETCH_CHUNK = TIMING.fetch_chunk
FETCH_BUFFER = TIMING.fetch_buffer


class ProgramFetch(wiring.Component):
    """Reads ``prog_len`` instructions from ``prog_base`` on its own AXI4 read port
    (``ar*``/``r*``) in bursts of ``Timing.fetch_chunk`` instructions (never across 4 KB),
    while the fetch buffer has room for a whole chunk beside those in flight.

    Each assembled instruction is registered with rows·heads; :class:`InstructionDecoder`
    checks it from those registers, each check's result registered with the instruction, and
    their verdict enters the fetch buffer with it (``Timing.decode_latency`` = 2), so ``head``
    (the buffer's oldest entry) carries a stored error code.

    Ports
    -----
    go, stop : a run is on; an error stops it (no new bursts).
    head : stream of ``fetch_entry_layout`` (instruction, error code, rows·heads).
    exhausted : every instruction up to ``prog_len`` was fetched and taken from the buffer.
    idle : no program burst in flight.
    active : a program request or beat this cycle (for the watchdog).
    fail, fail_code : a program beat answered with an error (``AXI_READ``).
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        super().__init__({
            "go": In(1), "stop": In(1), "prog_base": In(64), "prog_len": In(32),
            **axi4_ports("", cfg.axi_data_bytes * 8, write=False),
            "head": Out(stream.Signature(fetch_entry_layout())),
            "exhausted": Out(1), "idle": Out(1), "active": Out(1),
            **error_ports(),
        })

    def elaborate(self, platform):
        m = Module()
        ab = self.cfg.axi_data_bytes
        ipb = INSTR_BYTES // ab                  # AXI beats per instruction
        lib = log2(INSTR_BYTES)
        m.submodules.buffer = ififo = StreamFIFO(fetch_entry_layout(), FETCH_BUFFER)
        f_inflight = Signal(range(FETCH_BUFFER + 1))
        i_out = Signal(range(FETCH_BUFFER + 1))      # instruction bursts in flight
        f_addr = Signal(ADDR_BITS)
        f_n = Signal(range(FETCH_CHUNK + 1))
        # the next burst (address, length, whether one is left) is a register computed from
        # the state of the cycle before; f_ready is low in the cycle after a request and in
        # the engine's first two (Timing.fetch_gap, fetch_delay = 2). The state is the next
        # address and the instructions left, registers moved by each request (no sum of
        # PROG_BASE and an instruction count on the burst's path), loaded from PROG_BASE and
        # PROG_LEN in the engine's first cycle (f_first)
        f_first = Signal(init=1)
        # (the next burst's address and the words left: loaded in the run's first cycle,
        # f_first, before any read of them; off START's reset as the instruction words below)
        f_addr_r = data_reg(ADDR_BITS, "f_addr_r")
        f_left_r = data_reg(32, "f_left_r")
        f_4k = Signal(8)
        f_more = Signal()
        f_ready = Signal()
        m.d.comb += f_4k.eq((4096 - f_addr_r[:12]) >> lib)
        f_n1 = Mux(f_left_r < FETCH_CHUNK, f_left_r, FETCH_CHUNK)
        m.d.sync += [f_addr.eq(f_addr_r), f_n.eq(Mux(f_4k < f_n1, f_4k, f_n1)),
                     f_more.eq(f_left_r != 0)]
        # PROG_BASE must hold whole instructions (a 4 KB line then always falls between two)
        misaligned = Signal()
        m.d.comb += misaligned.eq(self.prog_base[:lib] != 0)
        with m.If(self.go & misaligned):
            raise_error(m, self, ErrorCode.ADDRESS_RANGE)
        f_end = Signal()            # END has been fetched: nothing after it is requested
        want = Signal()
        m.d.comb += [
            want.eq(self.go & ~self.stop & ~misaligned & ~f_end & f_ready & f_more
                    & (ififo.level + f_inflight <= FETCH_BUFFER - FETCH_CHUNK)),
            self.arvalid.eq(kept_offered(m, want, self.arready)),
            self.araddr.eq(f_addr), self.arlen.eq(f_n * ipb - 1),
            self.arsize.eq(log2(ab)), self.arburst.eq(1), self.rready.eq(1),
        ]
        iar = self.arvalid & self.arready
        ir = self.rvalid & self.rready
        # the instruction words (ibuf, raw, insn_e) and their rows·heads are data, each written
        # before its valid bit (push_i, push_d, push_e) lets it be read: off START's reset,
        # 935 flip-flops' LSR in session 18's netlist (issue #47)
        ibuf = data_reg(INSTR_BITS, "ibuf")
        ibeat = Signal(range(ipb))
        assembled = Cat(ibuf[ab * 8:], self.rdata) if ipb > 1 else self.rdata
        push_i = Signal()
        m.d.comb += push_i.eq(ir & (ibeat == ipb - 1))
        with m.If(ir):
            m.d.sync += [ibuf.eq(assembled), ibeat.eq(Mux(ibeat == ipb - 1, 0, ibeat + 1))]
            # beats after END are not the program's: their responses do not matter
            with m.If((self.rresp != 0) & ~f_end):
                raise_error(m, self, ErrorCode.AXI_READ)
        m.d.sync += f_ready.eq(~iar & ~f_first)
        with m.If(f_first):
            m.d.sync += [f_first.eq(0), f_addr_r.eq(self.prog_base), f_left_r.eq(self.prog_len)]
        with m.Elif(iar):
            m.d.sync += [f_addr_r.eq(f_addr + (f_n << lib)), f_left_r.eq(f_left_r - f_n)]
        # an instruction stays in flight until its decode registers write it to the buffer
        push_d, push_e = Signal(), Signal()
        m.d.sync += push_d.eq(push_i)
        m.d.sync += f_inflight.eq(f_inflight + Mux(iar, f_n, 0) - push_e)
        m.d.sync += i_out.eq(i_out + iar - (ir & self.rlast))

        # decode: the assembled instruction and its rows·heads product are registered
        # (Timing.decode_latency); the checks are computed from those registers
        raw = data_reg(INSTR_BITS, "raw")
        rows_heads = data_reg(24, "rows_heads")
        with m.If(push_i & (data.View(tile_layout, assembled).opcode == Op.END)):
            m.d.sync += f_end.eq(1)
        with m.If(push_i):
            a = data.View(tile_layout, assembled)
            m.d.sync += [raw.eq(assembled), rows_heads.eq(a.rows * a.heads)]
        # the checks from those registers are registered with the instruction, and their
        # verdict enters the buffer with it (the checks' carry chains and the verdict with the
        # buffer's write are a cycle each: Timing.decode_latency = 2)
        m.submodules.decode = dec = InstructionDecoder(self.cfg, registered=True)
        m.d.comb += [dec.raw.eq(raw), dec.rows_heads.eq(rows_heads)]
        entry = Signal(fetch_entry_layout())
        insn_e, rh_e = data_reg(INSTR_BITS, "insn_e"), data_reg(RH_BITS, "rh_e")
        m.d.sync += [insn_e.eq(raw), rh_e.eq(rows_heads[:RH_BITS]), push_e.eq(push_d)]
        m.d.comb += [entry.insn.eq(insn_e), entry.bad.eq(dec.bad), entry.rh.eq(rh_e),
                     ififo.i.valid.eq(push_e), ififo.i.payload.eq(entry)]
        wiring.connect(m, ififo.o, wiring.flipped(self.head))
        m.d.comb += [
            self.exhausted.eq(~f_first & (f_left_r == 0) & (f_inflight == 0)
                              & (ififo.level == 0)),
            self.idle.eq((i_out == 0) & ~self.arvalid),
            self.active.eq(iar | ir),
        ]
        return m

