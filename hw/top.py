"""AttenIOTop: the whole accelerator. AXI4-Lite registers, program fetch, dispatch into three
queues with dependency tokens, AXI4 DMA for Q, K/V and O, and the compute core.

docs/architecture.md draws the blocks, docs/isa.md defines what the controller runs and
docs/registers.md the register map; the cycle rules here are the ones ``sim/schedule.py``
models. Ports (flat, vendor-shell names):

* ``s_axil_*``: AXI4-Lite subordinate, 12-bit addresses, 32-bit data (hw/csr.py).
* ``m_axi_*``: AXI4 manager for data: AR/R (Q, K, V) and AW/W/B (O); INCR bursts of up to 256
  beats that never cross 4 KB, at most ``MAX_OUTSTANDING`` bursts in flight per direction, one
  ID (responses in order).
* ``m_axi_insn_ar*``, ``m_axi_insn_r*``: AXI4 manager, read only, for the program.
* ``irq``: level, ``IRQ_STATUS & IRQ_ENABLE``.

A run starts when ``CTRL.START`` is written while idle (the engines are reset that cycle) and
ends when every queue has reached ``END`` and every response is back, or after an error (the
first one is kept in ``STATUS.ERROR``) once every transaction in flight has drained. A watchdog
ends a run that makes no progress for ``2**WATCHDOG_BITS`` cycles with ``TIMEOUT``.
"""

from __future__ import annotations

from amaranth import Cat, Const, Elaboratable, Module, ResetInserter, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.base.errors import ErrorCode, bad
from attenio.contract.program import INSTR_BYTES
from attenio.hw.arith import data_reg
from attenio.hw.core import CORE_STAGES, ComputeCore
from attenio.hw.csr import CsrBank, axi4lite_signature
from attenio.hw.ctrl.axi import axi4_ports
from attenio.hw.ctrl.dispatch import Dispatch
from attenio.hw.ctrl.fetch import ProgramFetch
from attenio.hw.ctrl.issue import ComputeIssue
from attenio.hw.ctrl.load import LoadEngine
from attenio.hw.ctrl.store import StoreEngine
from attenio.hw.ctrl.watchdog import DmaCounters, Watchdog

CORE_COUNTERS = ("PE_BUSY", "PE_WAIT_KV", "PE_WAIT_EXP", "EXP_BUSY", "FIN_BUSY")


def check_top_config(cfg: HardwareConfig) -> None:
    """Raise ConfigError for parameters this top level does not support."""
    ab = cfg.axi_data_bytes
    word = cfg.macs_per_line * cfg.element_bytes
    if word != ab:
        raise bad("axi_data_bits", cfg.axi_data_bits,
                  f"this top level needs one Q/K/V word per AXI beat: macs_per_line × "
                  f"element bytes = {word * 8} bits")
    ow = cfg.macs_per_line * cfg.out_element_bytes
    if ow % ab:
        raise bad("axi_data_bits", cfg.axi_data_bits,
                  f"an output word ({ow * 8} bits) must be a whole number of AXI beats")
    if INSTR_BYTES % ab:
        raise bad("axi_data_bits", cfg.axi_data_bits,
                  "an instruction (256 bits) must be a whole number of AXI beats (≤ 256 bits)")


# the engine's units, each reset by a register of its own
ENGINE_UNITS = ("core", "fetch", "dispatch", "load", "issue", "store", "watchdog", "dma_counters")


