"""hw/dsp.py: the input-registered product, its behavioural twin against Python integers and its
ECP5 form (a MULT18X18D whose A and B registers are clocked, its output not)."""

import re

import pytest
from amaranth import Module, Signal, signed, unsigned
from amaranth.sim import Simulator

from attenio.base import config as C
from attenio.fpga.blocks import block_design
from attenio.hw.build import to_verilog
from attenio.hw.dsp import ECP5_TARGET, input_registered_product, is_ecp5


@pytest.mark.parametrize("sa,sb", [(unsigned(17), unsigned(9)), (signed(8), signed(8)),
                                   (signed(17), signed(8)), (unsigned(18), signed(18))])
def test_twin_is_registered_operands_times(sa, sb):
    m = Module()
    a, b = Signal(sa), Signal(sb)
    out = input_registered_product(m, None, a, b, "t")
    assert len(out) == sa.width + sb.width and out.shape().signed == (sa.signed or sb.signed)

    def lim(s):
        return (-(1 << (s.width - 1)), (1 << (s.width - 1)) - 1) if s.signed \
            else (0, (1 << s.width) - 1)

    vals = [(lim(sa)[i], lim(sb)[j]) for i in (0, 1) for j in (0, 1)] + [(1, -1 if sb.signed
                                                                           else 1), (0, 3)]
    got = []
    sim = Simulator(m)
    sim.add_clock(1e-6)

    async def bench(ctx):
        for x, y in vals:
            ctx.set(a, x)
            ctx.set(b, y)
            await ctx.tick()
            got.append(ctx.get(out))      # the operands of the cycle before, multiplied

    sim.add_testbench(bench)
    sim.run()
    assert got == [x * y for x, y in vals]


def test_refuses_what_a_dsp_input_cannot_take():
    with pytest.raises(ValueError, match="does not fit"):
        input_registered_product(Module(), None, Signal(19), Signal(8), "t")


def test_platform_detection():
    assert is_ecp5(ECP5_TARGET)
    assert not is_ecp5(None)

    class Other:
        device = "xc7a35t"
    assert not is_ecp5(Other())


def test_ecp5_netlist_clocks_the_input_registers():
    # exp2's interpolation: on the ECP5 target a MULT18X18D with A and B registered on CLK0
    # and the product out combinationally; elsewhere no instance at all (yosys infers one)
    hw = C.fpga()
    text = to_verilog(block_design(hw, "exp2"), "blk", platform=ECP5_TARGET)
    cells = re.findall(r"MULT18X18D\s*#\((.*?)\)\s*\\?\S+\s*\((.*?)\);", text, re.S)
    assert len(cells) == 1
    params, ports = cells[0]
    for reg, clk in (("REG_INPUTA_CLK", "CLK0"), ("REG_INPUTB_CLK", "CLK0"),
                     ("REG_OUTPUT_CLK", "NONE"), ("REG_PIPELINE_CLK", "NONE")):
        assert re.search(rf"\.{reg}\(\"{clk}\"\)", params), reg
    assert re.search(r"\.CLK0\(clk\)", ports)
    assert re.search(r"\.SIGNEDA\(1'h0\)", ports)        # unsigned slope and fraction
    assert "MULT18X18D" not in to_verilog(block_design(hw, "exp2"), "blk")


def test_ecp5_pe_array_multipliers_are_signed_and_registered():
    hw = C.fpga()
    text = to_verilog(block_design(hw, "pe"), "blk", platform=ECP5_TARGET)
    cells = re.findall(r"MULT18X18D\s*#\((.*?)\)\s*\\?\S+\s*\((.*?)\);", text, re.S)
    assert len(cells) == hw.mac_lines * hw.macs_per_line
    for params, ports in cells:
        assert '.REG_INPUTA_CLK("CLK0")' in params and '.REG_INPUTB_CLK("CLK0")' in params
        assert re.search(r"\.SIGNEDA\(1'h1\)", ports) and re.search(r"\.SIGNEDB\(1'h1\)", ports)
