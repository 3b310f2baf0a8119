"""Whole-program checks (docs/isa.md): what the controller's decoder refuses, token balance,
deadlock freedom and the regions a program writes.

The instruction format itself is :mod:`attenio.contract.isa`; its names are re-exported here.
"""

from __future__ import annotations

from attenio.base.config import HardwareConfig
from attenio.base.errors import ErrorCode
from attenio.contract.isa import (
    HEADER,
    INSTR_BITS,
    INSTR_BYTES,
    LAYOUTS,
    NEXT,
    PREV,
    QUEUE_OF,
    QUEUES,
    SIGNED,
    TOKEN_MAX,
    Instr,
    Op,
    ProgramError,
    d_v_of,
    decode,
    encode,
    field_error,
    field_table,
    fields_of,
)
from attenio.contract.progress import check_kv_region, check_progress, check_regions


def validate(program: list[Instr], hw: HardwareConfig, *, rtl: bool = True,
             prog_region: tuple[int, int] | None = None,
             kv_region: tuple[int, int] | None = None) -> None:
    """Check fields against the hardware and token usage as the controller does, that the
    program cannot deadlock (:func:`attenio.contract.progress.check_progress`), that no
    ``STORE_O`` writes over bytes the program reads (its inputs, or the program itself at
    ``prog_region = (base, bytes)``) and, given ``kv_region = (base, bytes)`` (what the host
    sets the K/V window to), that every ``LOAD_KV`` reads inside it; raise
    :class:`ProgramError` for the first violation (offset of the instruction at fault).

    Token rule: pushes happen when an instruction ends, pops when it starts; a pop whose
    producer queue has reached END with the counter at zero is an underflow, a push to a
    counter at ``TOKEN_MAX`` an overflow. Statically, with queues running decoupled, that is
    checked on the counts in program order (a valid program never depends on timing).
    ``rtl=False`` skips the limits of this RTL's step geometry (a power-of-two
    ``keys_per_step`` whose keys fit the MAC lines), for baseline dataflows that only the
    model runs.
    """
    tokens = {(a, b): 0 for a in QUEUES for b in QUEUES if a != b}
    pending_kv: list[Instr] = []
    pending_q: list[int] = []      # row_scales of the LOAD_Qs no COMPUTE has used yet
    eb = hw.element_bytes

    def fail(k, code, why):
        raise ProgramError(k * INSTR_BYTES, code, why)

    for k, ins in enumerate(program):
        if ins.op == Op.END:
            if k != len(program) - 1:
                fail(k, ErrorCode.PROGRAM_OVERRUN, "instructions after END")
            break
        q = ins.queue
        why = field_error(ins.op, {n: ins.args.get(n, 0) for n in LAYOUTS[ins.op]}, hw, rtl)
        if why:
            fail(k, ErrorCode.FIELD_RANGE, why)
        if ins.op in (Op.LOAD_Q, Op.STORE_O, Op.LOAD_KV):
            for a in ("addr", "k_addr", "v_addr", "row_stride", "head_stride"):
                if a in ins.args and ins.args[a] % eb:
                    fail(k, ErrorCode.ADDRESS_RANGE, f"{a}={ins.args[a]} not a multiple of "
                         f"the element size {eb}")
        rs = ins.args.get("row_scales", 0)
        # a host-side check the decoder has no field for: K rows and their words must fit
        # (a paged cache packs them by page: contract/fieldrules.py, page_factors)
        if (ins.op == Op.LOAD_KV and ins.args.get("key_scales", 0)
                and not ins.args.get("paged", 0)
                and ins.row_stride < hw.k_row_elements(ins.d, True) * eb):
            fail(k, ErrorCode.FIELD_RANGE, f"row_stride={ins.row_stride} with key_scales: "
                 f"below a K row with its factor's word "
                 f"({hw.k_row_elements(ins.d, True) * eb} bytes)")
        sk = ins.args.get("sinks", 0)
        al = ins.args.get("alibi", 0)
        if ins.op == Op.LOAD_Q:
            pending_q.append((rs, sk, al))
        if ins.op == Op.COMPUTE and pending_q and not ins.args.get("cont", 0):
            q_rs, q_sk, q_al = pending_q.pop(0)
            if q_rs != rs:
                fail(k, ErrorCode.FIELD_RANGE, f"COMPUTE row_scales={rs} differs from its "
                     "LOAD_Q's (the per-row multipliers come with the Q rows)")
            if q_sk != sk:
                fail(k, ErrorCode.FIELD_RANGE, f"COMPUTE sinks={sk} differs from its "
                     "LOAD_Q's (the rows' sinks come with the Q rows)")
            if q_al != al:
                fail(k, ErrorCode.FIELD_RANGE, f"COMPUTE alibi={al} differs from its "
                     "LOAD_Q's (the rows' ALiBi slopes come with the Q rows)")
        # pops at start
        for flag, other in (("pop_prev", PREV[q]), ("pop_next", NEXT[q])):
            if getattr(ins, flag):
                if other is None:
                    fail(k, ErrorCode.TOKEN_UNDERFLOW, f"{q} queue has no {flag[4:]} neighbour")
                if tokens[(other, q)] == 0:
                    fail(k, ErrorCode.TOKEN_UNDERFLOW, f"{ins.op.name} pops a {other}→{q} "
                         "token that no earlier instruction pushed")
                tokens[(other, q)] -= 1
        if ins.op == Op.LOAD_KV:
            pending_kv.append(ins)
        if ins.op == Op.COMPUTE and ins.keys > 0:
            if not pending_kv:
                fail(k, ErrorCode.FIELD_RANGE, "COMPUTE without a LOAD_KV feeding it")
            kv = pending_kv.pop(0)
            if ((kv.keys, kv.d, d_v_of(kv), kv.keys_per_step)
                    != (ins.keys, ins.d, d_v_of(ins), ins.keys_per_step)):
                fail(k, ErrorCode.FIELD_RANGE, "COMPUTE keys/d/dv/keys_per_step differ from "
                     "its LOAD_KV's")
            for f_, rows in (("key_scales", "K"), ("value_scales", "V")):
                if kv.args.get(f_, 0) != ins.args.get(f_, 0):
                    fail(k, ErrorCode.FIELD_RANGE, f"COMPUTE {f_} differs from its LOAD_KV's "
                         f"(the per-key factors come with the {rows} rows)")
        for flag, other in (("push_prev", PREV[q]), ("push_next", NEXT[q])):
            if getattr(ins, flag):
                if other is None:
                    fail(k, ErrorCode.TOKEN_OVERFLOW, f"{q} queue has no {flag[5:]} neighbour")
                if tokens[(q, other)] >= TOKEN_MAX:
                    fail(k, ErrorCode.TOKEN_OVERFLOW, f"{q}→{other} token counter full")
                tokens[(q, other)] += 1
    else:
        raise ProgramError(len(program) * INSTR_BYTES, ErrorCode.PROGRAM_OVERRUN,
                           "no END instruction")
    if pending_kv:
        raise ProgramError((len(program) - 1) * INSTR_BYTES, ErrorCode.FIELD_RANGE,
                           "LOAD_KV with no COMPUTE consuming it")
    check_progress(program, fail)
    check_regions(program, hw, fail, prog_region)
    if kv_region is not None:
        check_kv_region(program, hw, fail, kv_region)


