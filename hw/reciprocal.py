"""Reciprocal unit: 1/ℓ by a seed table and one Newton–Raphson step (docs/numerics.md, block 7)."""

from __future__ import annotations

from amaranth import Array, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.tables import recip_table
from attenio.hw.arith import data_reg, delay, pipelined_product


def recip_layout(cfg: HardwareConfig) -> data.StructLayout:
    return data.StructLayout({
        "r": unsigned(cfg.recip_bits),
        "e": unsigned(max(1, (cfg.row_sum_bits - 1).bit_length())),
        "zero": unsigned(1),
    })


def leading_one(m: Module, x: Signal, width: int) -> Signal:
    """``floor(log2 x)`` for x > 0 (0 for x = 0), as a priority encoder."""
    e = Signal(range(max(2, width)))
    for i in range(width):  # later (higher) bits win
        with m.If(x[i]):
            m.d.comb += e.eq(i)
    return e


class Reciprocal(wiring.Component):
    """Bit-exact ``model.numerics.reciprocal``: ``1/ℓ ≈ r·2**-(RF+e)``.

    Ports
    -----
    i : stream of unsigned ℓ (``row_sum_bits``), always ready.
    o : stream of ``{r, e, zero}``, valid ``latency`` cycles later; ``zero`` flags ℓ = 0.

    Latency 8, throughput 1 per cycle: leading-one detect; normalize; seed lookup; ``mn·r0``
    (two stages); ``2 − mn·r0``; ``r0·(2 − mn·r0)`` (two stages, its product is the output).
    """

    latency = 8

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        super().__init__({
            "i": In(stream.Signature(unsigned(cfg.row_sum_bits), always_ready=True)),
            "o": Out(stream.Signature(recip_layout(cfg), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.cfg.numerics
        rf, sb = n.recip_frac_bits, n.recip_seed_log2
        lw = self.cfg.row_sum_bits
        seeds = Array(Const(int(v), unsigned(rf + 1)) for v in recip_table(n))
        lv = self.i.payload
        e0 = leading_one(m, lv, lw)
        # the valid bits (v…) are reset; the values beside them are data (hw.arith.data_reg)
        # stage 1: leading one
        v1, l1, e1, z1 = Signal(), data_reg(lw), data_reg(e0.shape()), data_reg(1)
        m.d.sync += [v1.eq(self.i.valid), l1.eq(lv), e1.eq(e0), z1.eq(lv == 0)]
        # stage 2: mantissa in [2**RF, 2**(RF+1)) = floor(ℓ·2**RF / 2**e)
        v2, e2, z2 = Signal(), Signal.like(e1), data_reg(1)
        mn2 = data_reg(rf + 1)
        m.d.sync += [v2.eq(v1), e2.eq(e1), z2.eq(z1), mn2.eq((l1 << rf) >> e1)]
        # stage 3: seed
        v3, e3, z3 = Signal(), Signal.like(e2), data_reg(1)
        mn3 = data_reg(rf + 1)
        r03 = data_reg(rf + 1)
        m.d.sync += [v3.eq(v2), e3.eq(e2), z3.eq(z2), mn3.eq(mn2),
                     r03.eq(seeds[mn2[rf - sb:rf]])]
        # stages 4-5: x·r0 (≈ 2**RF), a two-stage product
        xr = pipelined_product(m, mn3, r03, "xr")
        v5, e5, z5, r05 = delay(m, [v3, e3, z3, r03], 2, "s5")
        # stage 6: 2 − x·r0
        v6, e6, z6, r06 = delay(m, [v5, e5, z5, r05], 1, "s6")
        t6 = data_reg(rf + 3)
        m.d.sync += t6.eq((2 << rf) - (xr >> rf))
        # stages 7-8: one Newton step r0·(2 − x·r0), a two-stage product
        rr = pipelined_product(m, r06, t6, "rr")
        v8, e8, z8 = delay(m, [v6, e6, z6], 2, "s8")
        m.d.comb += [
            self.o.valid.eq(v8),
            self.o.payload.r.eq(Mux(z8, 0, rr >> rf)),
            self.o.payload.e.eq(e8),
            self.o.payload.zero.eq(z8),
        ]
        return m
