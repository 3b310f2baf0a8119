"""Arithmetic helpers cut for the clock."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal, signed, unsigned
from amaranth.hdl import Value

PIECE = 17   # an unsigned piece of 17 bits, or a signed top piece, fits an 18×18 signed DSP
# A piece this narrow is multiplied by shift-and-add rows in LUTs instead of a MULT18X18D
# (the ECP5 has 156): finalize's 21-bit reciprocal is 17 + 4 bits, and its top 4 bits would
# otherwise take a whole DSP per lane. Wider pieces cost more LUTs than a DSP is worth.
LUT_PIECE = 4


def _pieces(x: Value) -> list[tuple[int, Value]]:
    """(offset, piece) with x = Σ piece·2**offset; every piece but a signed top one unsigned."""
    width, is_signed = len(x), x.shape().signed
    out = []
    for lo in range(0, width, PIECE):
        hi = min(width, lo + PIECE)
        part = x[lo:hi]
        out.append((lo, part.as_signed() if is_signed and hi == width else part))
    return out


def round_half(shift: Value) -> Value:
    """``2**(shift − 1)``, 0 for ``shift = 0``: the constant that makes ``(x + c) >> shift``
    round half up."""
    return (Const(1, 1) << shift) >> 1


def pipelined_product(m: Module, a: Value, b: Value, name: str,
                      addend: Value | None = None) -> Signal:
    """``a·b`` two cycles later, throughput one per cycle: cycle 1 registers the partial
    products of pieces that each fit one MULT18X18D (shift-and-add rows for a piece of at most
    ``LUT_PIECE`` bits), cycle 2 registers their sum. The result has ``len(a) + len(b)`` bits,
    signed if either operand is. With ``addend`` (non-negative, a value of the cycle after
    ``a`` and ``b``'s: a register of theirs) the sum includes it, one bit wider: a rounding
    constant folded into the adder tree, not added after it. Its registers are data:
    ``reset_less`` (off the engine's reset net, issue #47), their words read only where the
    caller's valid bits say so."""
    is_signed = a.shape().signed or b.shape().signed
    width = len(a) + len(b)
    if addend is not None:
        width = max(width, len(addend)) + 1
    pa_all, pb_all = _pieces(a), _pieces(b)
    wide_a = [(o, x) for o, x in pa_all if len(x) > LUT_PIECE]
    wide_b = [(o, y) for o, y in pb_all if len(y) > LUT_PIECE]
    # (offset, x, y): wide × wide pieces on DSPs; a narrow piece of b times the whole of a,
    # and a narrow piece of a times b's wide pieces, as shift-and-add rows
    terms = [(la + lb, x, y) for la, x in wide_a for lb, y in wide_b]
    terms += [(lb, a, y) for lb, y in pb_all if len(y) <= LUT_PIECE]
    terms += [(la + lb, x, y) for la, x in pa_all if len(x) <= LUT_PIECE for lb, y in wide_b]
    parts = []
    for k, (off, x, y) in enumerate(terms):
        pp = Signal(signed(len(x) + len(y) + 1), name=f"{name}_pp{k}", reset_less=True)
        m.d.sync += pp.eq(shift_add_product(x, y) if min(len(x), len(y)) <= LUT_PIECE
                          else x * y)
        parts.append((off, pp))
    out = Signal(signed(width) if is_signed else unsigned(width), name=name, reset_less=True)
    total = parts[0][1] << parts[0][0]
    for off, pp in parts[1:]:
        total = total + (pp << off)
    m.d.sync += out.eq(total if addend is None else total + addend)
    return out


def shift_add_product(a: Value, b: Value) -> Value:
    """``a·b`` as shift-and-add rows, one per bit of the narrower operand, summed as a
    balanced tree: synthesis sees adders, not a multiplier, so it is not given a DSP."""
    x, y = (a, b) if len(a) <= len(b) else (b, a)
    n = len(x)
    rows = [Mux(x[i], y, 0) << i for i in range(n)]
    if x.shape().signed:  # two's complement: the top bit weighs −2**(n−1)
        rows[-1] = -rows[-1]
    while len(rows) > 1:
        rows = [rows[i] + rows[i + 1] if i + 1 < len(rows) else rows[i]
                for i in range(0, len(rows), 2)]
    return rows[0]


def data_reg(shape, name: str | None = None) -> Signal:
    """A datapath register: ``reset_less``, off START's reset (issue #47: that reset was one
    net to three quarters of the fpga preset's flip-flops). Only for a register written
    before it is read, beside a valid bit that is reset (tests/cocotb/test_random_state.py
    runs the design from a random state to show it); unnamed, it takes the name of the
    variable it is assigned to, as a ``Signal`` does."""
    return Signal(shape, name=name, reset_less=True, src_loc_at=1)


def delay(m: Module, sigs: list[Value], cycles: int, name: str,
          reset_less: bool | None = None) -> list[Signal]:
    """``sigs`` ``cycles`` cycles later (a register chain each). ``reset_less``: whether the
    chain's registers are off the reset (data, written before they are read: issue #47);
    ``None`` follows each source, a ``reset_less`` signal's chain is too, any other's is
    reset (valid bits)."""
    out = []
    for k, sig in enumerate(sigs):
        for c in range(cycles):
            nxt = (Signal.like(sig, name=f"{name}_{k}_d{c}") if reset_less is None
                   else Signal.like(sig, name=f"{name}_{k}_d{c}", reset_less=reset_less))
            m.d.sync += nxt.eq(sig)
            sig = nxt
        out.append(sig)
    return out


def kept_copies(m: Module, value: Value, load: Value, salts: list[Value],
                name: str, reset_less: bool = False) -> list[Signal]:
    """One register per salt, each holding ``value`` of the cycle before whenever ``load`` was
    high: copies of one register for a fan-out too wide to route from one (each copy drives its
    own lane). yosys merges registers whose inputs are identical, and replicated registers are
    exactly that, so copy ``i`` also loads when ``salts[i]`` is high (a bit of its own lane's
    data): no two copies then share an enable, and they stay apart. The extra loads are
    harmless where a copy is read only in the cycle after a ``load``. ``reset_less``: the
    copies are data, off the reset (issue #47)."""
    out = []
    for k, salt in enumerate(salts):
        r = Signal.like(value, name=f"{name}_{k}", reset_less=reset_less)
        with m.If(load | salt):
            m.d.sync += r.eq(value)
        out.append(r)
    return out


def table_ram(cfg) -> str:
    """The RAM style of the small per-row tables (m/ℓ, the Q scale table): ``cfg.table_ram``,
    with ``"pbuf-block"`` leaving them in distributed RAM."""
    return "block" if cfg.table_ram == "block" else "lut"


def pbuf_ram(cfg) -> str:
    """The P buffer's RAM style: block RAM with ``table_ram`` ``"block"`` or ``"pbuf-block"``."""
    return "lut" if cfg.table_ram == "lut" else "block"


def sliced_banks(m, name: str, width: int, depth: int, count: int, slice_bits: int):
    """``count`` banks of ``depth`` words of ``width`` bits, each made of memories of
    ``slice_bits`` (the last one narrower), added to ``m`` as ``name{bank}_{slice}``: a bank
    whose slices are each one block RAM wide, so each can have an address register of its
    own. Returns, a bank each, its slices' (read port, write port, low bit)."""
    from amaranth.lib.memory import Memory

    banks = []
    for i in range(count):
        slices = []
        for j, lo in enumerate(range(0, width, slice_bits)):
            mem = Memory(shape=min(slice_bits, width - lo), depth=depth, init=[])
            m.submodules[f"{name}{i}_{j}"] = mem
            slices.append((mem.read_port(), mem.write_port(), lo))
        banks.append(slices)
    return banks


def memory_banks(m, name: str, shape, depth: int, count: int, style: str | None = None):
    """``count`` memories of ``depth`` words added to ``m`` as ``name0``, ``name1``, …; returns
    (read ports, write ports). ``style``: ask synthesis for ``"lut"`` (distributed) RAM, which
    keeps a small table out of block RAM (a 64-word table would hold whole DP16KDs for a few
    percent of their bits), or ``"block"`` RAM, which gives those LUTs back to routing (yosys
    maps a table this small to LUTs unless told); ``None`` leaves it to synthesis."""
    from amaranth.lib.memory import Memory

    attrs = {"lut": {"ram_style": "distributed"}, "block": {"ram_style": "block"}, None: None}
    rds, wrs = [], []
    for i in range(count):
        mem = Memory(shape=shape, depth=depth, init=[], attrs=attrs[style])
        m.submodules[f"{name}{i}"] = mem
        rds.append(mem.read_port())
        wrs.append(mem.write_port())
    return rds, wrs
