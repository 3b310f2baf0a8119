"""LoadEngine against the shared rules: the K/V block order (contract.rules.kv_order), the burst
rule (contract.rules.axi_bursts) and the DRAM layout of rows with their scale words; every
beat tagged for its ring (V or K, last word of a row, a K row's factor word, the instruction's
end), under random AXI stalls, with the AXI4 rules kept."""

import random

import pytest

from attenio.base import config as C
from attenio.base.errors import ErrorCode
from attenio.contract.isa import Instr, Op
from attenio.contract.rules import axi_bursts, kv_order
from attenio.hw.ctrl.load import LoadEngine
from attenio.hw.layouts import kv_beat_layout

from .axi_sim import QueueFeeder, ReadMemory, run_engine

TINY = C.tiny()                       # 4 × int8 a word, a 32-bit AXI beat: one word a beat


def _image(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)


def _lanes(hw, word: int) -> tuple:
    bits = hw.data_bits
    vals = [(word >> (bits * i)) & ((1 << bits) - 1) for i in range(hw.macs_per_line)]
    return tuple(v - (1 << bits) if v >> (bits - 1) else v for v in vals)


def ref_load_kv(hw, mem: bytes, ins: Instr):
    """The bursts and the K/V beats of a ``LOAD_KV``: blocks in kv_order, each block's rows
    one transfer when contiguous (else one per row), every transfer split by axi_bursts; the
    lanes past d of a row's last data word read as 0."""
    ab, q = hw.axi_data_bytes, hw.macs_per_line
    wd = hw.words(ins.d)
    ks = ins.key_scales
    strides = {"K": ins.row_stride, "V": hw.v_row_stride(ins.row_stride, bool(ks))}
    row_words = {"K": wd + ks, "V": wd}
    contiguous = ins.row_stride == row_words["K"] * ab
    b = ins.keys_per_step
    steps = -(-ins.keys // b)
    bursts, beats = [], []
    for which, s in kv_order(steps):
        nk = min(b, ins.keys - s * b)
        base = (ins.k_addr if which == "K" else ins.v_addr) + s * b * strides[which]
        nbytes = row_words[which] * ab
        rows = ([(base, nk * nbytes)] if contiguous
                else [(base + r * strides[which], nbytes) for r in range(nk)])
        for addr, n in rows:
            bursts += [(a, c // ab) for a, c in axi_bursts(addr, n, ab)]
        for r in range(nk):
            row = base + r * strides[which]
            for w in range(row_words[which]):
                word = int.from_bytes(mem[row + w * ab:row + (w + 1) * ab], "little")
                lanes = list(_lanes(hw, word))
                if w == wd - 1:       # the last data word: lanes past d are padding
                    lanes = [v if lane < ins.d - (wd - 1) * q else 0
                             for lane, v in enumerate(lanes)]
                last = w == row_words[which] - 1
                beats.append((which == "V", last, bool(ks) and which == "K" and last,
                               tuple(lanes)))
    return bursts, beats


def rtl_load(hw, mem: bytes, program: list[Instr], *, seed=0, p_stall=0.3, window=(0, 0),
             kv_window=(0, 0), errors=(), max_cycles=20_000):
    """Run ``program`` (load instructions, then END) through LoadEngine against a memory;
    returns the bursts, the K/V beats (v, last, sc, lanes), the beats' end flags, the Q beats,
    the Q commands, the push pulses, the error code (or None) and the AXI violations."""
    dut = LoadEngine(hw)
    rng = random.Random(seed + 1)
    lay = kv_beat_layout(hw)
    off = {n: lay[n].offset for n in ("v", "last", "sc", "end")}
    out = {"kv": [], "end": [], "q": [], "qcmd": [], "push": 0, "fail": None}
    axi = ReadMemory(dut, mem, hw.axi_data_bytes, seed=seed, p_stall=p_stall, errors=errors)

    def step(ctx):
        ctx.set(dut.k_free, hw.max_seq_len)     # the ring always has room: order alone
        ctx.set(dut.v_free, hw.max_seq_len)
        ctx.set(dut.win_base, window[0])
        ctx.set(dut.win_size, window[1])
        ctx.set(dut.kvwin_base, kv_window[0])
        ctx.set(dut.kvwin_size, kv_window[1])
        stall = {s: rng.random() < p_stall for s in ("q", "kv", "qcmd")}
        ctx.set(dut.q.ready, not stall["q"])
        ctx.set(dut.kv.ready, not stall["kv"])
        ctx.set(dut.qcmd.ready, not stall["qcmd"])
        if ctx.get(dut.qcmd.valid) and not stall["qcmd"]:
            out["qcmd"].append(ctx.get(dut.qcmd.payload.as_value()))
        if ctx.get(dut.kv.valid) and not stall["kv"]:
            raw = ctx.get(dut.kv.payload.as_value())
            word = raw & ((1 << (hw.data_bits * hw.macs_per_line)) - 1)
            out["kv"].append((bool(raw >> off["v"] & 1), bool(raw >> off["last"] & 1),
                              bool(raw >> off["sc"] & 1), _lanes(hw, word)))
            out["end"].append(bool(raw >> off["end"] & 1))
        if ctx.get(dut.q.valid) and not stall["q"]:
            out["q"].append(tuple(ctx.get(dut.q.payload[i]) for i in range(hw.macs_per_line)))
        out["push"] += ctx.get(dut.queue.push_next)

    run_engine(dut, [QueueFeeder(dut, program), axi], step, out, max_cycles=max_cycles)
    return axi.bursts, out, axi.violations


def _kv(hw, *, keys, d, kps, k_addr, v_addr, row_stride, key_scales=0, push=False):
    return Instr(Op.LOAD_KV, {"keys": keys, "d": d, "keys_per_step": kps, "k_addr": k_addr,
                              "v_addr": v_addr, "row_stride": row_stride,
                              "key_scales": key_scales}, push_next=push)


@pytest.mark.parametrize("keys, d, kps, ks, gap, seed", [
    (9, 8, 1, 0, 0, 1),        # contiguous rows, one key a step
    (10, 7, 4, 0, 0, 2),       # a short last block, a row of 7 in two words (one lane padded)
    (7, 12, 2, 1, 0, 3),       # each K row with its factor's word; V a word closer
    (6, 8, 2, 0, 8, 4),        # rows apart: one burst a row
    (5, 5, 1, 1, 12, 5),       # apart and with factors
])
def test_load_kv_is_the_shared_order(keys, d, kps, ks, gap, seed):
    hw = TINY
    ab = hw.axi_data_bytes
    stride = hw.k_row_elements(d, bool(ks)) * hw.element_bytes + gap
    k_addr = 4096 - 3 * stride        # the block straddles a 4 KB line
    v_addr = 8192 + 64
    ins = _kv(hw, keys=keys, d=d, kps=kps, k_addr=k_addr, v_addr=v_addr, row_stride=stride,
              key_scales=ks, push=True)
    mem = _image(16384, seed)
    bursts, out, violations = rtl_load(hw, mem, [ins, Instr(Op.END)], seed=seed)
    ref_bursts, ref_beats = ref_load_kv(hw, mem, ins)
    assert out["fail"] is None and violations == []
    assert bursts == ref_bursts
    assert out["kv"] == ref_beats
    # the instruction's end rides on its last beat only, and its push goes out once
    assert out["end"] == [False] * (len(ref_beats) - 1) + [True]
    assert out["push"] == 1
    assert all(a % ab == 0 for a, _ in bursts)


def test_load_kv_splits_at_256_beats():
    hw = C.replace(TINY, max_head_dim=64)
    d, keys = 64, 70                     # 16 words a row: 70 rows = 1120 beats of K
    stride = hw.row_elements(d) * hw.element_bytes
    ins = _kv(hw, keys=keys, d=d, kps=keys if keys <= 4 else 4, k_addr=0, v_addr=65536,
              row_stride=stride)
    mem = _image(65536 + keys * stride, 7)
    bursts, out, violations = rtl_load(hw, mem, [ins, Instr(Op.END)], seed=7, p_stall=0.1,
                                       max_cycles=60_000)
    assert out["fail"] is None and violations == []
    assert bursts == ref_load_kv(hw, mem, ins)[0]
    assert max(n for _, n in bursts) <= 256


def test_load_q_heads_and_row_words():
    hw = TINY
    d, rows, heads = 6, 3, 2
    wq = hw.q_row_elements(d, True) // hw.macs_per_line        # data words + multiplier
    ab = hw.axi_data_bytes
    ins = Instr(Op.LOAD_Q, {"rows": rows, "heads": heads, "d": d, "keys_per_step": 1,
                            "addr": 4096 - 2 * ab, "row_stride": wq * ab,
                            "head_stride": 200 * ab, "row_scales": 1}, push_next=True)
    mem = _image(16384, 9)
    bursts, out, violations = rtl_load(hw, mem, [ins, Instr(Op.END)], seed=9)
    assert out["fail"] is None and violations == []
    want = []
    for h in range(heads):
        want += [(a, n // ab) for a, n in axi_bursts(ins.addr + h * ins.head_stride,
                                                     rows * wq * ab, ab)]
    assert bursts == want
    words = [int.from_bytes(mem[a + i * ab:a + (i + 1) * ab], "little")
             for a, n in want for i in range(n)]
    assert out["q"] == [_lanes(hw, w) for w in words]     # Q words arrive whole
    assert len(out["qcmd"]) == 1 and out["push"] == 1


@pytest.mark.parametrize("which", ["kv", "q"])
def test_window_refuses_before_any_read(which):
    # LOAD_KV's transfers are held to the K/V window, LOAD_Q's to the read window; each
    # window alone decides its own loads (the other one set to everything)
    hw = TINY
    stride = hw.row_elements(8) * hw.element_bytes
    if which == "kv":
        ins = _kv(hw, keys=4, d=8, kps=1, k_addr=1024, v_addr=8192, row_stride=stride)
        wins = {"kv_window": (0, 4096), "window": (0, 1 << 20)}
    else:
        ins = Instr(Op.LOAD_Q, {"rows": 4, "heads": 1, "d": 8, "keys_per_step": 1, "addr": 1024,
                                "row_stride": stride * 4})
        wins = {"window": (0, 1024 + stride), "kv_window": (0, 1 << 20)}
    mem = _image(16384, 3)
    bursts, out, violations = rtl_load(hw, mem, [ins, Instr(Op.END)], **wins)
    assert out["fail"] == ErrorCode.ADDRESS_RANGE     # V (or Q's second row) lies outside
    end = wins["kv_window" if which == "kv" else "window"][1]
    assert all(a + n * hw.axi_data_bytes <= end for a, n in bursts)
    assert violations == []


def test_read_error_is_axi_read():
    hw = TINY
    stride = hw.row_elements(8) * hw.element_bytes
    ins = _kv(hw, keys=3, d=8, kps=1, k_addr=0, v_addr=4096, row_stride=stride)
    _, out, violations = rtl_load(hw, _image(8192, 4), [ins, Instr(Op.END)],
                                  errors=[(4096, 4104)])
    assert out["fail"] == ErrorCode.AXI_READ and violations == []


def test_instructions_back_to_back():
    # each instruction's data registers are loaded while the engine is idle, through copies
    # of its busy register (hw.ctrl.loadstep.idle_loads): a copy that missed an instruction's
    # end would keep the one before's fields, and the next one's bursts would repeat them
    hw = TINY
    ab = hw.axi_data_bytes
    s8 = hw.row_elements(8) * hw.element_bytes
    s7 = hw.k_row_elements(7, True) * hw.element_bytes
    kv1 = _kv(hw, keys=5, d=8, kps=2, k_addr=0, v_addr=2048, row_stride=s8)
    q = Instr(Op.LOAD_Q, {"rows": 2, "heads": 1, "d": 8, "keys_per_step": 1, "addr": 6144,
                          "row_stride": s8})
    kv2 = _kv(hw, keys=3, d=7, kps=1, k_addr=8192, v_addr=12288, row_stride=s7 + 4,
              key_scales=1, push=True)
    mem = _image(16384, 11)
    bursts, out, violations = rtl_load(hw, mem, [kv1, q, kv2, Instr(Op.END)], seed=11)
    assert out["fail"] is None and violations == []
    (b1, beats1), (b2, beats2) = ref_load_kv(hw, mem, kv1), ref_load_kv(hw, mem, kv2)
    bq = [(a, n // ab) for a, n in axi_bursts(q.addr, 2 * s8, ab)]
    assert bursts == b1 + bq + b2
    assert out["kv"] == beats1 + beats2
    assert len(out["q"]) == 2 * s8 // ab and len(out["qcmd"]) == 1 and out["push"] == 1
