"""The softmax stage of the compute core: a row group's scores, their multipliers and the rows'
running statistics through :class:`SoftmaxUnit` (running max, exp2, ℓ and the shift that
rescales O), the new m and ℓ written back, and each row's p value and shift into the P buffer
for the ``P V`` step."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.formats import SHIFT_BITS, SOFTCAP_CAP_BITS
from attenio.hw.arith import delay as delay_regs
from attenio.hw.arith import kept_copies
from attenio.hw.lanes import Lanes
from attenio.hw.layouts import alibi_layout, rel_bits, sink_layout
from attenio.hw.sequencer import COUNTER_BITS
from attenio.hw.softmax import SoftmaxUnit, m_bits

__all__ = ["SoftmaxStage", "ml_layout", "pbuf_layout"]


def ml_layout(cfg: HardwareConfig) -> data.StructLayout:
    """A row's running statistics in the m/ℓ banks."""
    return data.StructLayout({"m": signed(m_bits(cfg)), "l": unsigned(cfg.row_sum_bits)})


def pbuf_layout(cfg: HardwareConfig) -> data.StructLayout:
    """A row's p value and O shift in the P buffer."""
    return data.StructLayout({"p": unsigned(cfg.exp_bits), "shift": unsigned(SHIFT_BITS)})


