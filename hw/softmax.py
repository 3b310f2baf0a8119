"""Softmax unit: the online-softmax update of one row group per cycle (docs/numerics.md 2-6)."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.formats import (
    MAX_SHIFT,
    SHIFT_BITS,
    SOFTCAP_CAP_BITS,
    SOFTCAP_SEG_LOG2,
    SOFTCAP_X_EXTRA,
    SOFTCAP_X_INT,
    SOFTCAP_Y_BITS,
)
from attenio.contract.tables import tanh_table
from attenio.contract.timing import ALIBI_LATENCY, SOFTCAP_LATENCY
from attenio.hw.arith import data_reg, pipelined_product, round_half
from attenio.hw.arith import delay as delay_regs
from attenio.hw.exp2 import Exp2, y_bits
from attenio.hw.layouts import alibi_layout, rel_bits, sink_layout


def softmax_latency(cfg: HardwareConfig) -> int:
    """The softmax unit's latency for ``cfg``: :attr:`SoftmaxUnit.LATENCY`, plus the
    soft-capping unit's ``SOFTCAP_LATENCY`` stages and the ALiBi unit's ``ALIBI_LATENCY``
    where the config builds them."""
    return SoftmaxUnit.LATENCY + (SOFTCAP_LATENCY if cfg.softcap_unit else 0) \
        + (ALIBI_LATENCY if cfg.alibi_unit else 0)


def m_bits(cfg: HardwareConfig) -> int:
    """Running max register: floor(t/2**F) and the reset value −2**max_bits, signed."""
    return cfg.max_bits + 1


def softmax_in_layout(cfg: HardwareConfig) -> data.StructLayout:
    p = cfg.mac_lines
    return data.StructLayout({
        "s": data.ArrayLayout(signed(cfg.score_bits), p),
        "m": data.ArrayLayout(signed(m_bits(cfg)), p),
        "l": data.ArrayLayout(unsigned(cfg.row_sum_bits), p),
        "visible": unsigned(p),     # causal mask: 1 where the key is visible to the row
        "first": unsigned(1),       # first key of the tile: m and ℓ start from their reset
    })


def softmax_out_layout(cfg: HardwareConfig) -> data.StructLayout:
    p = cfg.mac_lines
    return data.StructLayout({
        "m": data.ArrayLayout(signed(m_bits(cfg)), p),
        "l": data.ArrayLayout(unsigned(cfg.row_sum_bits), p),
        "p": data.ArrayLayout(unsigned(cfg.exp_bits), p),
        "shift": data.ArrayLayout(unsigned(SHIFT_BITS), p),
    })


class SoftmaxUnit(wiring.Component):
    """One key's online-softmax step for ``mac_lines`` rows at once (the EXP unit).

    Per lane: ``t = round(s·c_m / 2**c_sh)``; ``m' = max(m, floor(t/2**F))`` (unchanged where
    the key is masked); ``shift = m' − m`` (saturated); ``p = exp2(t − m'·2**F)`` (0 where
    masked); ``ℓ' = (ℓ >> shift) + p``. Exactly the model's ``scale``, ``running_max``,
    ``exp2`` and the ℓ half of ``accumulate``.

    Ports
    -----
    i : stream of ``softmax_in_layout`` (always ready).
    o : stream of ``softmax_out_layout``, valid ``latency`` cycles after ``i``.
    c_m, c_sh : the softmax multiplier of each lane, with its scores (the tile's, or the
        lane's row's own with per-row Q scales).
    softcap, cap : the tile's soft-cap (``cfg.softcap_unit`` only): the scaled score is
        ``x = logit/c`` and its logit ``±round(cap·tanh|x|)`` (``model.numerics.softcap``),
        six stages after the scale; with ``softcap`` low the scaled score passes through
        them unchanged.
    sinks, sink : the rows start from their sinks (``cfg.sinks_unit`` only): at a tile's
        first key a chain's head takes the lane's ``sink`` (m, ℓ) instead of ``m_init``, 0
        (``model.numerics.row_start``), with the scores.
    alibi_on, alibi, rel : ALiBi (``cfg.alibi_unit`` only): each lane's logit, after the
        scale and the cap, less ``(alibi.m·rel + 2**(alibi.sh−1)) >> alibi.sh``, saturated
        at ``−2**(logit_bits−1)`` (``model.variants.alibi_biased``), one stage; the bias's
        product and shift run beside the scale's. With ``alibi_on`` low the logit passes.

    ``chain_log2``: lanes form chains of ``2**chain_log2`` (several keys of one row per step);
    a lane continues from the previous lane's m and ℓ instead of its own inputs, so a chain
    computes exactly what the model's key-by-key loop does. 0 means independent lanes.

    Latency ``5 + Exp2.latency + 1`` = 9 (scale in two stages, round, max, shift and exponent
    input, exp2, ℓ), plus ``SOFTCAP_LATENCY`` with the soft-capping unit
    (:func:`softmax_latency`); throughput one row group per cycle (lanes =
    ``exp_lanes`` = ``mac_lines``).
    """

    LATENCY = 5 + Exp2.latency + 1

    def __init__(self, cfg: HardwareConfig):
        cfg.check_rtl()   # one exponential per row of a row group per cycle
        self.cfg = cfg
        self.latency = softmax_latency(cfg)
        super().__init__({
            "i": In(stream.Signature(softmax_in_layout(cfg), always_ready=True)),
            "o": Out(stream.Signature(softmax_out_layout(cfg), always_ready=True)),
            "c_m": In(data.ArrayLayout(unsigned(cfg.scale_factor_bits), cfg.mac_lines)),
            "c_sh": In(data.ArrayLayout(unsigned(6), cfg.mac_lines)),
            "chain_log2": In(range(max(2, cfg.mac_lines.bit_length()))),
            "softcap": In(1), "cap": In(unsigned(SOFTCAP_CAP_BITS)),
            **({"sinks": In(1), "sink": In(data.ArrayLayout(sink_layout(cfg), cfg.mac_lines))}
               if cfg.sinks_unit else {}),
            **({"alibi_on": In(1),
                "alibi": In(data.ArrayLayout(alibi_layout(cfg), cfg.mac_lines)),
                "rel": In(data.ArrayLayout(unsigned(rel_bits(cfg)), cfg.mac_lines))}
               if cfg.alibi_unit else {}),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        n = cfg.numerics
        f = n.logit_frac_bits
        p = cfg.mac_lines
        mb = m_bits(cfg)
        m_init = -(1 << cfg.max_bits)
        i = self.i.payload

        # the valid bits (v…) are reset; every other register is data (hw.arith.data_reg)
        def delay(sig, cycles, name, reset_less=True):
            return delay_regs(m, [sig], cycles, name, reset_less=reset_less)[0]

        # stages 1-2: s·c_m + 2**(c_sh-1) (a two-stage product, the rounding constant, 0
        # when c_sh = 0, formed from c_sh in stage 1 and added in the product's sum)
        rc = [data_reg(unsigned(63), f"rc{k}") for k in range(p)]
        m.d.sync += [rc[k].eq(round_half(self.c_sh[k])) for k in range(p)]
        prod1 = [pipelined_product(m, i.s[k], self.c_m[k], f"prod{k}", addend=rc[k])
                 for k in range(p)]
        v1 = delay(self.i.valid, 2, "v1", reset_less=False)
        # stage 3: t = (prod + 2**(c_sh-1)) >> c_sh, c_sh registered twice to meet it
        v2 = Signal()
        t2 = [data_reg(signed(cfg.logit_bits + 1), f"t{k}") for k in range(p)]
        m.d.sync += v2.eq(v1)
        for k in range(p):
            sh_k = delay(self.c_sh[k], 2, f"c_sh{k}")
            m.d.sync += t2[k].eq(prod1[k] >> sh_k)
        # ALiBi's bias beside the scale: a_m·rel (two stages), then rounded by a_sh (stage 3)
        b2 = self._alibi_bias(m) if cfg.alibi_unit else None
        # the soft-capping unit: x → ±cap·tanh|x|
        extra = 0
        if cfg.softcap_unit:
            extra = SOFTCAP_LATENCY
            t2 = [self._softcap(m, t2[k], k) for k in range(p)]
            v2 = delay(v2, extra, "v_cap", reset_less=False)
        # the ALiBi unit: the logit less its bias, saturated at the logit's floor
        if cfg.alibi_unit:
            t2 = self._alibi(m, t2, b2, extra)
            v2 = delay(v2, ALIBI_LATENCY, "v_alibi", reset_less=False)
            extra += ALIBI_LATENCY
        # the row state travels alongside
        m_in = delay(i.m, 3 + extra, "m_in")
        l_in = delay(i.l, 3 + extra, "l_in")
        vis = delay(i.visible, 3 + extra, "vis")
        first = delay(i.first, 3 + extra, "first")
        # where a row's softmax starts at the first key: m_init and 0, or its sink
        m_start = [Const(m_init, signed(mb))] * p
        l_start = [Const(0, 1)] * p
        if cfg.sinks_unit:
            on = delay(self.sinks, 3 + extra, "sinks_on")
            sk = delay(self.sink, 3 + extra, "sink")
            m_start = [Mux(on, sk[k].m, m_init) for k in range(p)]
            l_start = [Mux(on, sk[k].l, 0) for k in range(p)]
        # stage 4: running max. Lanes form chains of 2**chain_log2 consecutive keys of one row
        # (several keys per step): each lane continues from the previous lane's m, so the chain
        # computes exactly what one key after another would.
        v3 = Signal()
        m3 = [data_reg(signed(mb), f"m_new{k}") for k in range(p)]
        mo3 = [data_reg(signed(mb), f"m_prev{k}") for k in range(p)]
        # m + MAX_SHIFT beside m: stage 5's saturation compares with it while it subtracts
        # (the two carry chains side by side, not one after the other)
        mo3s = [data_reg(signed(mb + 1), f"m_prev_sat{k}") for k in range(p)]
        t3 = [Signal.like(t2[k], name=f"t3_{k}") for k in range(p)]
        l3 = [data_reg(unsigned(cfg.row_sum_bits), f"l_old{k}") for k in range(p)]
        # lanes that start a chain: combinational from chain_log2, which is held for a tile
        # (registering them would keep the chains alive in synthesis when chain_log2 is 0)
        heads = Signal(p)
        vis3 = data_reg(p, "vis3")
        # a chain is at most max_keys_per_step lanes (the decoder's kps_max): a lane at a
        # multiple of it always heads one (on a config of one key a step, no chain at all)
        chain_mask = Signal(range(p + 1))
        m.d.comb += chain_mask.eq(((1 << self.chain_log2) - 1) & (cfg.max_keys_per_step - 1))
        m.d.sync += [v3.eq(v2), vis3.eq(vis)]
        prev_m = None
        for k in range(p):
            head = heads[k]
            m.d.comb += head.eq((k & chain_mask) == 0)
            m_old = Signal(signed(mb), name=f"m_old{k}")
            m.d.comb += m_old.eq(Mux(head, Mux(first, m_start[k], m_in[k]),
                                     prev_m if prev_m is not None else m_in[k]))
            floor_t = t2[k] >> f
            m_new = Signal(signed(mb), name=f"m_cand{k}")
            m.d.comb += m_new.eq(Mux(vis[k] & (floor_t > m_old), floor_t, m_old))
            m.d.sync += [m3[k].eq(m_new), mo3[k].eq(m_old), mo3s[k].eq(m_old + MAX_SHIFT),
                         t3[k].eq(t2[k]),
                         l3[k].eq(Mux(first, l_start[k], l_in[k]))]
            prev_m = m_new
        # stage 5: shift = m' − m (saturated) and y = t − m'·2**F
        v4 = Signal()
        m4 = [data_reg(signed(mb), f"m4_{k}") for k in range(p)]
        sh4 = [data_reg(unsigned(SHIFT_BITS), f"shift{k}") for k in range(p)]
        y4 = [data_reg(signed(y_bits(cfg)), f"y{k}") for k in range(p)]
        l4 = [data_reg(unsigned(cfg.row_sum_bits), f"l4_{k}") for k in range(p)]
        vis4 = data_reg(p, "vis4")
        m.d.sync += [v4.eq(v3), vis4.eq(vis3)]
        for k in range(p):
            diff = Signal(signed(mb + 1), name=f"diff{k}")
            m.d.comb += diff.eq(m3[k] - mo3[k])
            m.d.sync += [
                m4[k].eq(m3[k]),
                sh4[k].eq(Mux(m3[k] > mo3s[k], MAX_SHIFT, diff)),
                y4[k].eq(Mux(vis3[k], t3[k] - (m3[k] << f), -(1 << (y_bits(cfg) - 2)))),
                l4[k].eq(l3[k]),
            ]
        # stages 6-8: exp2; beside it, a chain head's ℓ >> shift (its own row state)
        p_out = []
        for k in range(p):
            ex = Exp2(cfg)
            m.submodules[f"exp2_{k}"] = ex
            m.d.comb += [ex.i.valid.eq(v4), ex.i.payload.eq(y4[k])]
            p_out.append(ex.o.payload)
        lsh5 = []
        for k in range(p):
            x = data_reg(unsigned(cfg.row_sum_bits), f"l_sh{k}")
            m.d.sync += x.eq(l4[k] >> sh4[k])
            lsh5.append(x)
        n = Exp2.latency
        v7 = delay(v4, n, "v", reset_less=False)
        vis7 = delay(vis4, n, "vis7")
        m7 = [delay(m4[k], n, f"m{k}") for k in range(p)]
        sh7 = [delay(sh4[k], n, f"sh{k}") for k in range(p)]
        lsh7 = [delay(lsh5[k], n - 1, f"lsh{k}") for k in range(p)]
        # stage 9: ℓ' = (ℓ >> shift) + p, chained like m
        m.d.sync += self.o.valid.eq(v7)
        o = data_reg(softmax_out_layout(cfg), "sm_out")      # a port's signal is reset
        m.d.comb += self.o.payload.eq(o)
        prev_l = None
        for k in range(p):
            pk = Mux(vis7[k], p_out[k], 0)
            l_src = Signal(unsigned(cfg.row_sum_bits), name=f"l_chain{k}")
            m.d.comb += l_src.eq(lsh7[k] if prev_l is None
                                 else Mux(heads[k], lsh7[k], prev_l >> sh7[k]))
            l_new = Signal(unsigned(cfg.row_sum_bits), name=f"l_new{k}")
            m.d.comb += l_new.eq(l_src + pk)
            m.d.sync += [
                o.m[k].eq(m7[k]),
                o.shift[k].eq(sh7[k]),
                o.p[k].eq(pk),
                o.l[k].eq(l_new),
            ]
            prev_l = l_new
        return m

    def _alibi_bias(self, m: Module) -> list[Signal]:
        """Each lane's ALiBi bias in stage 3, beside its scaled score: ``a_m·rel`` (two
        stages), then ``(· + 2**(a_sh−1)) >> a_sh``."""
        out = []
        for k in range(self.cfg.mac_lines):
            prod = pipelined_product(m, self.alibi[k].m, self.rel[k], f"alibi_prod{k}")
            ash = delay_regs(m, [self.alibi[k].sh], 2, f"alibi_sh{k}", reset_less=True)[0]
            b = data_reg(unsigned(len(prod)), f"alibi_b{k}")
            m.d.sync += b.eq((prod + round_half(ash)) >> ash)
            out.append(b)
        return out

    def _alibi(self, m: Module, t, bias, extra: int) -> list[Signal]:
        """The ALiBi stage (``ALIBI_LATENCY`` = 1): each lane's logit ``t`` (after the scale
        and ``extra`` stages of the cap) less its ``bias`` (delayed as far), saturated at
        ``−2**(logit_bits−1)``; with ``alibi_on`` low, ``t`` itself."""
        on = delay_regs(m, [self.alibi_on], 3 + extra, "alibi_on", reset_less=True)[0]
        floor = -(1 << (self.cfg.logit_bits - 1))
        out = []
        for k, (tk, bk) in enumerate(zip(t, bias, strict=True)):
            b = delay_regs(m, [bk], extra, f"alibi_bd{k}")[0]
            diff = Signal(signed(max(len(tk), len(b) + 1) + 1), name=f"alibi_t{k}")
            m.d.comb += diff.eq(tk - b)
            o = Signal.like(tk, name=f"t_alibi{k}")
            m.d.sync += o.eq(Mux(on, Mux(diff < floor, floor, diff), tk))
            out.append(o)
        return out

    def _softcap(self, m: Module, x, k: int) -> Signal:
        """Lane ``k``'s soft-cap, ``SOFTCAP_LATENCY`` = 6 stages: |x| and the saturation; the
        table's base and slope (a ROM read); the interpolation; ``y·cap`` (two); the
        rounding and the sign (or ``x`` itself, the cap off)."""
        cfg = self.cfg
        xf = cfg.numerics.logit_frac_bits + SOFTCAP_X_EXTRA
        xb = xf + SOFTCAP_X_INT
        rbits = xb - SOFTCAP_SEG_LOG2
        lut = [int(v) for v in tanh_table()]
        dbits = max(b - a for a, b in zip(lut[:-1], lut[1:], strict=True)).bit_length()
        ybits = SOFTCAP_Y_BITS + 1
        rom = Memory(shape=unsigned(ybits + dbits), depth=len(lut) - 1, init=[
            a | (b - a) << ybits for a, b in zip(lut[:-1], lut[1:], strict=True)])
        m.submodules[f"tanh_rom{k}"] = rom
        rd = rom.read_port()
        # stage A: |x|, its sign, past the table
        neg1, sat1 = data_reg(1, f"cap_neg1_{k}"), data_reg(1, f"cap_sat1_{k}")
        ax1 = data_reg(unsigned(xb), f"cap_ax1_{k}")
        ax = Signal(unsigned(len(x)), name=f"cap_ax{k}")
        m.d.comb += ax.eq(Mux(x < 0, -x, x))
        m.d.sync += [neg1.eq(x < 0), sat1.eq(ax >= (1 << xb)), ax1.eq(ax[:xb])]
        # stage B: the segment's base and slope (the ROM's registered read), r beside it
        m.d.comb += rd.addr.eq(ax1[rbits:])
        r2 = data_reg(unsigned(rbits), f"cap_r2_{k}")
        neg2, sat2 = data_reg(1, f"cap_neg2_{k}"), data_reg(1, f"cap_sat2_{k}")
        m.d.sync += [r2.eq(ax1[:rbits]), neg2.eq(neg1), sat2.eq(sat1)]
        # stage C: y = base + round(slope·r / 2**R), the last knot past the table
        y3 = data_reg(unsigned(ybits), f"cap_y3_{k}")
        base, slope = rd.data[:ybits], rd.data[ybits:]
        m.d.sync += y3.eq(Mux(sat2, lut[-1], base + ((slope * r2 + (1 << (rbits - 1)))
                                                     >> rbits)))
        neg3 = data_reg(1, f"cap_neg3_{k}")
        m.d.sync += neg3.eq(neg2)
        # stages D, E: y·cap
        prod = pipelined_product(m, y3, self.cap, f"cap_prod{k}")
        neg5 = delay_regs(m, [neg3], 2, f"cap_neg5_{k}")[0]
        x5 = delay_regs(m, [x], 5, f"cap_x5_{k}")[0]
        # stage F: round, sign; the cap off: x unchanged
        tc = Signal(unsigned(len(prod)), name=f"cap_tc{k}")
        m.d.comb += tc.eq((prod + (1 << (SOFTCAP_Y_BITS - 1))) >> SOFTCAP_Y_BITS)
        out = Signal.like(x, name=f"t_cap{k}")
        m.d.sync += out.eq(Mux(self.softcap, Mux(neg5, -tc, tc), x5))
        return out
