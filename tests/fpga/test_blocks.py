"""Block-level closure (issue #47): a block wrapped by fpga/blocks.py keeps its behaviour one
register later on each side (here exp2, bit-exact with the model's exp2 two cycles later),
offers every non-constant port of the block, and every block of the list builds; an unknown
block is refused by name."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.fpga.blocks import BLOCKS, Registered, block_design
from attenio.hw.build import to_verilog
from attenio.hw.exp2 import Exp2
from attenio.model import numerics as nm

HW = C.preset("tiny")


def test_registered_exp2_is_exp2_two_cycles_later():
    dut = block_design(HW, "exp2")
    lat = Exp2.latency + 2
    f = HW.numerics.logit_frac_bits
    ys = [-(5 << f) + 123, -7, 0, -(1 << f), -(3 << f) - 999]
    want = nm.exp2(HW, np.array(ys)).tolist()
    got = []

    async def bench(ctx):
        for cyc in range(len(ys) + lat + 1):
            if cyc < len(ys):
                ctx.set(dut.i__valid, 1)
                ctx.set(dut.i__payload, ys[cyc])
            else:
                ctx.set(dut.i__valid, 0)
            await ctx.tick()
            if ctx.get(dut.o__valid):
                got.append((cyc, ctx.get(dut.o__payload)))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert [v for _, v in got] == want
    assert got[0][0] == lat - 1          # the first result: latency + the two registers


def test_ports_are_the_blocks_less_constants():
    blk = Exp2(HW)
    dut = Registered(blk)
    names = set(dut.signature.members)
    assert names == {"i__valid", "i__payload", "o__valid", "o__payload"}   # no ready sides


@pytest.mark.parametrize("name", [n for n in BLOCKS if n != "core"])
def test_every_block_builds(name):
    v = to_verilog(block_design(HW, name), f"block_{name}")
    assert f"module block_{name}" in v


def test_unknown_block_is_refused():
    with pytest.raises(ConfigError, match=r"^block='mmu' is invalid: choose one of: pe, "):
        block_design(HW, "mmu")
