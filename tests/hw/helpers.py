"""Shared helpers for Amaranth-simulator tests of the hw/ blocks."""

from __future__ import annotations

from amaranth.sim import Simulator


def run_pipeline(dut, inputs, in_port, out_port, set_input, get_output, extra_cycles=None):
    """Push ``inputs`` through a fixed-latency pipeline, one per cycle with gaps where an
    input is None, and collect outputs in order. Returns the outputs."""
    outs = []
    latency = getattr(dut, "latency", 8)

    async def tb(ctx):
        for x in list(inputs) + [None] * (latency + (extra_cycles or 2)):
            if x is None:
                ctx.set(in_port.valid, 0)
            else:
                ctx.set(in_port.valid, 1)
                set_input(ctx, x)
            _, _, ov, op = await ctx.tick().sample(out_port.valid, out_port.payload)
            if ov:
                outs.append(get_output(op))

    simulate(dut, tb)
    return outs


def simulate(dut, *testbenches) -> None:
    """Run ``dut`` with a 100 MHz clock and the async ``testbenches`` to their end."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in testbenches:
        sim.add_testbench(tb)
    sim.run()