class _Engine(Elaboratable):
    """Everything a run resets: the controller's units (hw/ctrl/) around the compute core,
    the error register and the run's end."""

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        ab = cfg.axi_data_bytes
        self.go = Signal()
        self.abort = Signal()
        self.prog_base = Signal(64)
        self.prog_len = Signal(32)
        self.win_base = Signal(64)
        self.win_size = Signal(64)
        self.wwin_base = Signal(64)          # the store engine's window
        self.wwin_size = Signal(64)
        self.kvwin_base = Signal(64)         # the load engine's window for K, V and tables
        self.kvwin_size = Signal(64)
        self.overlap = Signal()              # the write window overlaps WIN, KVWIN or the program
        self.no_wwin = Signal()              # no write window programmed (WWIN_SIZE = 0)
        self.no_kvwin = Signal()             # no K/V read window programmed (KVWIN_SIZE = 0)
        self.finished = Signal()
        self.drained = Signal()
        self.err = Signal(4)
        self.counters = {n: Signal(64, name=f"ctr_{n.lower()}")
                         for n in CORE_COUNTERS + DmaCounters.NAMES}
        self.axi_flows = {**axi4_ports("", ab * 8), **axi4_ports("insn_", ab * 8, write=False)}
        self.axi = {k: Signal(v.shape, name=f"e_{k}") for k, v in self.axi_flows.items()}
        # START's reset, one register a unit (AttenIOTop: equal registers kept apart), so no
        # net reaches the whole engine (issue #47); the core's stages have one each as well
        units = ENGINE_UNITS + ("errors",) + tuple(f"core_{s}" for s in CORE_STAGES)
        self.resets = {n: Signal(name=f"eng_rst_{n}") for n in units}

    def _axi(self, m: Module, unit, prefix: str, names) -> None:
        """Join ``unit``'s AXI ports with the engine's (``prefix`` + name)."""
        for k in names:
            outer, inner = self.axi[prefix + k], getattr(unit, k)
            if self.axi_flows[prefix + k].flow == In:
                m.d.comb += inner.eq(outer)
            else:
                m.d.comb += outer.eq(inner)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ab = cfg.axi_data_bytes
        units = (core, fetch, disp, load, issue, store, wdog, dctr) = (
            ComputeCore(cfg), ProgramFetch(cfg), Dispatch(), LoadEngine(cfg), ComputeIssue(cfg),
            StoreEngine(cfg), Watchdog(), DmaCounters(ab))
        for name, unit in zip(ENGINE_UNITS, units, strict=True):   # each under its own reset
            m.submodules[name] = ResetInserter(self.resets[name])(unit)
        m.d.comb += [r.eq(self.resets[f"core_{s}"]) for s, r in core.stage_resets.items()]

        err = self.err
        err_next = Signal.like(err)      # the error register's value in the next cycle
        stop = Signal()
        m.d.comb += stop.eq(err != 0)
        # every error is registered (its valid bit and code) before the priority: a unit's
        # fail, which can follow another unit's stop through the tokens and hand-shakes
        # between them, ends at a register beside it, not at the error register and the stop
        # registers across the die (the routed preset's worst path after session 16's cuts:
        # a stop → the load's read beat → its token push → the dispatch → the store's start →
        # the priority → the stops). The first error still wins, a cycle later.
        sources = [(self.abort & self.go, ErrorCode.ABORTED),
                   (self.no_wwin & self.go, ErrorCode.NO_WRITE_WINDOW),
                   (self.no_kvwin & self.go, ErrorCode.NO_KV_WINDOW),
                   (self.overlap & self.go, ErrorCode.REGION_OVERLAP),
                   *((unit.fail, unit.fail_code) for unit in (fetch, disp, load, issue, store,
                                                              wdog))]
        raised = [(Signal(name=f"err_raised{i}"), Signal.like(err, name=f"err_code{i}"))
                  for i in range(len(sources))]
        for (cond, code), (r_cond, r_code) in zip(sources, raised, strict=True):
            m.d.sync += [r_cond.eq(cond), r_code.eq(code)]
        # (the run's end needs no wait for them: an error raised in the cycle before the run
        # is finished reaches the error register in the cycle DONE is set)
        # each unit stops from a register of its own (one net a unit instead of `stop`'s
        # fan-out across the die): the cycle after its own error, as before the errors were
        # registered (a dispatch that found a bad entry, a page walk that found a page outside
        # the window, do nothing more); with the error register after another unit's error
        # (two cycles after it, one more than before); at once for the run's refusals
        # (ABORT, the windows: made from registers), so a run refused at START fetches
        # nothing. Each copy's input holds its own output, so synthesis keeps them apart.
        refused = Signal()
        m.d.comb += refused.eq(Cat(*(cond for cond, _ in sources[:4])).any())
        stops = []
        for unit in (fetch, disp, load, issue, store):
            own = Signal(name=f"stop_{type(unit).__name__.lower()}")
            m.d.sync += own.eq(own | (err_next != 0) | unit.fail | refused)
            m.d.comb += [unit.go.eq(self.go), unit.stop.eq(own)]
            stops.append(own)
        m.d.comb += [load.win_base.eq(self.win_base), load.win_size.eq(self.win_size),
                     load.kvwin_base.eq(self.kvwin_base), load.kvwin_size.eq(self.kvwin_size),
                     store.win_base.eq(self.wwin_base), store.win_size.eq(self.wwin_size)]

        # fetch → dispatch → the three queues' engines
        m.d.comb += [fetch.prog_base.eq(self.prog_base), fetch.prog_len.eq(self.prog_len),
                     disp.exhausted.eq(fetch.exhausted)]
        self._axi(m, fetch, "insn_", axi4_ports("", ab * 8, write=False))
        wiring.connect(m, fetch.head, disp.fetched)
        wiring.connect(m, disp.load, load.queue)
        wiring.connect(m, disp.compute, issue.queue)
        wiring.connect(m, disp.store, store.queue)
        self._axi(m, load, "", axi4_ports("", ab * 8, write=False))
        self._axi(m, store, "", axi4_ports("", ab * 8, read=False))

        # the engines and the core
        wiring.connect(m, load.qcmd, core.qcmd)
        wiring.connect(m, load.q, core.q)
        wiring.connect(m, load.kv, core.kv)
        wiring.connect(m, issue.cmd, core.cmd)
        wiring.connect(m, core.o, store.o)
        m.d.comb += [load.k_free.eq(core.k_free), load.v_free.eq(core.v_free),
                     load.credits_stale.eq(core.steps_done),
                     issue.busy.eq(core.busy), issue.steps_done.eq(core.steps_done),
                     issue.part_wait.eq(core.part_wait)]

        # errors: the first one is kept; of several in one cycle the last source here wins
        m.d.comb += err_next.eq(err)
        m.d.sync += err.eq(err_next)
        with m.If(self.resets["errors"]):    # (after their updates: the reset wins)
            m.d.sync += [err.eq(0), *(s.eq(0) for s in stops), *(r.eq(0) for r, _ in raised)]
        for r_cond, r_code in raised:
            with m.If(r_cond & (err == 0)):
                m.d.comb += err_next.eq(r_code)

        # end of run, drain, watchdog
        in_flight_none = load.idle & fetch.idle & store.idle
        m.d.comb += [
            self.finished.eq(load.ended & issue.ended & store.ended & in_flight_none
                             & ~core.busy & ~stop),
            wdog.go.eq(self.go),
            wdog.progress.eq(fetch.active | load.request | load.beat | store.request
                             | store.beat | store.response | disp.dispatched | core.active
                             | load.started | issue.started | store.started),
            self.drained.eq(in_flight_none | wdog.timed_out),
        ]

        # counters
        ctr = self.counters
        for name in CORE_COUNTERS:
            m.d.comb += ctr[name].eq(getattr(core, name.lower()))
        m.d.comb += [dctr.rd_beat.eq(load.beat), dctr.wr_beat.eq(store.beat),
                     dctr.wr_kept.eq(store.kept)]
        for name in DmaCounters.NAMES:
            m.d.comb += ctr[name].eq(getattr(dctr, name.lower()))
        return m


