"""InstructionDecoder: the checks an instruction passes before it is dispatched (docs/isa.md,
"Errors"): opcode, reserved bits, field ranges, alignment, token flags a queue cannot use."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.base.errors import ErrorCode
from attenio.contract.fieldrules import rules_for
from attenio.contract.isa import INSTR_BITS, LAYOUTS, NEXT, PREV, QUEUE_OF, Op
from attenio.hw.ctrl.axi import log2
from attenio.hw.ctrl.layouts import ERR_BITS, view

__all__ = ["InstructionDecoder", "kps_log2_of"]


class InstructionDecoder(wiring.Component):
    """``bad`` is the first failing check's :class:`ErrorCode` (0 when the instruction is
    good) of ``raw`` with ``rows_heads`` = rows·heads: combinational, or with ``registered``
    a cycle later (each check's result registered, then their priority).

    The checks, in order: ``RESERVED_BITS``; ``FIELD_RANGE`` (every rule of
    ``contract.fieldrules.FIELD_RULES``, the table ``validate()`` checks too: rows·heads, d,
    keys, keys_per_step, a paged block within its page and its table word-aligned to an entry,
    c_sh, the packed heads' mask, row_scales and key_scales where a word holds them);
    ``ADDRESS_RANGE`` (addresses and strides a multiple of the AXI beat); a pop or push towards
    a neighbour the queue does not have (``TOKEN_UNDERFLOW``, ``TOKEN_OVERFLOW``). An opcode
    with no format is ``ILLEGAL_OPCODE``.
    """

    def __init__(self, cfg: HardwareConfig, registered: bool = False):
        self.cfg = cfg
        # registered: each check's result and the opcode are registered, and ``bad`` (their
        # priority) follows a cycle after ``raw``: the checks' carry chains and the verdict
        # are a cycle each (the fetch's decode stage)
        self.registered = registered
        super().__init__({"raw": In(INSTR_BITS), "rows_heads": In(24), "bad": Out(ERR_BITS)})

    def _range_checks(self, op: Op) -> list:
        """``FIELD_RANGE``: every rule of ``contract.fieldrules.FIELD_RULES`` that applies to
        the opcode's format, on the instruction's fields (the host checks the same table)."""
        v = view(self.raw, op)
        return [Value.cast(r.bad(v, self.cfg, self.rows_heads))
                for r in rules_for(op.name, LAYOUTS[op])]

    def _align_checks(self, op: Op) -> list:
        lab = log2(self.cfg.axi_data_bytes)
        v = view(self.raw, op)
        return [Value.cast(getattr(v, n))[:lab] != 0 for n in LAYOUTS[op]
                if n.endswith("addr") or n.endswith("stride")] if lab else []

    def _checks(self, op: Op) -> list:
        """(conditions, error code) of ``op``'s checks, in priority order: a check fails when
        any of its conditions holds."""
        hdr = view(self.raw)
        used = 0xFF
        for lsb, width in LAYOUTS[op].values():
            used |= ((1 << width) - 1) << lsb
        reserved = Const(((1 << INSTR_BITS) - 1) & ~used, INSTR_BITS)
        rng = self._range_checks(op) if op != Op.END else []
        aln = self._align_checks(op)
        checks = [([(self.raw & reserved) != 0], ErrorCode.RESERVED_BITS)]
        if rng:
            checks.append((rng, ErrorCode.FIELD_RANGE))
        if aln:
            checks.append((aln, ErrorCode.ADDRESS_RANGE))
        # a queue without a previous (load) or next (store) neighbour
        q = QUEUE_OF.get(op)
        for side, nbr in (("prev", PREV), ("next", NEXT)):
            if q is not None and nbr[q] is None:
                checks.append(([getattr(hdr, f"pop_{side}")], ErrorCode.TOKEN_UNDERFLOW))
                checks.append(([getattr(hdr, f"push_{side}")], ErrorCode.TOKEN_OVERFLOW))
        return checks

    def elaborate(self, platform):
        m = Module()
        opcode = view(self.raw).opcode
        ops = [op for op in Op if op != Op.ILLEGAL]
        checks = {op: self._checks(op) for op in ops}
        if self.registered:
            # each condition registered on its own (a rule's compare, not the OR of a check's
            # rules: that OR after the compares was the fetch block's speed-8 path in
            # session 14), the OR and the priority after the registers
            # (registers of the instruction, each cycle: data, off START's reset as it is)
            op_r = Signal.like(opcode, name="dec_opcode", reset_less=True)
            m.d.sync += op_r.eq(opcode)
            opcode = op_r
            for op in ops:
                regd = []
                for i, (conds, code) in enumerate(checks[op]):
                    flags = [Signal(name=f"dec_{op.name.lower()}_{i}_{j}", reset_less=True)
                             for j in range(len(conds))]
                    m.d.sync += [f.eq(c) for f, c in zip(flags, conds, strict=True)]
                    regd.append((flags, code))
                checks[op] = regd
        with m.Switch(opcode):
            for op in ops:
                with m.Case(int(op)):
                    # the first failing check names the error (later assignments win)
                    for conds, code in reversed(checks[op]):
                        with m.If(Cat(*conds).any()):
                            m.d.comb += self.bad.eq(int(code))
            with m.Default():
                m.d.comb += self.bad.eq(ErrorCode.ILLEGAL_OPCODE)
        return m


def kps_log2_of(kps, kps_max: int):
    """log2 of a power-of-two keys_per_step field (0 for anything else; decode rejects it)."""
    out = Const(0, max(1, (kps_max.bit_length() - 1).bit_length()))
    for k in range(1, log2(kps_max) + 1):
        out = Mux(kps == (1 << k), k, out)
    return out
