"""pipelined_product against Python integers: signed and unsigned operands wider than a DSP,
and narrow pieces built from shift-and-add rows instead of a multiplier."""

import numpy as np
import pytest
from amaranth import Module, Signal, signed, unsigned
from amaranth.back import rtlil
from amaranth.sim import Simulator

from attenio.hw.arith import pipelined_product


@pytest.mark.parametrize("sa,sb", [(signed(24), unsigned(21)), (unsigned(21), unsigned(21)),
                                   (signed(23), unsigned(16)), (signed(8), signed(8)),
                                   (signed(7), signed(12)), (unsigned(3), signed(20)),
                                   (signed(1), unsigned(5)), (signed(20), signed(22)),
                                   (unsigned(4), unsigned(4))])
@pytest.mark.parametrize("with_addend", [False, True])
def test_pipelined_product(sa, sb, with_addend):
    m = Module()
    a, b = Signal(sa), Signal(sb)
    # the addend: a register of the inputs' cycle (here a function of a's low bits), added in
    # the sum's stage; the largest one a 62-bit rounding constant can be
    c, rc = Signal(6), Signal(unsigned(63))
    m.d.comb += c.eq(a[:6])
    m.d.sync += rc.eq((1 << c) >> 1)
    out = pipelined_product(m, a, b, "p", addend=rc if with_addend else None)
    assert len(out) == (max(len(a) + len(b), 63) + 1 if with_addend else len(a) + len(b))
    rng = np.random.default_rng(len(a) * 100 + len(b))

    def lim(s):
        return (-(1 << (s.width - 1)), 1 << (s.width - 1)) if s.signed else (0, 1 << s.width)

    vals = [(lim(sa)[0], lim(sb)[0]), (lim(sa)[1] - 1, lim(sb)[1] - 1),
            (lim(sa)[0], lim(sb)[1] - 1)]
    vals += [(int(rng.integers(*lim(sa))), int(rng.integers(*lim(sb)))) for _ in range(200)]
    got = []
    sim = Simulator(m)
    sim.add_clock(1e-6)

    async def bench(ctx):
        for k in range(len(vals) + 2):
            if k < len(vals):
                ctx.set(a, vals[k][0])
                ctx.set(b, vals[k][1])
            await ctx.tick()
            if k >= 1:  # after tick k: the product of the inputs set before tick k − 1
                got.append(ctx.get(out))

    sim.add_testbench(bench)
    sim.run()
    def extra(x):       # a[:6] of x, two's complement
        return ((1 << (x % (1 << min(6, len(a))))) >> 1) if with_addend else 0

    assert got[:len(vals)] == [x * y + extra(x) for x, y in vals]


def _multipliers(sa, sb) -> int:
    m = Module()
    a, b = Signal(sa), Signal(sb)
    out = pipelined_product(m, a, b, "p")
    return rtlil.convert(m, ports=[a, b, out]).count("cell $mul ")


def test_narrow_pieces_take_no_multiplier():
    # 24 × 21 bits: pieces (17, 7) × (17, 4); the 4-bit piece is shift-and-add rows
    assert _multipliers(signed(24), unsigned(21)) == 2
    assert _multipliers(signed(23), unsigned(16)) == 2
    assert _multipliers(signed(8), signed(8)) == 1
    assert _multipliers(unsigned(21), unsigned(21)) == 1
    assert _multipliers(unsigned(3), signed(20)) == 0