class AttenIOTop(wiring.Component):
    """The accelerator: registers, controller, DMA and compute core behind AXI ports.

    Raises
    ------
    ConfigError
        A configuration this top level cannot build (see :func:`check_top_config`) or the
        compute core rejects.
    """

    def __init__(self, cfg: HardwareConfig):
        check_top_config(cfg)
        self.cfg = cfg
        ab = cfg.axi_data_bytes
        lite = {f"s_axil_{k}": (In(v.shape) if v.flow == Out else Out(v.shape))
                for k, v in axi4lite_signature().members.items()}
        super().__init__({**lite, **axi4_ports("m_axi_", ab * 8),
                          **axi4_ports("m_axi_insn_", ab * 8, write=False), "irq": Out(1)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.csr = csr = CsrBank(cfg)
        for k in axi4lite_signature().members:
            port = getattr(self, f"s_axil_{k}")
            inner = getattr(csr.axil, k)
            if axi4lite_signature().members[k].flow == Out:
                m.d.comb += inner.eq(port)
            else:
                m.d.comb += port.eq(inner)
        eng_rst = Signal()
        eng = _Engine(cfg)
        m.submodules.engine = eng
        for k, sig in eng.axi.items():
            port = getattr(self, f"m_axi_{k}")
            if eng.axi_flows[k].flow == In:
                m.d.comb += sig.eq(port)
            else:
                m.d.comb += port.eq(sig)

        busy = Signal()
        done = Signal()
        refused = Signal()
        start = csr.ctrl[0]
        m.d.comb += [
            eng.go.eq(busy), eng.abort.eq(csr.ctrl[1]),
            eng.prog_base.eq(Cat(csr.prog_base_lo, csr.prog_base_hi)),
            eng.prog_len.eq(csr.prog_len),
            eng.win_base.eq(Cat(csr.win_base_lo, csr.win_base_hi)),
            eng.win_size.eq(Cat(csr.win_size_lo, csr.win_size_hi)),
        ]
        self._regions(m, csr, eng)
        cycles = Signal(64)
        end = busy & (eng.finished | ((eng.err != 0) & eng.drained))
        # START resets the engine from a register (its reset reaches every register the engine
        # has: from a register it is one net, not two LUT levels after busy and the CSR; the
        # routed fpga preset's speed-8 critical path, issue #31), and the run begins the cycle
        # after: the host sees one cycle more from its write to the interrupt, CYCLES is as it was
        m.d.sync += eng_rst.eq(start & ~busy & ~eng_rst)
        # ... and a copy of it for each unit of the engine (``_Engine.resets``): each copy's
        # input holds its own output, so synthesis keeps them apart (equal inputs would be
        # merged into one register); they start at 0 and follow the same rule, so each equals
        # eng_rst. One net reached every register the engine resets (21,057 flip-flops, then
        # 5,851 with the datapath off it: the routes' most congested net, session 14)
        for r in eng.resets.values():
            m.d.sync += r.eq(start & ~busy & ~r)
        with m.If(start & ~busy & ~eng_rst):
            m.d.sync += [done.eq(0), refused.eq(0), cycles.eq(0)]
        with m.Elif(start):
            m.d.sync += refused.eq(1)
        with m.If(eng_rst):
            m.d.sync += busy.eq(1)
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(end):
            m.d.sync += [busy.eq(0), done.eq(1)]
        m.d.comb += [
            csr.status.eq(Cat(busy | eng_rst, done, Const(0, 6), eng.err, Const(0, 4), refused)),
            csr.irq_status_set.eq(end),
            self.irq.eq((csr.irq_status & csr.irq_enable) != 0),
            csr.cycles.eq(cycles),
        ]
        for name, sig in eng.counters.items():
            m.d.comb += getattr(csr, name.lower()).eq(sig)
        self.engine = eng
        return m

    @staticmethod
    def _regions(m: Module, csr, eng) -> None:
        """The store engine's and the K/V read window, and the overlap check, from the
        registers (outside the engine, so START's reset does not clear them; registers change
        only between runs). Two register stages: the regions' ends, then the compares."""
        rb, rs = Cat(csr.win_base_lo, csr.win_base_hi), Cat(csr.win_size_lo, csr.win_size_hi)
        wb, ws = Cat(csr.wwin_base_lo, csr.wwin_base_hi), Cat(csr.wwin_size_lo, csr.wwin_size_hi)
        kb = Cat(csr.kvwin_base_lo, csr.kvwin_base_hi)
        ks = Cat(csr.kvwin_size_lo, csr.kvwin_size_hi)
        pb = Cat(csr.prog_base_lo, csr.prog_base_hi)
        own, k_own = Signal(), Signal()
        # (the words are registers of the CSRs, each cycle: data, off the global reset, whose
        # net they were 639 of (1,517 flip-flops → 878 in session 18's netlists); a run reads
        # them several cycles after any write, START's own among them)
        re, we, pe, ke = (data_reg(65, f"reg_{n}_end") for n in "rwpk")
        rb_r, wb_r, pb_r, kb_r = (data_reg(64, f"reg_{n}_base") for n in "rwpk")
        r_on, p_on = Signal(), Signal()
        m.d.sync += [own.eq(ws != 0), k_own.eq(ks != 0), re.eq(rb + rs), we.eq(wb + ws),
                     ke.eq(kb + ks), pe.eq(pb + csr.prog_len * INSTR_BYTES), rb_r.eq(rb),
                     wb_r.eq(wb), pb_r.eq(pb), kb_r.eq(kb), r_on.eq(rs != 0),
                     p_on.eq(csr.prog_len != 0)]
        wbase, wsize, kbase, ksize = (data_reg(64, f"reg_{n}") for n in (
            "wwin_base", "wwin_size", "kvwin_base", "kvwin_size"))
        m.d.sync += [wbase.eq(wb), wsize.eq(ws), kbase.eq(kb), ksize.eq(ks),
                     eng.no_wwin.eq(~own), eng.no_kvwin.eq(~k_own),
                     eng.overlap.eq(own & ((r_on & (rb_r < we) & (wb_r < re))
                                           | (k_own & (kb_r < we) & (wb_r < ke))
                                           | (p_on & (pb_r < we) & (wb_r < pe))))]
        m.d.comb += [eng.wwin_base.eq(wbase), eng.wwin_size.eq(wsize),
                     eng.kvwin_base.eq(kbase), eng.kvwin_size.eq(ksize)]
