"""StreamFIFO: order kept under random valid/ready, no entry dropped while there is room, and
the latency the timing contract states (contract.timing: fifo_latency)."""

import random

from attenio.contract.timing import TIMING
from attenio.hw.streamfifo import StreamFIFO

from .helpers import simulate


def rtl_fifo(values, depth, seed):
    dut = StreamFIFO(16, depth)
    rng = random.Random(seed)
    got, first_out = [], []

    async def tb(ctx):
        pending = list(values)
        offer = False
        for cycle in range(20 * len(values) + 50):
            offer = bool(pending) and (offer or rng.random() < 0.6)
            ctx.set(dut.i.valid, offer)
            if pending:
                ctx.set(dut.i.payload, pending[0])
            take = rng.random() < 0.5
            ctx.set(dut.o.ready, take)
            assert ctx.get(dut.level) <= depth
            if ctx.get(dut.o.valid):
                first_out.append(cycle)
                if take:
                    got.append(ctx.get(dut.o.payload))
            if offer and ctx.get(dut.i.ready):
                pending.pop(0)
                offer = False
            await ctx.tick()

    simulate(dut, tb)
    return got, first_out


def test_order_under_random_handshakes():
    rng = random.Random(1)
    values = [rng.randrange(1 << 16) for _ in range(60)]
    for depth in (2, 3, 8):
        assert rtl_fifo(values, depth, depth)[0] == values


def test_latency_is_the_contracts():
    dut = StreamFIFO(8, 4)
    seen = []

    async def tb(ctx):
        ctx.set(dut.i.valid, 1)
        ctx.set(dut.i.payload, 42)
        await ctx.tick()
        ctx.set(dut.i.valid, 0)
        for cycle in range(1, 6):
            if ctx.get(dut.o.valid):
                seen.append((cycle, ctx.get(dut.o.payload)))
            await ctx.tick()

    simulate(dut, tb)
    assert seen[0] == (TIMING.fifo_latency, 42)
