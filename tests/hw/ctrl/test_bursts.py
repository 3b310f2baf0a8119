"""BurstSplitter against the shared burst rule (contract.rules.axi_bursts) and the window check."""

import random

import pytest
from amaranth.sim import Simulator

from attenio.contract.rules import axi_bursts
from attenio.hw.ctrl.bursts import BurstSplitter

AB = 16   # bytes per beat


def rtl_bursts(base, beats, window=(0, 0), beat_bytes=AB):
    """Requests the splitter offers for one transfer, the engine taking each as soon as it is
    ready: [(address, beats)], and whether the window refused the transfer."""
    dut = BurstSplitter(beat_bytes)
    got = []
    refused = []

    async def tb(ctx):
        ctx.set(dut.win_base, window[0])
        ctx.set(dut.win_size, window[1])
        ctx.set(dut.base, base)
        ctx.set(dut.beats, beats)
        ctx.set(dut.off, 0)
        ctx.set(dut.moved, 1)          # the transfer starts
        await ctx.tick()
        ctx.set(dut.moved, 0)
        off = 0
        for _ in range(10_000):
            ctx.set(dut.want, 0)
            if not ctx.get(dut.ready):
                await ctx.tick()
                continue
            ctx.set(dut.want, 1)
            if ctx.get(dut.window_fail):
                refused.append(True)
                return
            assert ctx.get(dut.valid)
            addr, n, last = ctx.get(dut.addr), ctx.get(dut.len), ctx.get(dut.last)
            got.append((addr, n))
            off += n
            ctx.set(dut.off, off)
            ctx.set(dut.moved, 1)
            await ctx.tick()
            ctx.set(dut.moved, 0)
            ctx.set(dut.want, 0)
            if last:
                return

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return got, bool(refused)


def ref_bursts(base, beats, beat_bytes=AB):
    return [(a, n // beat_bytes) for a, n in axi_bursts(base, beats * beat_bytes, beat_bytes)]


CASES = [
    (0, 1), (0, 256), (0, 257), (4096 - 16, 2),        # one beat before a 4 KB line
    (4096 - 32 * 16, 600), (0x1000, 1000), (123 * 16, 5000),
]


@pytest.mark.parametrize("base, beats", CASES)
def test_bursts_split_at_4k_and_256_beats(base, beats):
    got, refused = rtl_bursts(base, beats)
    assert not refused
    assert got == ref_bursts(base, beats)
    for addr, n in got:
        assert 1 <= n <= 256
        assert addr // 4096 == (addr + n * AB - 1) // 4096


def test_random_transfers():
    rng = random.Random(3)
    for _ in range(12):
        base, beats = rng.randrange(0, 1 << 20, AB), rng.randrange(1, 3000)
        assert rtl_bursts(base, beats)[0] == ref_bursts(base, beats)


@pytest.mark.parametrize("base, beats, window, refused", [
    (0x2000, 16, (0x2000, 256), False),       # exactly the window
    (0x2000, 17, (0x2000, 256), True),        # one beat past its end
    (0x1FF0, 1, (0x2000, 256), True),         # one beat before it
    (0x9000, 64, (0, 0), False),              # no window: anything goes
])
def test_window(base, beats, window, refused):
    got, was_refused = rtl_bursts(base, beats, window)
    assert was_refused == refused
    assert (got == []) == refused
