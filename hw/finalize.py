"""Finalize unit: O/ℓ for one word of a row per cycle (docs/numerics.md, block 8)."""

from __future__ import annotations

from amaranth import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.hw.arith import data_reg, delay, kept_copies, pipelined_product, round_half
from attenio.hw.reciprocal import Reciprocal, leading_one


def finalize_in_layout(cfg: HardwareConfig) -> data.StructLayout:
    return data.StructLayout({
        "o": data.ArrayLayout(signed(cfg.acc_bits), cfg.macs_per_line),
        "l": unsigned(cfg.row_sum_bits),
        # a row's statistics word instead of O/ℓ (lse): ℓ and the running max m, passed through
        "raw": unsigned(1),
        "m": signed(cfg.max_bits + 1),
    })


def out_word_layout(cfg: HardwareConfig) -> data.ArrayLayout:
    return data.ArrayLayout(signed(cfg.out_bits), cfg.macs_per_line)


def scaled_o_bits(cfg: HardwareConfig) -> int:
    # |O| ≤ ℓ·2**(B-1) plus rounding drift and ℓ < 2**(e+1), so after the shift by e − G
    # |O'| < 2**(G+B); one more bit of margin for the drift, one for the sign.
    return cfg.numerics.finalize_guard_bits + cfg.data_bits + 2


