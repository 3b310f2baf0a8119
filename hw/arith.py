"""Arithmetic helpers cut for the clock."""

from __future__ import annotations

from amaranth import Module, Signal, signed, unsigned
from amaranth.hdl import Value

PIECE = 17   # an unsigned piece of 17 bits, or a signed top piece, fits an 18×18 signed DSP


def _pieces(x: Value) -> list[tuple[int, Value]]:
    """(offset, piece) with x = Σ piece·2**offset; every piece but a signed top one unsigned."""
    width, is_signed = len(x), x.shape().signed
    out = []
    for lo in range(0, width, PIECE):
        hi = min(width, lo + PIECE)
        part = x[lo:hi]
        out.append((lo, part.as_signed() if is_signed and hi == width else part))
    return out


def pipelined_product(m: Module, a: Value, b: Value, name: str) -> Signal:
    """``a·b`` two cycles later, throughput one per cycle: cycle 1 registers the partial
    products of pieces that each fit one MULT18X18D, cycle 2 registers their sum. The result
    has ``len(a) + len(b)`` bits, signed if either operand is."""
    is_signed = a.shape().signed or b.shape().signed
    width = len(a) + len(b)
    parts = []
    for la, pa in _pieces(a):
        for lb, pb in _pieces(b):
            pp = Signal(signed(len(pa) + len(pb) + 1), name=f"{name}_pp{la}_{lb}")
            m.d.sync += pp.eq(pa * pb)
            parts.append((la + lb, pp))
    out = Signal(signed(width) if is_signed else unsigned(width), name=name)
    total = parts[0][1] << parts[0][0]
    for off, pp in parts[1:]:
        total = total + (pp << off)
    m.d.sync += out.eq(total)
    return out


def delay(m: Module, sigs: list[Value], cycles: int, name: str) -> list[Signal]:
    """``sigs`` ``cycles`` cycles later (a register chain each)."""
    out = []
    for k, sig in enumerate(sigs):
        for c in range(cycles):
            nxt = Signal.like(sig, name=f"{name}_{k}_d{c}")
            m.d.sync += nxt.eq(sig)
            sig = nxt
        out.append(sig)
    return out
