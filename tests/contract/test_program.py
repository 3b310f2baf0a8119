"""Program format: encoding round trip, decode errors with offsets, validation rules."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.contract import program as P
from attenio.sim.schedule import schedule

HW = C.tiny()


def prog():
    return schedule(HW, C.Workload(seq_q=150, seq_k=100, head_dim=16, causal=True),
                    keep_spans=False).program


def test_round_trip():
    p = prog()
    data = P.encode(p)
    assert len(data) == len(p) * P.INSTR_BYTES
    assert P.decode(data) == p
    P.validate(p, HW)


def test_program_length_is_linear_in_tiles():
    for n in (64, 640, 6400 // 2):
        wl = C.Workload.square(n, 16)
        p = schedule(HW, wl, keep_spans=False).program
        tiles = -(-n // HW.tile_rows)
        assert len(p) == 5 * tiles + 1


def test_decode_rejects_bad_bytes_with_offset():
    good = P.encode(prog())
    with pytest.raises(P.ProgramError, match=r"offset 64 .*ILLEGAL_OPCODE: opcode 0x7"):
        P.decode(good[:64] + bytes([0x07]) + good[65:])
    with pytest.raises(P.ProgramError, match=r"offset 0 .*ILLEGAL_OPCODE: opcode 0x0"):
        P.decode(bytes(32) + good)
    bad = bytearray(good)
    bad[32 + 1] = 0xFF  # header reserved byte of instruction 1
    with pytest.raises(P.ProgramError, match=r"offset 32 .*RESERVED_BITS"):
        P.decode(bytes(bad))
    with pytest.raises(P.ProgramError, match=r"PROGRAM_OVERRUN: no END"):
        P.decode(good[:-32])
    with pytest.raises(P.ProgramError, match=r"not a multiple of 32"):
        P.decode(good[:-5])
    with pytest.raises(P.ProgramError, match=r"bytes after END"):
        P.decode(good + good[:32])


def test_field_overflow_is_refused_at_encode():
    with pytest.raises(C.ConfigError, match=r"LOAD_Q.rows=70000 .*\[0, 65535\]"):
        P.Instr(P.Op.LOAD_Q, {"rows": 70000}).encode()
    with pytest.raises(C.ConfigError, match=r"COMPUTE.diag="):
        P.Instr(P.Op.COMPUTE, {"diag": 1 << 30}).encode()
    with pytest.raises(C.ConfigError, match=r"not a field of FINALIZE"):
        P.Instr(P.Op.FINALIZE, {"keys": 3}).encode()


def _replace(p, k, **kw):
    ins = p[k]
    args = {**ins.args, **{n: v for n, v in kw.items() if n in ins.args}}
    flags = {f: kw.get(f, getattr(ins, f)) for f in ("pop_prev", "pop_next", "push_prev",
                                                     "push_next")}
    return p[:k] + [P.Instr(ins.op, args, **flags)] + p[k + 1:]


def test_validate_token_rules():
    p = prog()
    # the second LOAD_Q pops a compute→load token: take away the push that feeds it
    k_comp = next(i for i, x in enumerate(p) if x.op == P.Op.COMPUTE)
    with pytest.raises(P.ProgramError, match=r"TOKEN_UNDERFLOW"):
        P.validate(_replace(p, k_comp, push_prev=False), HW)
    k_store = next(i for i, x in enumerate(p) if x.op == P.Op.STORE_O)
    with pytest.raises(P.ProgramError, match=r"TOKEN_UNDERFLOW: store queue has no next"):
        P.validate(_replace(p, k_store, pop_next=True), HW)
    # sixteen pushes with no pop overflow a 4-bit counter
    flood = [P.Instr(P.Op.FINALIZE, {"rows": 1, "heads": 1, "d": 8}, push_next=True)] * 16
    with pytest.raises(P.ProgramError, match=r"offset 480 .*TOKEN_OVERFLOW"):
        P.validate(flood + [P.Instr(P.Op.END)], HW)


def test_validate_fields_against_hardware():
    p = prog()
    k = next(i for i, x in enumerate(p) if x.op == P.Op.LOAD_Q)
    with pytest.raises(P.ProgramError, match=r"FIELD_RANGE: rows×heads=65"):
        P.validate(_replace(p, k, rows=65), HW)
    with pytest.raises(P.ProgramError, match=r"FIELD_RANGE: d=65"):
        P.validate(_replace(p, k, d=65), HW)
    kv = next(i for i, x in enumerate(p) if x.op == P.Op.LOAD_KV)
    with pytest.raises(P.ProgramError, match=r"differ from its LOAD_KV"):
        P.validate(_replace(p, kv, keys=p[kv].keys - 1), HW)
    with pytest.raises(P.ProgramError, match=r"no END"):
        P.validate(p[:-1], HW)


def test_row_scales_must_agree_and_fit_a_word():
    """A tile's COMPUTE takes per-row multipliers only if its LOAD_Q brought them, and only a
    config whose word holds ``c_m`` and ``c_sh`` can carry them (validate and the decoder)."""
    p = prog()
    k = next(i for i, x in enumerate(p) if x.op == P.Op.LOAD_Q)
    with pytest.raises(P.ProgramError, match=r"FIELD_RANGE: COMPUTE row_scales=0 differs"):
        P.validate(_replace(p, k, row_scales=1), HW)
    c = next(i for i, x in enumerate(p) if x.op == P.Op.COMPUTE)
    with pytest.raises(P.ProgramError, match=r"FIELD_RANGE: COMPUTE row_scales=1 differs"):
        P.validate(_replace(p, c, row_scales=1), HW)
    narrow = C.replace(HW, macs_per_line=2)            # 16-bit words: no room for 22 bits
    assert HW.row_scales_supported and not narrow.row_scales_supported
    word = int.from_bytes(P.Instr(P.Op.LOAD_Q, {**p[k].args, "row_scales": 1}).encode(),
                          "little")
    assert P.decode_error(word, HW) == P.ErrorCode.NONE
    assert P.decode_error(word, narrow) == P.ErrorCode.FIELD_RANGE
    with pytest.raises(P.ProgramError, match=r"row_scales=1: a word of 2 elements"):
        P.validate(_replace(p, k, row_scales=1), narrow)


def test_per_row_program_reads_one_more_word_per_q_row():
    from attenio.model import numerics as nm

    wl = C.Workload(seq_q=150, seq_k=100, head_dim=16, causal=True)
    rows = nm.softmax_scale_rows(HW, np.linspace(0.01, 0.02, 150), 0.01, 16)
    a = schedule(HW, wl, keep_spans=False)
    b = schedule(HW, wl, keep_spans=False, scale=rows)
    lq = [i for i in b.program if i.op == P.Op.LOAD_Q]
    assert all(i.row_scales == 1 and i.row_stride == 20 for i in lq)
    assert all(i.row_scales == 1 for i in b.program if i.op == P.Op.COMPUTE)
    assert b.read_bytes - a.read_bytes == 150 * HW.macs_per_line * HW.element_bytes
    P.validate(b.program, HW)


def test_key_scales_must_agree_and_fit_a_word():
    """A tile's COMPUTE applies per-key factors only if its LOAD_KV brought them, and only a
    config whose word holds ``k_m`` and ``k_e`` can carry them (validate and the decoder)."""
    p = prog()
    k = next(i for i, x in enumerate(p) if x.op == P.Op.LOAD_KV)
    with pytest.raises(P.ProgramError, match=r"FIELD_RANGE: COMPUTE key_scales differs"):
        P.validate(_replace(p, k, key_scales=1, row_stride=p[k].row_stride + 4), HW)
    c = next(i for i, x in enumerate(p) if x.op == P.Op.COMPUTE and x.keys)
    with pytest.raises(P.ProgramError, match=r"FIELD_RANGE: COMPUTE key_scales differs"):
        P.validate(_replace(p, c, key_scales=1), HW)
    narrow = C.replace(HW, macs_per_line=2)            # 16-bit words: no room for 22 bits
    assert HW.key_scales_supported and not narrow.key_scales_supported
    for i in (k, c):
        word = int.from_bytes(P.Instr(p[i].op, {**p[i].args, "key_scales": 1}).encode(),
                              "little")
        assert P.decode_error(word, HW) == P.ErrorCode.NONE
        assert P.decode_error(word, narrow) == P.ErrorCode.FIELD_RANGE
    with pytest.raises(P.ProgramError, match=r"key_scales=1: a word of 2 elements"):
        P.validate(_replace(_replace(p, k, key_scales=1, row_stride=p[k].row_stride + 4), c,
                            key_scales=1), narrow)


def test_per_key_program_reads_one_more_word_per_kv_row():
    """With per-key K factors every K row read is one word longer; V rows are not, and
    nothing else moves."""
    from attenio.model import numerics as nm

    wl = C.Workload(seq_q=150, seq_k=100, head_dim=16, causal=True)
    sp = nm.softmax_scale(HW, 0.01, 0.02, 16)
    keyed = nm.ScaleParams(sp.c_m, sp.c_sh, np.full(100, 1 << 15), np.zeros(100, dtype=int))
    a = schedule(HW, wl, keep_spans=False)
    b = schedule(HW, wl, keep_spans=False, scale=keyed)
    lkv = [i for i in b.program if i.op == P.Op.LOAD_KV]
    assert all(i.key_scales == 1 and i.row_stride == 20 for i in lkv)
    assert all(i.key_scales == 1 for i in b.program if i.op == P.Op.COMPUTE and i.keys)
    word = HW.macs_per_line * HW.element_bytes
    assert b.read_bytes - a.read_bytes == sum(i.keys for i in lkv) * word
    assert b.write_bytes == a.write_bytes
    P.validate(b.program, HW)
    k = next(i for i, x in enumerate(b.program) if x.op == P.Op.LOAD_KV)
    with pytest.raises(P.ProgramError, match=r"row_stride=16 with key_scales: below a K row"):
        P.validate(_replace(b.program, k, row_stride=16), HW)


def test_register_fields_from_the_table():
    from attenio.base import config as C
    from attenio.base.errors import ErrorCode
    from attenio.contract import registers as R

    hw = C.tiny()
    regs = R.python_map(hw)
    assert R.pack_fields(regs["CTRL"], START=1) == 1 and R.pack_fields(regs["CTRL"], ABORT=1) == 2
    st = R.status_fields(hw, (int(ErrorCode.AXI_READ) << 8) | 2)
    assert st == {"busy": False, "done": True, "start_refused": False,
                  "error": ErrorCode.AXI_READ}
    with pytest.raises(C.ConfigError, match="START=2"):
        R.pack_fields(regs["CTRL"], START=2)