def decode_error(word: int, hw: HardwareConfig) -> ErrorCode:
    """The error the controller's decoder reports for one instruction ``word`` (an integer of
    ``INSTR_BITS``), ``ErrorCode.NONE`` when it passes (docs/isa.md, "Errors"). The first
    failing check names it: opcode, reserved bits, field ranges, alignment to the AXI beat,
    token flags towards a neighbour the queue does not have."""
    op, f, reserved = fields_of(word)
    if op == Op.ILLEGAL:
        return ErrorCode.ILLEGAL_OPCODE
    if reserved:
        return ErrorCode.RESERVED_BITS
    if op == Op.END:
        return ErrorCode.NONE
    if field_error(op, f, hw):
        return ErrorCode.FIELD_RANGE
    layout = LAYOUTS[op]
    if any(f[n] % hw.axi_data_bytes for n in layout if n.endswith(("addr", "stride"))):
        return ErrorCode.ADDRESS_RANGE
    q = QUEUE_OF[op]
    for side, nbr in (("prev", PREV), ("next", NEXT)):
        if nbr[q] is None:
            if (word >> HEADER[f"pop_{side}"][0]) & 1:
                return ErrorCode.TOKEN_UNDERFLOW
            if (word >> HEADER[f"push_{side}"][0]) & 1:
                return ErrorCode.TOKEN_OVERFLOW
    return ErrorCode.NONE


__all__ = [
    "INSTR_BYTES", "INSTR_BITS", "TOKEN_MAX", "Op", "ErrorCode", "Instr", "encode", "decode",
    "validate", "ProgramError", "QUEUE_OF", "QUEUES", "PREV", "NEXT", "HEADER", "LAYOUTS",
    "SIGNED", "field_table", "decode_error",
]
