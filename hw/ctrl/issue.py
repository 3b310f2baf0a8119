"""ComputeIssue: the compute queue's ``COMPUTE`` and ``FINALIZE`` handed to the compute core."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.base.errors import ErrorCode
from attenio.contract.program import INSTR_BITS, Op
from attenio.hw.ctrl.decode import kps_log2_of
from attenio.hw.ctrl.dispatch import engine_ports
from attenio.hw.ctrl.layouts import raise_error, view
from attenio.hw.layouts import cmd_layout

__all__ = ["ComputeIssue"]


class ComputeIssue(wiring.Component):
    """``COMPUTE`` becomes the core's command (taken when the core is idle) and ends when the
    core's last step has issued (``steps_done``); ``FINALIZE`` ends when the core is idle again,
    its last output word gone. Pushes go out as an instruction ends.

    Ports
    -----
    queue : :func:`queue_signature` (``In``).
    cmd : the core's command stream. busy, steps_done, part_wait : the core's state (its
        tile expects another part: ``ComputeCore.part_wait``).
    fail, fail_code : ``TOKEN_UNDERFLOW``; ``PART_ORDER``: a ``COMPUTE`` whose ``cont``
        disagrees with ``part_wait``, or a ``FINALIZE`` while the core expects a part (either
        would wait for the core forever). ended : the queue reached ``END``.
    started : an instruction started.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        super().__init__({
            **engine_ports(),
            "cmd": Out(stream.Signature(cmd_layout(cfg))),
            "busy": In(1), "steps_done": In(1), "part_wait": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        qp = self.queue
        chead = qp.head.payload
        cop = view(chead.insn).opcode
        comp = view(chead.insn, Op.COMPUTE)
        craw = Signal(INSTR_BITS)
        c_state = Signal(range(3))           # 0 idle, 1 waiting for the steps, 2 for idle
        comp_end = Signal()
        c_start = Signal()
        c_pop_end = Signal()
        cmd = self.cmd.payload
        m.d.comb += [
            # with head_pos the tile's heads are positions: one "head" of rising positions
            cmd.rows.eq(chead.rh), cmd.head_rows.eq(Mux(comp.head_pos, 0, comp.rows)),
            cmd.hlog.eq(Mux(comp.head_pos, kps_log2_of(comp.rows, self.cfg.mac_lines), 0)),
            cmd.d.eq(comp.d),
            cmd.dv.eq(Mux(comp.dv == 0, comp.d, comp.dv)),
            cmd.keys.eq(comp.keys), cmd.c_m.eq(comp.c_m), cmd.c_sh.eq(comp.c_sh),
            cmd.causal.eq(comp.causal), cmd.q_pos.eq(comp.q_pos), cmd.diag.eq(comp.diag),
            cmd.window.eq(comp.window), cmd.win_diag.eq(comp.win_diag),
            cmd.row_scales.eq(comp.row_scales), cmd.key_scales.eq(comp.key_scales),
            cmd.value_scales.eq(comp.value_scales),
            cmd.lse.eq(comp.lse), cmd.softcap.eq(comp.softcap), cmd.cap.eq(comp.cap),
            cmd.sinks.eq(comp.sinks), cmd.alibi.eq(comp.alibi),
            cmd.cont.eq(comp.cont), cmd.more.eq(comp.more), cmd.select.eq(comp.select),
            cmd.sel_row.eq(comp.sel_row),
            cmd.kps_log2.eq(kps_log2_of(comp.keys_per_step, self.cfg.max_keys_per_step)),
        ]
        with m.If(qp.head.valid & (c_state == 0) & ~comp_end & self.go & ~self.stop):
            with m.If(cop == int(Op.END)):
                m.d.comb += c_pop_end.eq(1)
                m.d.sync += comp_end.eq(1)
            with m.Elif(Mux(cop == int(Op.COMPUTE), comp.cont != self.part_wait,
                            self.part_wait)):
                raise_error(m, self, ErrorCode.PART_ORDER)
            with m.Elif(qp.ok):
                with m.If(cop == int(Op.COMPUTE)):
                    m.d.comb += self.cmd.valid.eq(1)
                    m.d.comb += c_start.eq(self.cmd.ready)
                with m.Else():
                    m.d.comb += c_start.eq(1)
            with m.Elif(qp.under):
                raise_error(m, self, ErrorCode.TOKEN_UNDERFLOW)
        m.d.comb += [qp.start.eq(c_start), qp.head.ready.eq(c_pop_end | c_start)]
        with m.If(c_start):
            m.d.sync += [craw.eq(chead.insn), c_state.eq(Mux(cop == int(Op.COMPUTE), 1, 2))]
        c_end = Signal()
        with m.If((c_state == 1) & self.busy & self.steps_done):
            m.d.comb += c_end.eq(1)
        with m.If((c_state == 2) & ~self.busy):
            m.d.comb += c_end.eq(1)
        with m.If(c_end):
            m.d.sync += c_state.eq(0)
        done = view(craw)
        m.d.comb += [qp.push_prev.eq(c_end & ~self.stop & done.push_prev),
                     qp.push_next.eq(c_end & ~self.stop & done.push_next),
                     qp.quiet.eq(comp_end), self.ended.eq(comp_end), self.started.eq(c_start)]
        return m
