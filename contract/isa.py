"""The instruction set: formats, binary encoding and decoding, and the field checks the
controller's decoder applies (docs/isa.md is written from the tables here).

Instructions are 256 bits (32 bytes, little-endian). The controller fetches them from DRAM and
dispatches each to one of three queues (load, compute, store) that run decoupled, synchronized
by dependency tokens as in TVM's VTA. The schedule generator emits with this module, tests
decode with it, and the RTL's layouts (hw/ctrl/layouts.py) are derived from its tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from types import SimpleNamespace

from attenio.base.config import HardwareConfig
from attenio.base.errors import ConfigError, ErrorCode
from attenio.contract.fieldrules import check

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
                "row_stride": (112, 32), "head_stride": (144, 32), "row_scales": (176, 1),
                "sinks": (177, 1), "alibi": (178, 1)},
    Op.LOAD_KV: {"v_in_k": (8, 1), "value_scales": (9, 1), "keys": (16, 24), "d": (40, 12),
                 "keys_per_step": (52, 8),
                 "k_addr": (64, 48), "v_addr": (112, 48), "row_stride": (160, 32),
                 "key_scales": (192, 1), "paged": (193, 1), "page_log2": (194, 4),
                 "table": (198, 48), "dv": (246, 10)},
    Op.COMPUTE: {"cont": (8, 1), "more": (9, 1), "select": (10, 1), "value_scales": (11, 1),
                 "rows": (16, 16),
                 "heads": (32, 8), "d": (40, 12), "causal": (52, 1), "head_pos": (53, 1),
                 "keys": (64, 24), "keys_per_step": (88, 8), "q_pos": (96, 24),
                 "diag": (120, 25), "sel_row": (145, 15), "c_m": (160, 24), "c_sh": (184, 6),
                "row_scales": (190, 1), "key_scales": (191, 1), "window": (192, 1),
                "win_diag": (193, 25), "lse": (218, 1), "softcap": (219, 1), "cap": (220, 24),
                "sinks": (244, 1), "alibi": (245, 1), "dv": (246, 10)},
    Op.FINALIZE: {"rows": (16, 16), "heads": (32, 8), "d": (40, 12), "lse": (52, 1)},
    Op.STORE_O: {"rows": (16, 16), "heads": (32, 8), "d": (40, 12), "addr": (64, 48),
                 "row_stride": (112, 32), "head_stride": (144, 32), "lse": (176, 1)},
    Op.END: {},
}
SIGNED = {"diag", "win_diag"}


def q_row_elements_of(hw: HardwareConfig, ins) -> int:
    """Elements a ``LOAD_Q``'s rows occupy in DRAM, side words included: the multiplier's
    with ``row_scales``, the full side words with ``sinks`` or ``alibi``
    (:meth:`HardwareConfig.q_row_elements`)."""
    a = ins.args
    return hw.q_row_elements(ins.d, bool(a.get("row_scales", 0)),
                             bool(a.get("sinks", 0) or a.get("alibi", 0)))


def d_v_of(ins) -> int:
    """Elements of a V row (and an O row) of a ``LOAD_KV`` or ``COMPUTE``: its ``dv`` field, or
    ``d`` where ``dv`` is 0 (one head dim for Q·K and V, every program before the field)."""
    return ins.args.get("dv", 0) or ins.d


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
        op, args, reserved = fields_of(word)
        if op == Op.ILLEGAL:
            raise ProgramError(off, ErrorCode.ILLEGAL_OPCODE, f"opcode {word & 0xF:#x}")
        if reserved:
            raise ProgramError(off, ErrorCode.RESERVED_BITS,
                               f"reserved bits set in {op.name}: {reserved:#x}")
        for name in SIGNED & set(args):
            width = LAYOUTS[op][name][1]
            if args[name] >> (width - 1):
                args[name] -= 1 << width
        flags = {f: bool((word >> HEADER[f][0]) & 1)
                 for f in ("pop_prev", "pop_next", "push_prev", "push_next")}
        out.append(Instr(op, args, **flags))
        if op == Op.END:
            if off + INSTR_BYTES != len(data):
                raise ProgramError(off + INSTR_BYTES, ErrorCode.PROGRAM_OVERRUN,
                                   "bytes after END")
            return out
    raise ProgramError(len(data), ErrorCode.PROGRAM_OVERRUN, "no END instruction")


def fields_of(word: int) -> tuple[Op, dict[str, int], int]:
    """The opcode, raw (unsigned) fields and the reserved bits set of one instruction ``word``;
    an unknown opcode reads as ``Op.ILLEGAL`` with no fields."""
    code = word & 0xF
    try:
        op = Op(code)
    except ValueError:
        op = Op.ILLEGAL
    if op == Op.ILLEGAL:
        return op, {}, 0
    used = 0xFF
    f = {}
    for name, (lsb, width) in LAYOUTS[op].items():
        used |= ((1 << width) - 1) << lsb
        f[name] = (word >> lsb) & ((1 << width) - 1)
    return op, f, word & ~used & ((1 << INSTR_BITS) - 1)


def field_error(op: Op, f: dict[str, int], hw: HardwareConfig, rtl: bool = True) -> str | None:
    """Why fields ``f`` of an ``op`` instruction are out of range for ``hw`` (the decoder's
    ``FIELD_RANGE``), or ``None``: the first rule of ``contract.fieldrules.FIELD_RULES`` they
    break, the table the RTL decoder is made from too. The decoder model
    (:func:`attenio.contract.program.decode_error`) and the program check
    (:func:`attenio.contract.program.validate`) both call it. ``rtl=False`` drops the limits
    of this RTL's step geometry (a power-of-two ``keys_per_step`` whose keys fit the MAC lines),
    for baseline dataflows that only the model runs."""
    layout = LAYOUTS[op]
    f = {**dict.fromkeys(layout, 0), **f}      # a field not given reads 0, as in the word
    rh = f["rows"] * f["heads"] if "rows" in layout else 0
    return check(hw, SimpleNamespace(**f), rh, op.name, layout, rtl)


def field_table(op: Op) -> list[tuple[str, int, int]]:
    """(name, lsb, width) rows of an opcode's format, header included (for docs/isa.md)."""
    rows = [(n, lsb, w) for n, (lsb, w) in HEADER.items()]
    rows += [(n, lsb, w) for n, (lsb, w) in LAYOUTS[op].items()]
    return rows


__all__ = [
    "INSTR_BYTES", "INSTR_BITS", "TOKEN_MAX", "Op", "Instr", "encode", "decode", "ProgramError",
    "QUEUE_OF", "QUEUES", "PREV", "NEXT", "HEADER", "LAYOUTS", "SIGNED", "field_table",
    "fields_of", "field_error", "d_v_of", "q_row_elements_of",
]
