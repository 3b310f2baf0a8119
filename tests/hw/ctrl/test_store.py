"""StoreEngine against the host's view of O in DRAM: each output word's elements as the host
unpacks them (``out_element_bytes`` each, little-endian), rows at their strides, bursts by the
shared rule (contract.rules.axi_bursts), nothing written outside the rows, the instruction's
push after its last response; under random AXI stalls with the AXI4 rules kept."""

import random

import pytest

from attenio.base import config as C
from attenio.base.errors import ErrorCode
from attenio.contract.isa import Instr, Op
from attenio.contract.rules import axi_bursts
from attenio.hw.ctrl.store import StoreEngine

from .axi_sim import QueueFeeder, WriteMemory, run_engine

TINY = C.tiny()          # 4 outputs of 16 bits a word: two 32-bit beats a word
FPGA = C.fpga()


def ref_store(hw, ins: Instr, words: list[list[int]]):
    """The bursts and the bytes a ``STORE_O`` writes: output word by word, row by row, head by
    head, each element ``out_element_bytes`` little-endian (two's complement)."""
    ab, ob, q = hw.axi_data_bytes, hw.out_element_bytes, hw.macs_per_line
    wd = hw.words(ins.d)
    row_bytes = wd * q * ob
    contiguous = ins.row_stride == row_bytes
    bursts, mem = [], {}
    it = iter(words)
    for h in range(ins.heads):
        base = ins.addr + h * ins.head_stride
        rows = [(base, ins.rows * row_bytes)] if contiguous else \
            [(base + r * ins.row_stride, row_bytes) for r in range(ins.rows)]
        for addr, n in rows:
            bursts += [(a, c // ab) for a, c in axi_bursts(addr, n, ab)]
        for r in range(ins.rows):
            row = base + r * ins.row_stride
            for w in range(wd):
                for lane, v in enumerate(next(it)):
                    for i, byte in enumerate((v % (1 << (8 * ob))).to_bytes(ob, "little")):
                        mem[row + (w * q + lane) * ob + i] = byte
    return bursts, mem


def rtl_store(hw, ins: Instr, words, *, seed=0, p_stall=0.3, window=(0, 0), errors=(),
              size=1 << 16, max_cycles=20_000):
    dut = StoreEngine(hw)
    rng = random.Random(seed + 1)
    axi = WriteMemory(dut, size, hw.axi_data_bytes, seed=seed, p_stall=p_stall, errors=errors)
    out = {"push": 0, "fail": None, "taken": 0}

    pending = list(words)
    offer = False

    def step(ctx):
        nonlocal offer
        ctx.set(dut.win_base, window[0])
        ctx.set(dut.win_size, window[1])
        # a stream keeps a word offered until it is taken (the core's output FIFO)
        offer = bool(pending) and (offer or rng.random() >= p_stall)
        ctx.set(dut.o.valid, offer)
        if pending:
            for lane, v in enumerate(pending[0]):
                ctx.set(dut.o.payload[lane], v)
        if offer and ctx.get(dut.o.ready):
            pending.pop(0)
            out["taken"] += 1
            offer = False
        out["push"] += ctx.get(dut.queue.push_prev)

    run_engine(dut, [QueueFeeder(dut, [ins, Instr(Op.END)]), axi], step, out,
               max_cycles=max_cycles)
    return axi, out


def _words(hw, ins, seed):
    rng = random.Random(seed)
    lim = 1 << (hw.out_bits - 1)
    n = ins.heads * ins.rows * hw.words(ins.d)
    return [[rng.randrange(-lim, lim) for _ in range(hw.macs_per_line)] for _ in range(n)]


def _store(hw, *, rows, heads, d, addr, gap=0, head_gap=0, push=True):
    row = hw.row_elements(d) * hw.out_element_bytes
    return Instr(Op.STORE_O, {"rows": rows, "heads": heads, "d": d, "addr": addr,
                              "row_stride": row + gap,
                              "head_stride": rows * (row + gap) + head_gap},
                 push_prev=push)


@pytest.mark.parametrize("hw, rows, heads, d, addr, gap, head_gap, seed", [
    (TINY, 5, 1, 8, 0, 0, 0, 1),
    (TINY, 3, 2, 6, 4096 - 40, 0, 64, 2),       # heads apart, a burst across the 4 KB line
    (TINY, 4, 1, 5, 100 * 4, 8, 0, 3),          # rows apart: a burst each
    (FPGA, 6, 2, 16, 8192 - 64, 0, 0, 4),       # one beat a word (8 × 16-bit outputs = 2 beats)
])
def test_store_writes_the_hosts_layout(hw, rows, heads, d, addr, gap, head_gap, seed):
    ins = _store(hw, rows=rows, heads=heads, d=d, addr=addr, gap=gap, head_gap=head_gap)
    words = _words(hw, ins, seed)
    axi, out = rtl_store(hw, ins, words, seed=seed)
    bursts, mem = ref_store(hw, ins, words)
    assert out["fail"] is None and axi.violations == []
    assert axi.bursts == bursts
    assert axi.written == set(mem)                       # nothing outside the rows
    assert all(axi.mem[a] == v for a, v in mem.items())
    assert out["taken"] == len(words) and out["push"] == 1


def test_store_splits_at_256_beats():
    hw = TINY
    ins = _store(hw, rows=40, heads=1, d=64, addr=0)      # 40 rows × 32 beats = 1280 beats
    words = _words(hw, ins, 5)
    axi, out = rtl_store(hw, ins, words, seed=5, p_stall=0.05, max_cycles=60_000)
    assert out["fail"] is None and axi.violations == []
    assert axi.bursts == ref_store(hw, ins, words)[0]
    assert max(n for _, n in axi.bursts) <= 256


def test_window_refuses_and_writes_nothing_outside():
    hw = TINY
    ins = _store(hw, rows=4, heads=2, d=8, addr=4096 - 64, head_gap=4096)
    axi, out = rtl_store(hw, ins, _words(hw, ins, 6), window=(0, 4096))
    assert out["fail"] == ErrorCode.ADDRESS_RANGE
    assert all(a < 4096 for a in axi.written)
    assert axi.violations == []


def test_write_error_is_axi_write():
    hw = TINY
    ins = _store(hw, rows=2, heads=1, d=8, addr=256)
    axi, out = rtl_store(hw, ins, _words(hw, ins, 7), errors=[(256, 264)])
    assert out["fail"] == ErrorCode.AXI_WRITE and axi.violations == []
