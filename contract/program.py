"""The accelerator's program: instruction formats, binary encoding, validation (docs/isa.md).

Instructions are 256 bits (32 bytes, little-endian). The controller fetches them from DRAM and
dispatches each to one of three queues (load, compute, store) that run decoupled, synchronized
by dependency tokens as in TVM's VTA. This module is the single definition of the format: the
schedule generator emits with it, tests decode with it, and the RTL implements docs/isa.md,
which is written from the tables here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from attenio.config import HardwareConfig
from attenio.contract.progress import check_progress, check_regions
from attenio.errors import ConfigError, ErrorCode

INSTR_BYTES = 32
INSTR_BITS = INSTR_BYTES * 8
TOKEN_MAX = 15  # each token counter is 4 bits


class Op(IntEnum):
    ILLEGAL = 0x0  # all-zero memory decodes as an error, never as a no-op
    LOAD_Q = 0x1
    LOAD_KV = 0x2
    COMPUTE = 0x3
    FINALIZE = 0x4
    STORE_O = 0x5
    END = 0xF


QUEUE_OF = {Op.LOAD_Q: "load", Op.LOAD_KV: "load", Op.COMPUTE: "compute",
            Op.FINALIZE: "compute", Op.STORE_O: "store"}
QUEUES = ("load", "compute", "store")
# Neighbours in the token chain load ↔ compute ↔ store.
PREV = {"load": None, "compute": "load", "store": "compute"}
NEXT = {"load": "compute", "compute": "store", "store": None}


# Field layouts: name -> (lsb, width). Bits 0-7 are common to all instructions.
HEADER = {"opcode": (0, 4), "pop_prev": (4, 1), "pop_next": (5, 1), "push_prev": (6, 1),
          "push_next": (7, 1)}
LAYOUTS: dict[Op, dict[str, tuple[int, int]]] = {
    Op.LOAD_Q: {"rows": (16, 16), "heads": (32, 8), "d": (40, 12), "keys_per_step": (52, 8),
                "addr": (64, 48),
                "row_stride": (112, 32), "head_stride": (144, 32), "row_scales": (176, 1)},
    Op.LOAD_KV: {"keys": (16, 24), "d": (40, 12), "keys_per_step": (52, 8),
                 "k_addr": (64, 48), "v_addr": (112, 48), "row_stride": (160, 32),
                 "key_scales": (192, 1)},
    Op.COMPUTE: {"rows": (16, 16), "heads": (32, 8), "d": (40, 12), "causal": (52, 1),
                 "keys": (64, 24), "keys_per_step": (88, 8), "q_pos": (96, 24),
                 "diag": (120, 25), "c_m": (160, 24), "c_sh": (184, 6),
                "row_scales": (190, 1), "key_scales": (191, 1)},
    Op.FINALIZE: {"rows": (16, 16), "heads": (32, 8), "d": (40, 12)},
    Op.STORE_O: {"rows": (16, 16), "heads": (32, 8), "d": (40, 12), "addr": (64, 48),
                 "row_stride": (112, 32), "head_stride": (144, 32)},
    Op.END: {},
}
SIGNED = {"diag"}


@dataclass(frozen=True)
class Instr:
    """One instruction: an opcode, four token flags and the opcode's fields."""

    op: Op
    args: dict[str, int] = field(default_factory=dict)
    pop_prev: bool = False
    pop_next: bool = False
    push_prev: bool = False
    push_next: bool = False

    @property
    def queue(self) -> str | None:
        return QUEUE_OF.get(self.op)

    def __getattr__(self, name):  # fields read as attributes: instr.rows
        args = self.__dict__.get("args", {})
        if name in args:
            return args[name]
        raise AttributeError(name)

    def encode(self) -> bytes:
        layout = LAYOUTS[self.op]
        unknown = set(self.args) - set(layout)
        if unknown:
            raise ConfigError(f"{self.op.name}.{sorted(unknown)[0]} is invalid: not a field of "
                              f"{self.op.name} (fields: {', '.join(layout) or 'none'})")
        word = int(self.op)
        for flag in ("pop_prev", "pop_next", "push_prev", "push_next"):
            word |= int(bool(getattr(self, flag))) << HEADER[flag][0]
        for name, (lsb, width) in layout.items():
            value = int(self.args.get(name, 0))
            lo = -(1 << (width - 1)) if name in SIGNED else 0
            hi = (1 << (width - 1)) - 1 if name in SIGNED else (1 << width) - 1
            if not lo <= value <= hi:
                raise ConfigError(f"{self.op.name}.{name}={value} is invalid: the field holds "
                                  f"[{lo}, {hi}] ({width} bits)")
            word |= (value & ((1 << width) - 1)) << lsb
        return word.to_bytes(INSTR_BYTES, "little")


def encode(program: list[Instr]) -> bytes:
    """The program as the bytes the controller fetches."""
    return b"".join(i.encode() for i in program)


