"""InstructionDecoder against the program format's model of it (contract.program.decode_error)."""

import random

import pytest
from amaranth.sim import Simulator

from attenio.base import config as C
from attenio.base.errors import ErrorCode
from attenio.contract.program import INSTR_BITS, LAYOUTS, Instr, Op, decode_error
from attenio.hw.ctrl.decode import InstructionDecoder
from attenio.sim.schedule import schedule


def rows_heads(word: int) -> int:
    return ((word >> 16) & 0xFFFF) * ((word >> 32) & 0xFF)


def rtl_decode(hw, words):
    dut = InstructionDecoder(hw)
    out = []

    async def tb(ctx):
        for w in words:
            ctx.set(dut.raw, w)
            ctx.set(dut.rows_heads, rows_heads(w))
            out.append(ErrorCode(ctx.get(dut.bad)))

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()
    return out


def ref_decode(hw, words):
    return [decode_error(w, hw) for w in words]


def mutations(hw, seed, n):
    """Good instructions of real programs, then each with one field or bit changed."""
    rng = random.Random(seed)
    good = []
    for wl in (C.Workload.square(40, 16), C.Workload(seq_q=24, seq_k=60, head_dim=8, heads=4,
                                                    kv_heads=2, causal=True),
               C.Workload(seq_q=70, seq_k=90, head_dim=8, window_left=9, window_right=3)):
        good += [int.from_bytes(i.encode(), "little") for i in schedule(hw, wl).program]
    words = list(good)
    for _ in range(n):
        w = rng.choice(good)
        op = Op(w & 0xF)
        kind = rng.random()
        if kind < 0.5 and LAYOUTS[op]:
            name, (lsb, width) = rng.choice(list(LAYOUTS[op].items()))
            value = rng.choice([0, 1, 2, 3, 4, 63, 64, rng.getrandbits(width)]) % (1 << width)
            w = (w & ~(((1 << width) - 1) << lsb)) | (value << lsb)
        elif kind < 0.65:
            w ^= 1 << rng.randrange(4, 8)        # a token flag
        elif kind < 0.85:
            w ^= 1 << rng.randrange(INSTR_BITS)
        else:
            w = (w & ~0xF) | rng.randrange(16)
        words.append(w)
    return words


@pytest.mark.parametrize("preset", ["tiny", "fpga"])
def test_decoder_matches_the_model(preset):
    hw = C.preset(preset)
    words = mutations(hw, seed=7, n=400)
    ref = ref_decode(hw, words)
    assert rtl_decode(hw, words) == ref
    # the cases reach every error the decoder can report
    assert {ErrorCode.NONE, ErrorCode.ILLEGAL_OPCODE, ErrorCode.RESERVED_BITS,
            ErrorCode.FIELD_RANGE, ErrorCode.ADDRESS_RANGE, ErrorCode.TOKEN_UNDERFLOW,
            ErrorCode.TOKEN_OVERFLOW} <= set(ref)


def test_a_queue_without_a_neighbour_refuses_its_flags():
    hw = C.tiny()
    base = {"rows": 1, "heads": 1, "d": 8, "addr": 0, "row_stride": 16, "head_stride": 16}
    words = [int.from_bytes(Instr(op, dict(base, keys_per_step=1) if op == Op.LOAD_Q
                                  else dict(base), **{flag: True}).encode(), "little")
             for op, flag in ((Op.LOAD_Q, "pop_prev"), (Op.LOAD_Q, "push_prev"),
                              (Op.STORE_O, "pop_next"), (Op.STORE_O, "push_next"),
                              (Op.LOAD_Q, "push_next"))]
    assert rtl_decode(hw, words) == [ErrorCode.TOKEN_UNDERFLOW, ErrorCode.TOKEN_OVERFLOW,
                                     ErrorCode.TOKEN_UNDERFLOW, ErrorCode.TOKEN_OVERFLOW,
                                     ErrorCode.NONE]


def test_windowed_packed_heads_need_a_row_group_each():
    hw = C.tiny()
    args = {"rows": 2, "heads": 2, "d": 8, "keys": 4, "keys_per_step": 1, "q_pos": 0,
            "diag": 0, "causal": 0, "window": 1, "win_diag": -2, "c_m": 1, "c_sh": 1}
    words = [int.from_bytes(Instr(Op.COMPUTE, a).encode(), "little")
             for a in (args, {**args, "window": 0}, {**args, "heads": 1, "rows": 4})]
    assert ref_decode(hw, words) == [ErrorCode.FIELD_RANGE, ErrorCode.NONE, ErrorCode.NONE]
    assert rtl_decode(hw, words) == ref_decode(hw, words)