class Finalize(wiring.Component):
    """Bit-exact ``model.numerics.finalize`` on ``q`` elements of one row per cycle.

    Ports
    -----
    i : stream of ``{o: q accumulators, l: ℓ of their row, raw, m}``, always ready.
    o : stream of q outputs (``out_bits``, saturated), valid ``latency`` cycles later; for an
        input with ``raw``, the row's statistics word instead: ``l`` in the low half, ``m``
        (sign extended) in the high half (contract.formats.stats_word_bytes).

    The reciprocal is recomputed for every word (one pipelined unit: no extra area over
    computing it once per row). Latency ``Reciprocal.latency + 6``, throughput 1 word/cycle.
    """

    LATENCY = Reciprocal.latency + 6

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        self.latency = self.LATENCY
        super().__init__({
            "i": In(stream.Signature(finalize_in_layout(cfg), always_ready=True)),
            "o": Out(stream.Signature(out_word_layout(cfg), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        cfg, n = self.cfg, self.cfg.numerics
        q = cfg.macs_per_line
        rf, g_bits, of = n.recip_frac_bits, n.finalize_guard_bits, n.out_frac_bits
        m.submodules.recip = recip = Reciprocal(cfg)
        m.d.comb += [recip.i.valid.eq(self.i.valid), recip.i.payload.eq(self.i.payload.l)]
        # delay the O word alongside the reciprocal
        o_d = delay(m, [self.i.payload.o], Reciprocal.latency, "o_d", reset_less=True)[0]
        r, zero = recip.o.payload.r, recip.o.payload.zero
        # s = max(e − G, 0) and k = RF + e − s − OF from ℓ's leading one e, found beside the
        # reciprocal (which finds the same e) and registered two stages in, then delayed with
        # it: stage A only shifts (the compare and subtracts were on its path)
        e_in = leading_one(m, self.i.payload.l, cfg.row_sum_bits)
        e1 = Signal.like(e_in, name="fin_e1", reset_less=True)
        s2 = Signal.like(e_in, name="fin_s2", reset_less=True)
        k2 = data_reg(range(rf + g_bits + 2), "fin_k2")
        s1 = Mux(e1 > g_bits, e1 - g_bits, 0)
        m.d.sync += [e1.eq(e_in), s2.eq(s1), k2.eq(rf + e1 - s1 - of)]
        v2 = delay(m, [self.i.valid], 2, "fin_v2")[0]      # the word's valid beside s2, k2
        s, k, v_pre = delay(m, [s2, k2, v2], Reciprocal.latency - 3, "fin_sk")
        # stage A: O' = O >> s (each lane its own copy of s, loaded the cycle before: one
        # register drove every lane's shift, the block's worst path at speed 6); k and the
        # rounding constant 2**(k-1) (0 for k = 0)
        s_lane = kept_copies(m, s, v_pre, [o_d[i][0] for i in range(q)], "fin_s",
                             reset_less=True)
        k_a = Signal.like(k, name="fin_k_a")
        m.d.sync += k_a.eq(k)
        # the words and their parameters are data (``reset_less``: off START's reset, issue
        # #47), each written before it is read; the valid bits (v…) are reset
        va, za = Signal(), data_reg(1)
        ka = data_reg(range(rf + g_bits + 2))
        rca = data_reg(rf + g_bits + 1)      # 2**(k−1), k ≤ rf + g_bits + 1
        ob = scaled_o_bits(cfg)
        oa = [data_reg(signed(ob), f"oa{i}") for i in range(q)]
        m.d.sync += [va.eq(recip.o.valid), za.eq(zero), ka.eq(k_a), rca.eq(round_half(k_a))]
        # the reciprocal a copy per lane (one register fed every lane's partial products, the
        # block's worst path: its fan-out to all the DSPs); read only in the cycle after a load
        ra_lane = kept_copies(m, r, recip.o.valid, [o_d[i][1] for i in range(q)], "fin_r",
                              reset_less=True)
        for i in range(q):
            m.d.sync += oa[i].eq(o_d[i] >> s_lane[i])
        # stages B1-B2: products with the rounding constant added in their sums (two stages)
        vb1, zb1, kb1, rcb = delay(m, [va, za, ka, rca], 1, "b1")
        vb, zb = delay(m, [vb1, zb1], 1, "b")
        prods = [pipelined_product(m, oa[i], ra_lane[i], f"prod{i}", addend=rcb)
                 for i in range(q)]
        # stages C1-C2: the shift by k (round half up) in two halves, its high bits then its
        # low ones ((x >> a) >> b = x >> (a + b)), each lane with its own copies of k
        kb = kept_copies(m, kb1, vb1, [oa[i][0] for i in range(q)], "fin_kb", reset_less=True)
        lo = (len(k_a) + 1) // 2
        vc1, zc1 = Signal(), data_reg(1)
        m.d.sync += [vc1.eq(vb), zc1.eq(zb)]
        sums, kc = [], []
        for i in range(q):
            sm = data_reg(signed(len(prods[i])), f"rsum{i}")
            ki = Signal.like(kb[i], name=f"k{i}")
            m.d.sync += [sm.eq(prods[i] >> (kb[i][lo:] << lo)), ki.eq(kb[i])]
            sums.append(sm)
            kc.append(ki)
        vc, zc = Signal(), data_reg(1)
        m.d.sync += [vc.eq(vc1), zc.eq(zc1)]
        rnd = [data_reg(signed(ob + cfg.recip_bits + 1), f"rnd{i}")
               for i in range(q)]
        for i in range(q):
            m.d.sync += rnd[i].eq(sums[i] >> kc[i][:lo])
        # a statistics word rides beside the pipeline to stage D
        raw_c, m_c, l_c = delay(m, [self.i.payload.raw, self.i.payload.m, self.i.payload.l],
                                self.LATENCY - 1, "stats", reset_less=True)
        half = cfg.stats_half_bits
        l_half, m_half = Signal(half), Signal(signed(half))
        m.d.comb += [l_half.eq(l_c), m_half.eq(m_c)]
        # stage D: saturate (the word in a register of its own, off the reset: a port's
        # signal cannot be reset_less)
        lim = 1 << (cfg.out_bits - 1)
        word = data_reg(out_word_layout(cfg), "fin_word")
        m.d.comb += self.o.payload.eq(word)
        m.d.sync += self.o.valid.eq(vc)
        with m.If(raw_c):
            m.d.sync += word.as_value().eq(Cat(l_half, m_half))
        with m.Else():
            for i in range(q):
                rounded = rnd[i]
                with m.If(zc):
                    m.d.sync += word[i].eq(0)
                with m.Elif(rounded >= lim):
                    m.d.sync += word[i].eq(lim - 1)
                with m.Elif(rounded < -lim):
                    m.d.sync += word[i].eq(-lim)
                with m.Else():
                    m.d.sync += word[i].eq(rounded)
        return m
