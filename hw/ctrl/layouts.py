"""Amaranth layouts derived from the program format (contract/program.py): an instruction's
fields by name, and the entries of the fetch buffer, the queues and the burst tags."""

from __future__ import annotations

from functools import cache

from amaranth import signed, unsigned
from amaranth.lib import data

from attenio.contract.program import HEADER, INSTR_BITS, LAYOUTS, SIGNED, Op

RH_BITS = 16             # rows·heads as stored beside a decoded instruction
ERR_BITS = 4             # an ErrorCode

__all__ = ["RH_BITS", "ERR_BITS", "instr_layout", "view", "tile_layout", "fetch_entry_layout",
           "queue_entry_layout", "load_tag_layout"]


@cache
def instr_layout(op: Op | None = None) -> data.StructLayout:
    """The 256-bit instruction with ``op``'s fields by name (the header alone for ``None``);
    bits no field uses are ``_pad<lsb>`` members."""
    fields = dict(HEADER)
    if op is not None:
        fields.update(LAYOUTS[op])
    members: dict = {}
    pos = 0
    for name, (lsb, width) in sorted(fields.items(), key=lambda kv: kv[1][0]):
        if lsb > pos:
            members[f"_pad{pos}"] = unsigned(lsb - pos)
        members[name] = signed(width) if name in SIGNED else unsigned(width)
        pos = lsb + width
    if pos < INSTR_BITS:
        members[f"_pad{pos}"] = unsigned(INSTR_BITS - pos)
    return data.StructLayout(members)


def view(raw, op: Op | None = None) -> data.View:
    """``raw`` (256 bits) read as ``op``'s fields."""
    return data.View(instr_layout(op), raw)


# rows, heads and d sit at the same bits in every tile instruction (LOAD_Q, COMPUTE, FINALIZE,
# STORE_O; d also in LOAD_KV): the decoder and the engines read them through this view
tile_layout = instr_layout(Op.FINALIZE)
for _op in (Op.LOAD_Q, Op.COMPUTE, Op.STORE_O):
    assert all(LAYOUTS[_op][f] == LAYOUTS[Op.FINALIZE][f] for f in ("rows", "heads", "d"))
assert LAYOUTS[Op.LOAD_KV]["d"] == LAYOUTS[Op.FINALIZE]["d"]


def fetch_entry_layout() -> data.StructLayout:
    """A fetch buffer entry: the instruction, its decode error code and rows·heads."""
    return data.StructLayout({"insn": unsigned(INSTR_BITS), "bad": unsigned(ERR_BITS),
                              "rh": unsigned(RH_BITS)})


def queue_entry_layout() -> data.StructLayout:
    """A queue entry: the instruction and rows·heads."""
    return data.StructLayout({"insn": unsigned(INSTR_BITS), "rh": unsigned(RH_BITS)})


def load_tag_layout(q: int) -> data.StructLayout:
    """What a load burst's beats mean: K/V or Q, which ring, the index of a row's last word
    (``wd1``: words − 1) and of its last data word (``dl``), the lanes of that word kept (a mask
    of ``q``), whether each K/V row ends with a K factor's word (``sc``), whether each K
    row's first ``wv`` words are also a V row (``vk``, its last word's ``vlanes``), whether the
    burst ends the instruction and it pushes a token; a block-table word (``t``) and the
    buffer ``slot`` it fills. A paged cache's K factors: the burst starts with a word of
    factors (``pf``), each K row takes the next (``pk``). The indices and the mask are made
    when the burst is requested, off the beats' path."""
    return data.StructLayout({"kv": 1, "v": 1, "wd1": 12, "dl": 12, "mask": q, "sc": 1,
                              "end": 1,
                              "pf": 1, "pk": 1,
                              "push": 1, "t": 1, "slot": 1,
                              # K rows whose first wv words are V's row too (LOAD_KV.v_in_k),
                              # the lanes of V's last word
                              "vk": 1, "wv": 12, "vlanes": 8})


def error_ports() -> dict:
    """The error output every controller unit has: ``fail`` with an ``ErrorCode`` in
    ``fail_code`` (of several in a cycle the one raised last in the unit's code wins)."""
    from amaranth.lib.wiring import Out
    return {"fail": Out(1), "fail_code": Out(ERR_BITS)}


def raise_error(m, unit, code) -> None:
    """Raise ``code`` on ``unit``'s error ports this cycle (inside the caller's conditions)."""
    m.d.comb += [unit.fail.eq(1), unit.fail_code.eq(code)]
