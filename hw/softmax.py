"""Softmax unit: the online-softmax update of one row group per cycle (docs/numerics.md 2-6)."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.config import HardwareConfig
from attenio.errors import bad
from attenio.hw.exp2 import Exp2, y_bits
from attenio.model.numerics import MAX_SHIFT

SHIFT_BITS = 6  # rescale shifts saturate at MAX_SHIFT = 62, as the model's do


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
    c_m, c_sh : the softmax multiplier (held for the tile).

    ``chain_log2``: lanes form chains of ``2**chain_log2`` (several keys of one row per step);
    a lane continues from the previous lane's m and ℓ instead of its own inputs, so a chain
    computes exactly what the model's key-by-key loop does. 0 means independent lanes.

    Latency ``3 + Exp2.latency + 1`` = 7; throughput one row group per cycle (lanes =
    ``exp_lanes`` = ``mac_lines``).
    """

    def __init__(self, cfg: HardwareConfig):
        if cfg.exp_lanes != cfg.mac_lines:
            raise bad("exp_lanes", cfg.exp_lanes,
                      f"this RTL needs exp_lanes == mac_lines ({cfg.mac_lines}): one "
                      "exponential per row of a row group per cycle")
        self.cfg = cfg
        self.latency = 3 + Exp2.latency + 1
        super().__init__({
            "i": In(stream.Signature(softmax_in_layout(cfg), always_ready=True)),
            "o": Out(stream.Signature(softmax_out_layout(cfg), always_ready=True)),
            "c_m": In(unsigned(cfg.numerics.scale_mult_bits)),
            "c_sh": In(unsigned(6)),
            "chain_log2": In(range(max(2, cfg.mac_lines.bit_length()))),
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

        def delay(sig, cycles, name):
            for k in range(cycles):
                nxt = Signal.like(sig, name=f"{name}_d{k}")
                m.d.sync += nxt.eq(sig)
                sig = nxt
            return sig

        # stage 1: s·c_m
        v1 = Signal()
        prod1 = [Signal(signed(cfg.logit_product_bits + 1), name=f"prod{k}") for k in range(p)]
        m.d.sync += v1.eq(self.i.valid)
        for k in range(p):
            m.d.sync += prod1[k].eq(i.s[k] * self.c_m)
        # stage 2: t = (prod + 2**(c_sh-1)) >> c_sh
        v2 = Signal()
        t2 = [Signal(signed(cfg.logit_bits + 1), name=f"t{k}") for k in range(p)]
        m.d.sync += v2.eq(v1)
        rc = (Const(1, 1) << self.c_sh) >> 1  # 2**(c_sh-1), or 0 when c_sh = 0
        for k in range(p):
            m.d.sync += t2[k].eq((prod1[k] + rc) >> self.c_sh)
        # the row state travels alongside
        m_in = delay(i.m, 2, "m_in")
        l_in = delay(i.l, 2, "l_in")
        vis = delay(i.visible, 2, "vis")
        first = delay(i.first, 2, "first")
        # stage 3: running max and shift. Lanes form chains of 2**chain_log2 consecutive keys of
        # one row (several keys per step): each lane continues from the previous lane's m, so
        # the chain computes exactly what one key after another would.
        v3 = Signal()
        m3 = [Signal(signed(mb), name=f"m_new{k}") for k in range(p)]
        sh3 = [Signal(unsigned(SHIFT_BITS), name=f"shift{k}") for k in range(p)]
        y3 = [Signal(signed(y_bits(cfg)), name=f"y{k}") for k in range(p)]
        l3 = [Signal(unsigned(cfg.row_sum_bits), name=f"l_old{k}") for k in range(p)]
        # lanes that start a chain: combinational from chain_log2, which is held for a tile
        # (registering them would keep the chains alive in synthesis when chain_log2 is 0)
        heads = Signal(p)
        vis3 = Signal(p)
        chain_mask = Signal(range(p + 1))
        m.d.comb += chain_mask.eq((1 << self.chain_log2) - 1)
        m.d.sync += [v3.eq(v2), vis3.eq(vis)]
        prev_m = None
        for k in range(p):
            head = heads[k]
            m.d.comb += head.eq((k & chain_mask) == 0)
            m_old = Signal(signed(mb), name=f"m_old{k}")
            m.d.comb += m_old.eq(Mux(head, Mux(first, m_init, m_in[k]),
                                     prev_m if prev_m is not None else m_in[k]))
            floor_t = t2[k] >> f
            m_new = Signal(signed(mb), name=f"m_cand{k}")
            m.d.comb += m_new.eq(Mux(vis[k] & (floor_t > m_old), floor_t, m_old))
            diff = Signal(signed(mb + 1), name=f"diff{k}")
            m.d.comb += diff.eq(m_new - m_old)
            m.d.sync += [
                m3[k].eq(m_new),
                sh3[k].eq(Mux(diff > MAX_SHIFT, MAX_SHIFT, diff)),
                y3[k].eq(Mux(vis[k], t2[k] - (m_new << f), -(1 << (y_bits(cfg) - 2)))),
                l3[k].eq(Mux(first, 0, l_in[k])),
            ]
            prev_m = m_new
        # stages 4-6: exp2
        p_out = []
        for k in range(p):
            ex = Exp2(cfg)
            m.submodules[f"exp2_{k}"] = ex
            m.d.comb += [ex.i.valid.eq(v3), ex.i.payload.eq(y3[k])]
            p_out.append(ex.o.payload)
        v6 = delay(v3, Exp2.latency, "v")
        vis6 = delay(vis3, Exp2.latency, "vis6")
        m6 = [delay(m3[k], Exp2.latency, f"m{k}") for k in range(p)]
        sh6 = [delay(sh3[k], Exp2.latency, f"sh{k}") for k in range(p)]
        l6 = [delay(l3[k], Exp2.latency, f"l{k}") for k in range(p)]
        # stage 7: ℓ' = (ℓ >> shift) + p, chained like m
        m.d.sync += self.o.valid.eq(v6)
        o = self.o.payload
        prev_l = None
        for k in range(p):
            pk = Mux(vis6[k], p_out[k], 0)
            l_old = Signal(unsigned(cfg.row_sum_bits), name=f"l_chain{k}")
            m.d.comb += l_old.eq(Mux(heads[k], l6[k], prev_l if prev_l is not None else l6[k]))
            l_new = Signal(unsigned(cfg.row_sum_bits), name=f"l_new{k}")
            m.d.comb += l_new.eq((l_old >> sh6[k]) + pk)
            m.d.sync += [
                o.m[k].eq(m6[k]),
                o.shift[k].eq(sh6[k]),
                o.p[k].eq(pk),
                o.l[k].eq(l_new),
            ]
            prev_l = l_new
        return m