class SoftmaxStage(wiring.Component):
    """Scores → m, ℓ (the m/ℓ banks) and p, shift (the P buffer).

    Ports
    -----
    valid, group, step, visible, scores, c_m, c_sh : a row group's scores in c4 with their
        group, step, the lines that see their key and each lane's multiplier
        (:class:`attenio.hw.score.ScoreStage`, ``PEArray.scores``). ``first``: the group
        starts at this step (its rows' m and ℓ from their reset or sinks): step 0, or the step
        a window first reaches it (``StepSequencer.new``).
    softcap, cap : the tile's soft-cap (its COMPUTE's fields; ``cfg.softcap_unit`` only).
    cont : the part continues its tile (COMPUTE.cont): no step of it is the rows' first.
    sinks, sink : the tile's rows start from their sinks, each lane's row's (the score
        stage's; ``cfg.sinks_unit`` only).
    alibi_on, alibi, rel : the tile's logits lose ALiBi's bias, each lane's row's slope word
        and its distance (the score stage's; ``cfg.alibi_unit`` only).
    ml_data : the group's m/ℓ, read with its scores (one word a bank).
    blog, groups : log2 keys per step (row ρ's chain: lines ρ·b … ρ·b + b − 1) and the
        tile's row groups.
    ml_wr_addr, ml_wr_en, ml_wr_data : the new m, ℓ (a bank each, each with its own copy of
        the address).
    pb_wr_addr, pb_wr_en, pb_wr_data : p and shift into the P buffer, half ``step mod 2``
        (each bank's address its own register: no adder before the write, one bank's fan-out).
    exp_done : steps whose softmax is written (the ``P V`` step of key j waits for j + 1);
        ``clear`` (the tile's end) returns it to 0.
    exp_busy : cycles the softmax unit was fed (cumulative).

    Latency: ``softmax_latency(cfg)`` from ``valid`` to the writes.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        p, gmax = cfg.mac_lines, cfg.row_groups
        keys = range(cfg.max_seq_len + 1)
        lkmax = cfg.max_keys_per_step.bit_length() - 1
        super().__init__({
            "valid": In(1), "group": In(range(gmax + 1)), "step": In(keys), "visible": In(p),
            "first": In(1),
            "step_last": In(1),
            "scores": In(data.ArrayLayout(signed(cfg.score_bits), p)),
            "c_m": In(data.ArrayLayout(unsigned(cfg.scale_factor_bits), p)),
            "c_sh": In(data.ArrayLayout(unsigned(6), p)),
            "softcap": In(1), "cap": In(unsigned(SOFTCAP_CAP_BITS)), "cont": In(1),
            **({"sinks": In(1), "sink": In(data.ArrayLayout(sink_layout(cfg), p))}
               if cfg.sinks_unit else {}),
            **({"alibi_on": In(1), "alibi": In(data.ArrayLayout(alibi_layout(cfg), p)),
                "rel": In(data.ArrayLayout(unsigned(rel_bits(cfg)), p))}
               if cfg.alibi_unit else {}),
            "ml_data": In(data.ArrayLayout(ml_layout(cfg), p)),
            "blog": In(range(lkmax + 1)), "groups": In(range(gmax + 1)), "clear": In(1),
            "ml_wr_addr": Out(data.ArrayLayout(range(gmax + 1), p)), "ml_wr_en": Out(1),
            "ml_wr_data": Out(data.ArrayLayout(ml_layout(cfg), p)),
            "pb_wr_addr": Out(data.ArrayLayout(range(2 * gmax), p)), "pb_wr_en": Out(1),
            "pb_wr_data": Out(data.ArrayLayout(pbuf_layout(cfg), p)),
            "exp_done": Out(keys), "exp_busy": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, p, gmax = self.cfg, self.cfg.mac_lines, self.cfg.row_groups
        lay = ml_layout(cfg)
        lanes = Lanes(m, cfg, self.blog)
        m.submodules.softmax = sm = SoftmaxUnit(cfg)
        m.d.comb += [sm.chain_log2.eq(self.blog), sm.i.valid.eq(self.valid),
                     sm.softcap.eq(self.softcap), sm.cap.eq(self.cap),
                     sm.i.payload.visible.eq(self.visible),
                     sm.i.payload.first.eq(self.first & ~self.cont)]
        if cfg.sinks_unit:
            m.d.comb += [sm.sinks.eq(self.sinks), sm.sink.eq(self.sink)]
        if cfg.alibi_unit:
            m.d.comb += [sm.alibi_on.eq(self.alibi_on), sm.alibi.eq(self.alibi),
                         sm.rel.eq(self.rel)]
        for i in range(p):
            src = lanes.from_row_bank(self.ml_data, lay, i, "ml")
            m.d.comb += [sm.c_m[i].eq(self.c_m[i]), sm.c_sh[i].eq(self.c_sh[i]),
                         sm.i.payload.s[i].eq(self.scores[i]), sm.i.payload.m[i].eq(src.m),
                         sm.i.payload.l[i].eq(src.l)]
        # the group and step tags through the softmax pipeline (data, read with the unit's
        # valid: off START's reset, ``reset_less``, issue #47)
        tg, tk, tl = self.group, self.step, self.step_last
        for stage in range(sm.latency):
            ng = Signal.like(self.group, name=f"sm_g{stage}", reset_less=True)
            nk = Signal.like(self.step, name=f"sm_k{stage}", reset_less=True)
            nl = Signal(name=f"sm_l{stage}", reset_less=True)
            m.d.sync += [ng.eq(tg), nk.eq(tk), nl.eq(tl)]
            pg, pk, tg, tk, tl = tg, tk, ng, nk, nl
        with m.If(sm.i.valid):
            m.d.sync += self.exp_busy.eq(self.exp_busy + 1)
        sm_ml = []
        for j in range(p):
            v = Signal(lay, name=f"sm_ml{j}")
            m.d.comb += [v.m.eq(sm.o.payload.m[j]), v.l.eq(sm.o.payload.l[j])]
            sm_ml.append(v)
        m.d.comb += [self.ml_wr_en.eq(sm.o.valid), self.pb_wr_en.eq(sm.o.valid)]
        # the write addresses, a register per bank loaded from the tags a stage early (with
        # the word a stage from the output): each fans out to one bank's LUT RAMs, not every
        # bank's (one m/ℓ address register for all banks was the routed fpga preset's worst
        # path, 16.2 ns of routing; the P buffer's, at speed 6, issue #31), the P buffer's
        # (half by the step's parity, then the group) added there, so no adder before a write
        v_pre = delay_regs(m, [sm.i.valid], sm.latency - 1, "sm_vpre")[0]
        salts = [self.scores[i][0] for i in range(p)]   # kept_copies: keeps them apart
        ml_wa = kept_copies(m, pg, v_pre, salts, "ml_wa", reset_less=True)
        pb_wa = kept_copies(m, Mux(pk[0], gmax, 0) + pg, v_pre, salts, "pb_wa",
                            reset_less=True)
        for i in range(p):
            # row ρ's new m, ℓ come from the last line of its chain: ρ·b + b − 1
            m.d.comb += [self.ml_wr_data[i].eq(lanes.from_chain_end(sm_ml, lay, i, "ml")),
                         self.ml_wr_addr[i].eq(ml_wa[i])]
            m.d.comb += [self.pb_wr_addr[i].eq(pb_wa[i]),
                         self.pb_wr_data[i].p.eq(sm.o.payload.p[i]),
                         self.pb_wr_data[i].shift.eq(sm.o.payload.shift[i])]
        with m.If(self.clear):
            m.d.sync += self.exp_done.eq(0)
        with m.Elif(sm.o.valid & tl):             # the step's last group (some may skip)
            m.d.sync += self.exp_done.eq(tk + 1)
        return m
