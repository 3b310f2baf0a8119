"""The controller's depths and latencies of the timing contract (contract/timing.py) observed in
simulation, not read from the constants the RTL is built from (issue #34): a queue holds
``queue_depth`` instructions and takes the next the cycle after its oldest leaves; the fetch
asks for ``fetch_chunk`` instructions a burst, ``fetch_buffer`` ahead of dispatch, its first
request ``fetch_delay`` cycles after the start and the next ``fetch_gap`` later; the load
engine's first request comes ``request_delay`` cycles after its instruction starts, the next
``request_gap`` later, and at most ``max_outstanding`` wait for data."""

from amaranth.sim import Simulator

from attenio.base import config as C
from attenio.contract.isa import INSTR_BYTES, Instr, Op
from attenio.contract.timing import TIMING
from attenio.hw.ctrl.dispatch import Dispatch
from attenio.hw.ctrl.fetch import ProgramFetch
from attenio.hw.ctrl.load import LoadEngine

from ..helpers import simulate
from .axi_sim import QueueFeeder, ReadMemory, run_engine

TINY = C.tiny()


def _word(op) -> int:
    return int.from_bytes(Instr(op, {}).encode(), "little")


def test_queue_depth_and_the_dispatch_after_a_start():
    # LOAD_Q entries offered every cycle; the load engine starts none until cycle 50
    dut = Dispatch()
    taken, valid_from = [], []

    async def tb(ctx):
        ctx.set(dut.go, 1)
        ctx.set(dut.fetched.valid, 1)
        ctx.set(dut.fetched.payload, {"insn": _word(Op.LOAD_Q), "bad": 0, "rh": 1})
        for cycle in range(80):
            ctx.set(dut.load.head.ready, int(cycle == 50))
            if ctx.get(dut.fetched.ready):
                taken.append(cycle)
            if ctx.get(dut.load.head.valid):
                valid_from.append(cycle)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    depth = TIMING.queue_depth
    assert taken[:depth] == list(range(depth))   # one a cycle until the queue is full
    # the entry written in cycle 0 is at the queue's head fifo_latency cycles later
    assert valid_from[0] == TIMING.fifo_latency
    # full: the next is taken the cycle after the oldest leaves, pop_delay after its start
    # (sim/timeline.py's rule)
    assert taken[depth:] == [50 + TIMING.pop_delay + 1]
    # the taken head shows invalid until the pop, then the next shows
    assert 51 not in valid_from and 51 + TIMING.pop_delay in valid_from


def test_fetch_chunk_buffer_delay_and_gap():
    # a memory that answers at once, a dispatcher that takes nothing
    hw = TINY
    n = 4 * TIMING.fetch_buffer
    image = b"".join(Instr(Op.LOAD_Q, {}).encode() for _ in range(n))
    dut = ProgramFetch(hw)
    axi = ReadMemory(dut, image, hw.axi_data_bytes, p_stall=0.0, latency=1)

    async def tb(ctx):
        ctx.set(dut.prog_base, 0)
        ctx.set(dut.prog_len, n)
        ctx.set(dut.go, 1)
        ctx.set(dut.head.ready, 0)
        for _ in range(400):
            axi.drive(ctx)
            axi.observe(ctx)
            await ctx.tick()

    simulate(dut, tb)
    ipb = INSTR_BYTES // hw.axi_data_bytes          # beats an instruction
    assert [beats // ipb for _, beats in axi.bursts] == \
        [TIMING.fetch_chunk] * (TIMING.fetch_buffer // TIMING.fetch_chunk)
    assert axi.beats // ipb == TIMING.fetch_buffer  # nothing more until one is dispatched
    assert axi.ar_at[0] == TIMING.fetch_delay
    assert axi.ar_at[1] - axi.ar_at[0] == TIMING.fetch_gap


def test_load_head_latency_requests_delay_gap_and_outstanding():
    # K/V rows apart (one burst a row) from a memory that answers 300 cycles late: the
    # engine requests until max_outstanding bursts wait, then waits for their data
    hw = TINY
    d, keys = 8, 40
    stride = hw.row_elements(d) * hw.element_bytes + 16
    ins = Instr(Op.LOAD_KV, {"keys": keys, "d": d, "keys_per_step": 4, "k_addr": 0,
                             "v_addr": 8192, "row_stride": stride, "key_scales": 0})
    dut = LoadEngine(hw)
    axi = ReadMemory(dut, bytes(16384), hw.axi_data_bytes, p_stall=0.0, latency=300)
    feeder = QueueFeeder(dut, [ins, Instr(Op.END)])
    started = []
    cycle = [0]

    def step(ctx):
        ctx.set(dut.k_free, hw.max_seq_len)
        ctx.set(dut.v_free, hw.max_seq_len)
        for port in (dut.q, dut.kv, dut.qcmd):
            ctx.set(port.ready, 1)
        if ctx.get(dut.queue.head.ready) and not started:
            started.append(cycle[0])
        cycle[0] += 1

    run_engine(dut, [feeder, axi], step, {}, max_cycles=20_000)
    # the head is offered from cycle 0: the engine takes it once it has prepared its beats
    assert started[0] == TIMING.head_latency
    assert axi.ar_at[0] - started[0] == TIMING.request_delay
    first = axi.ar_at[:TIMING.max_outstanding]
    assert {b - a for a, b in zip(first, first[1:], strict=False)} == {TIMING.request_gap}
    waiting = sum(1 for t in axi.ar_at if t < axi.r_at[0])
    assert waiting == TIMING.max_outstanding
    # the next request follows the first burst's last beat
    assert axi.ar_at[TIMING.max_outstanding] > axi.r_at[0]
