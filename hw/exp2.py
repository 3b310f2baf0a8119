"""exp2 unit: p = 2**(y / 2**F) with a piecewise-linear table (docs/numerics.md, block 4)."""

from __future__ import annotations

from amaranth import Array, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.tables import exp_table
from attenio.hw.arith import data_reg
from attenio.hw.dsp import input_registered_product


def y_bits(cfg: HardwareConfig) -> int:
    """Width of y = t − m·2**F: the difference of two logit-width values."""
    return cfg.logit_bits + 1


class Exp2(wiring.Component):
    """Bit-exact ``model.numerics.exp2`` as a 3-stage pipeline, one result per cycle.

    Ports
    -----
    i : stream of signed ``y`` (always ready): ``y < 2**F``.
    o : stream of unsigned ``p`` (``exp_bits`` wide), valid ``latency`` cycles after ``i``.

    Latency 3, throughput 1 per cycle. Stage 1 looks the segment up, stage 2 interpolates,
    stage 3 shifts and rounds.
    """

    latency = 3

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        super().__init__({
            "i": In(stream.Signature(signed(y_bits(cfg)), always_ready=True)),
            "o": Out(stream.Signature(unsigned(cfg.exp_bits), always_ready=True)),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.cfg.numerics
        f, pf = n.logit_frac_bits, n.exp_frac_bits
        sbits = n.exp_segments_log2
        rbits = f - sbits
        lut = [int(x) for x in exp_table(n)]
        # base·2**R + 2**(R-1): the segment's base with the interpolation's rounding constant
        # below it, so stage 2 adds once after the product (floor((b·2**R + h + x) / 2**R) =
        # b + floor((x + h) / 2**R) for an integer b)
        base = Array(Const((v << rbits) + (1 << (rbits - 1)), unsigned(pf + 2 + rbits))
                     for v in lut[:-1])
        delta = Array(Const(b - a, unsigned(pf + 1))
                      for a, b in zip(lut[:-1], lut[1:], strict=True))
        y = self.i.payload
        # stage 1: integer part → output shift (saturated at PF+2), table lookup
        # the valid bits are reset; the values beside them are data, off START's reset
        # (``reset_less``, issue #47), each written before it is read
        v1 = Signal()
        sh1 = data_reg(range(pf + 3))
        base1 = data_reg(unsigned(pf + 2 + rbits))
        yi = y >> f  # floor, ≤ 0
        m.d.sync += [
            v1.eq(self.i.valid),
            sh1.eq(Mux(yi < -(pf + 2), pf + 2, -yi)),
            base1.eq(base[y[rbits:f]]),
        ]
        # the segment's slope and the fraction registered (on an ECP5, in the DSP's input
        # registers: hw/dsp.py) and multiplied in stage 2
        slope_r = input_registered_product(m, platform, delta[y[rbits:f]], y[:rbits],
                                           "exp2_interp")
        # stage 2: linear interpolation with round-half-up
        v2 = Signal()
        sh2 = Signal.like(sh1)
        frac2 = data_reg(unsigned(pf + 2))
        m.d.sync += [
            v2.eq(v1),
            sh2.eq(sh1),
            frac2.eq((base1 + slope_r) >> rbits),
        ]
        # stage 3: p = round(frac / 2**sh) as ((2·frac >> sh) + 1) >> 1
        p3 = Signal.like(self.o.payload, name="exp2_p", reset_less=True)
        m.d.comb += self.o.payload.eq(p3)
        m.d.sync += [
            self.o.valid.eq(v2),
            p3.eq((((frac2 << 1) >> sh2) + 1) >> 1),
        ]
        return m