class ProgramError(ConfigError):
    """A malformed program; ``offset`` is the byte offset of the offending instruction."""

    def __init__(self, offset: int, code: ErrorCode, reason: str):
        super().__init__(f"program offset {offset} (instruction {offset // INSTR_BYTES}): "
                         f"{code.name}: {reason}")
        self.offset = offset
        self.code = code


def decode(data: bytes) -> list[Instr]:
    """Decode a program, rejecting bad bytes with the offset and the reason (as the hardware
    would: illegal opcodes, reserved bits, no END)."""
    if len(data) % INSTR_BYTES:
        raise ProgramError(len(data) - len(data) % INSTR_BYTES, ErrorCode.PROGRAM_OVERRUN,
                           f"length {len(data)} is not a multiple of {INSTR_BYTES} bytes")
    out = []
    for off in range(0, len(data), INSTR_BYTES):
        word = int.from_bytes(data[off:off + INSTR_BYTES], "little")
        code = word & 0xF
        try:
            op = Op(code)
        except ValueError:
            op = Op.ILLEGAL
        if op == Op.ILLEGAL:
            raise ProgramError(off, ErrorCode.ILLEGAL_OPCODE, f"opcode {code:#x}")
        layout = LAYOUTS[op]
        used = 0xFF
        args = {}
        for name, (lsb, width) in layout.items():
            used |= ((1 << width) - 1) << lsb
            v = (word >> lsb) & ((1 << width) - 1)
            if name in SIGNED and v >> (width - 1):
                v -= 1 << width
            args[name] = v
        if word & ~used:
            raise ProgramError(off, ErrorCode.RESERVED_BITS,
                               f"reserved bits set in {op.name}: {word & ~used:#x}")
        flags = {f: bool((word >> HEADER[f][0]) & 1)
                 for f in ("pop_prev", "pop_next", "push_prev", "push_next")}
        out.append(Instr(op, args, **flags))
        if op == Op.END:
            if off + INSTR_BYTES != len(data):
                raise ProgramError(off + INSTR_BYTES, ErrorCode.PROGRAM_OVERRUN,
                                   "bytes after END")
            return out
    raise ProgramError(len(data), ErrorCode.PROGRAM_OVERRUN, "no END instruction")


