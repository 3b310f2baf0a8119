"""ProgramFetch against the program format (contract.isa) and the decoder's model
(contract.program.decode_error): every instruction in order, with the error code the decoder
model gives it and rows·heads; bursts of at most a fetch chunk that never cross 4 KB; nothing
requested once END is in; under random AXI stalls with the AXI4 rules kept."""

import random

import pytest

from attenio.base import config as C
from attenio.base.errors import ErrorCode
from attenio.contract.isa import INSTR_BYTES, Instr, Op
from attenio.contract.program import decode_error
from attenio.contract.timing import TIMING
from attenio.hw.ctrl.fetch import ProgramFetch
from attenio.hw.ctrl.layouts import fetch_entry_layout

from ..helpers import simulate
from .axi_sim import ReadMemory

TINY = C.tiny()


def _program(n_tiles: int, seed: int) -> list[Instr]:
    rng = random.Random(seed)
    prog = []
    for t in range(n_tiles):
        rows = rng.randrange(1, 9)
        common = {"rows": rows, "heads": 1, "d": 16}
        prog += [Instr(Op.LOAD_Q, {**common, "keys_per_step": 1, "addr": 64 * t,
                                   "row_stride": 16, "head_stride": 16 * rows}),
                 Instr(Op.COMPUTE, {**common, "keys": rng.randrange(1, 100),
                                    "keys_per_step": 1, "c_m": 1234, "c_sh": 20}),
                 Instr(Op.FINALIZE, common),
                 Instr(Op.STORE_O, {**common, "addr": 4096 + 64 * t, "row_stride": 32,
                                    "head_stride": 32 * rows})]
    return prog + [Instr(Op.END)]


def rtl_fetch(hw, image: bytes, base: int, n: int, *, seed=0, p_stall=0.3, errors=(),
              max_cycles=20_000):
    """Fetch ``n`` instructions at ``base``; returns the entries (insn, bad, rh), the bursts,
    the error raised (or None) and the AXI violations."""
    dut = ProgramFetch(hw)
    rng = random.Random(seed + 1)
    lay = fetch_entry_layout()
    axi = ReadMemory(dut, image, hw.axi_data_bytes, seed=seed, p_stall=p_stall, errors=errors)
    got, fail = [], []

    async def tb(ctx):
        ctx.set(dut.prog_base, base)
        ctx.set(dut.prog_len, n)
        ctx.set(dut.go, 1)
        for _ in range(max_cycles):
            take = rng.random() >= p_stall
            ctx.set(dut.head.ready, take)
            axi.drive(ctx)
            if ctx.get(dut.fail):
                fail.append(ErrorCode(ctx.get(dut.fail_code)))
                return
            if take and ctx.get(dut.head.valid):
                raw = ctx.get(dut.head.payload.as_value())
                got.append(tuple((raw >> lay[f].offset) & ((1 << lay[f].shape.width) - 1)
                                 for f in ("insn", "bad", "rh")))
            axi.observe(ctx)
            await ctx.tick()
            ended = any(w & 0xF == Op.END for w, _, _ in got)
            if ctx.get(dut.exhausted) or (ended and ctx.get(dut.idle)
                                          and not ctx.get(dut.head.valid)):
                return
        raise AssertionError("the fetch did not finish")

    simulate(dut, tb)
    return got, axi.bursts, (fail[0] if fail else None), axi.violations


def ref_fetch(hw, prog: list[Instr]):
    """Each instruction up to END with the decoder model's verdict and rows·heads."""
    out = []
    for ins in prog:
        word = int.from_bytes(ins.encode(), "little")
        rh = ins.args.get("rows", 0) * ins.args.get("heads", 0)
        out.append((word, int(decode_error(word, hw)), rh))
        if ins.op == Op.END:
            break
    return out


@pytest.mark.parametrize("tiles, base, seed", [(3, 0, 1), (9, 4096 - 5 * INSTR_BYTES, 2)])
def test_fetch_delivers_the_program_in_order(tiles, base, seed):
    hw = TINY
    prog = _program(tiles, seed)
    extra = 3 * TIMING.fetch_buffer           # PROG_LEN past END: fetching stops at END
    image = bytes(base) + b"".join(i.encode() for i in prog) + bytes(extra * INSTR_BYTES)
    got, bursts, fail, violations = rtl_fetch(hw, image, base, len(prog) + extra, seed=seed)
    assert fail is None and violations == []
    want = ref_fetch(hw, prog)
    # what came in after END (bursts already in flight) is never dispatched: not checked
    assert got[:len(want)] == want
    ipb = INSTR_BYTES // hw.axi_data_bytes
    assert all(n <= TIMING.fetch_chunk * ipb and n % ipb == 0 for _, n in bursts)
    fetched = sum(n for _, n in bursts) // ipb
    # each instruction read once; after END only what was already in flight
    assert len(prog) <= fetched <= len(prog) + TIMING.fetch_buffer
    assert [a for a, _ in bursts] == sorted(a for a, _ in bursts)


def test_decode_errors_travel_with_their_instruction():
    hw = TINY
    prog = _program(2, 3)
    bad = [Instr(Op.COMPUTE, {"rows": 65, "heads": 1, "d": 16, "keys": 4,
                              "keys_per_step": 1}),                 # rows above tile_rows
           Instr(Op.LOAD_KV, {"keys": 0, "d": 8, "keys_per_step": 1}),  # no keys
           Instr(Op.STORE_O, {"rows": 1, "heads": 1, "d": 8, "addr": 2})]  # not beat aligned
    words = [b"".join(i.encode() for i in prog[:4]), *(i.encode() for i in bad),
             (0x0E).to_bytes(INSTR_BYTES, "little"),                        # illegal opcode
             b"".join(i.encode() for i in prog[4:])]
    image = b"".join(words)
    n = len(image) // INSTR_BYTES
    got, _, fail, violations = rtl_fetch(hw, image, 0, n, seed=4)
    assert fail is None and violations == []
    codes = [ErrorCode(b) for _, b, _ in got]
    assert codes[4:8] == [ErrorCode.FIELD_RANGE, ErrorCode.FIELD_RANGE,
                          ErrorCode.ADDRESS_RANGE, ErrorCode.ILLEGAL_OPCODE]
    assert all(c == ErrorCode.NONE for c in codes[:4] + codes[8:])
    for word, b, _ in got:
        assert b == decode_error(word, hw)


def test_misaligned_program_is_refused():
    _, bursts, fail, _ = rtl_fetch(TINY, bytes(4096), 16, 4)
    assert fail == ErrorCode.ADDRESS_RANGE and bursts == []


def test_read_error_is_axi_read():
    prog = _program(2, 5)
    image = b"".join(i.encode() for i in prog)
    _, _, fail, violations = rtl_fetch(TINY, image, 0, len(prog),
                                       errors=[(2 * INSTR_BYTES, 3 * INSTR_BYTES)])
    assert fail == ErrorCode.AXI_READ and violations == []