def validate(program: list[Instr], hw: HardwareConfig, *, rtl: bool = True,
             prog_region: tuple[int, int] | None = None) -> None:
    """Check fields against the hardware and token usage as the controller does, that the
    program cannot deadlock (:func:`attenio.contract.progress.check_progress`) and that no
    ``STORE_O`` writes over bytes the program reads (its inputs, or the program itself at
    ``prog_region = (base, bytes)``); raise :class:`ProgramError` for the first violation
    (offset of the instruction at fault).

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
        if ins.op in (Op.LOAD_Q, Op.COMPUTE, Op.FINALIZE, Op.STORE_O):
            if not 1 <= ins.rows * ins.heads <= hw.tile_rows:
                fail(k, ErrorCode.FIELD_RANGE, f"rows×heads={ins.rows * ins.heads} outside "
                     f"[1, {hw.tile_rows}] (tile_rows)")
        if not 1 <= ins.d <= hw.max_head_dim:
            fail(k, ErrorCode.FIELD_RANGE, f"d={ins.d} outside [1, {hw.max_head_dim}]")
        if ins.op in (Op.LOAD_KV, Op.COMPUTE):
            if ins.keys < (1 if ins.op == Op.LOAD_KV else 0):
                fail(k, ErrorCode.FIELD_RANGE, "LOAD_KV with keys=0")
            kps = ins.keys_per_step
            if not 1 <= kps <= max(1, hw.kv_ring_depth // 2) or (rtl and kps & (kps - 1)):
                fail(k, ErrorCode.FIELD_RANGE, f"keys_per_step={kps}: a power of two in "
                     f"[1, {max(1, hw.kv_ring_depth // 2)}] (half the K/V ring)")
            if rtl and kps > hw.max_keys_per_step:
                fail(k, ErrorCode.FIELD_RANGE, f"keys_per_step={kps} above max_keys_per_step "
                     f"({hw.max_keys_per_step})")
            if (rtl and ins.op == Op.COMPUTE and kps > 1
                    and ins.rows * ins.heads * kps > hw.mac_lines):
                fail(k, ErrorCode.FIELD_RANGE, f"keys_per_step={kps} with "
                     f"{ins.rows * ins.heads} rows needs rows·keys_per_step ≤ mac_lines "
                     f"({hw.mac_lines})")
        if ins.op in (Op.LOAD_Q, Op.STORE_O, Op.LOAD_KV):
            for a in ("addr", "k_addr", "v_addr", "row_stride", "head_stride"):
                if a in ins.args and ins.args[a] % eb:
                    fail(k, ErrorCode.ADDRESS_RANGE, f"{a}={ins.args[a]} not a multiple of "
                         f"the element size {eb}")
        if ins.op == Op.COMPUTE and ins.causal and ins.heads > 1 and ins.rows < hw.mac_lines:
            fail(k, ErrorCode.FIELD_RANGE, f"causal COMPUTE with heads > 1 and rows={ins.rows} "
                 f"< mac_lines ({hw.mac_lines}): the causal mask of packed heads needs each "
                 "head's rows to fill a row group")
        if ins.op == Op.COMPUTE and ins.c_sh > 62:
            fail(k, ErrorCode.FIELD_RANGE, f"c_sh={ins.c_sh} above 62")
        rs = ins.args.get("row_scales", 0)
        if rs and not hw.row_scales_supported:
            fail(k, ErrorCode.FIELD_RANGE, f"row_scales=1: a word of {hw.macs_per_line} "
                 f"elements cannot hold a {hw.numerics.scale_mult_bits + 6}-bit multiplier")
        if ins.args.get("key_scales", 0) and not hw.key_scales_supported:
            fail(k, ErrorCode.FIELD_RANGE, f"key_scales=1: a word of {hw.macs_per_line} "
                 f"elements cannot hold a {hw.numerics.scale_mult_bits + 6}-bit K factor")
        if (ins.op == Op.LOAD_KV and ins.args.get("key_scales", 0)
                and ins.row_stride < hw.k_row_elements(ins.d, True) * eb):
            fail(k, ErrorCode.FIELD_RANGE, f"row_stride={ins.row_stride} with key_scales: "
                 f"below a K row with its factor's word "
                 f"({hw.k_row_elements(ins.d, True) * eb} bytes)")
        if ins.op == Op.LOAD_Q:
            pending_q.append(rs)
        if ins.op == Op.COMPUTE and pending_q and pending_q.pop(0) != rs:
            fail(k, ErrorCode.FIELD_RANGE, f"COMPUTE row_scales={rs} differs from its "
                 "LOAD_Q's (the per-row multipliers come with the Q rows)")
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
            if (kv.keys, kv.d, kv.keys_per_step) != (ins.keys, ins.d, ins.keys_per_step):
                fail(k, ErrorCode.FIELD_RANGE, "COMPUTE keys/d/keys_per_step differ from its "
                     "LOAD_KV's")
            if kv.args.get("key_scales", 0) != ins.args.get("key_scales", 0):
                fail(k, ErrorCode.FIELD_RANGE, "COMPUTE key_scales differs from its LOAD_KV's "
                     "(the per-key factors come with the K rows)")
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


def decode_error(word: int, hw: HardwareConfig) -> ErrorCode:
    """The error the controller's decoder reports for one instruction ``word`` (an integer of
    ``INSTR_BITS``), ``ErrorCode.NONE`` when it passes (docs/isa.md, "Errors"). The first
    failing check names it: opcode, reserved bits, field ranges, alignment to the AXI beat,
    token flags towards a neighbour the queue does not have."""
    code = word & 0xF
    if code not in {int(o) for o in Op} or code == Op.ILLEGAL:
        return ErrorCode.ILLEGAL_OPCODE
    op = Op(code)
    layout = LAYOUTS[op]
    used = 0xFF
    f = {}
    for name, (lsb, width) in layout.items():
        used |= ((1 << width) - 1) << lsb
        f[name] = (word >> lsb) & ((1 << width) - 1)
    if word & ~used & ((1 << INSTR_BITS) - 1):
        return ErrorCode.RESERVED_BITS
    if op == Op.END:
        return ErrorCode.NONE
    rh = f.get("rows", 0) * f.get("heads", 0)
    bad_range = [not 1 <= f["d"] <= hw.max_head_dim]
    if "rows" in layout:
        bad_range.append(not 1 <= rh <= hw.tile_rows)
    if "keys" in layout:
        bad_range.append(f["keys"] > hw.max_seq_len or (op == Op.LOAD_KV and f["keys"] == 0))
    if "keys_per_step" in layout:
        kps = f["keys_per_step"]
        bad_range.append(kps == 0 or kps & (kps - 1) != 0 or kps > hw.max_keys_per_step)
        if op != Op.LOAD_KV:
            bad_range.append(kps > 1 and kps & (kps - 1) == 0 and rh * kps > hw.mac_lines)
    if "row_scales" in layout:
        bad_range.append(f["row_scales"] == 1 and not hw.row_scales_supported)
    if "key_scales" in layout:
        bad_range.append(f["key_scales"] == 1 and not hw.key_scales_supported)
    if op == Op.COMPUTE:
        bad_range += [f["c_sh"] > 62,
                      f["causal"] == 1 and f["heads"] > 1 and f["rows"] < hw.mac_lines]
    if any(bad_range):
        return ErrorCode.FIELD_RANGE
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


def field_table(op: Op) -> list[tuple[str, int, int]]:
    """(name, lsb, width) rows of an opcode's format, header included (for docs/isa.md)."""
    rows = [(n, lsb, w) for n, (lsb, w) in HEADER.items()]
    rows += [(n, lsb, w) for n, (lsb, w) in LAYOUTS[op].items()]
    return rows


__all__ = [
    "INSTR_BYTES", "TOKEN_MAX", "Op", "ErrorCode", "Instr", "encode", "decode", "validate",
    "ProgramError", "QUEUE_OF", "LAYOUTS", "field_table", "decode_error",
]
