"""Products on the ECP5's MULT18X18D with its registers (issue #47, "registered DSPs").

yosys maps every ``a * b`` to a MULT18X18D with its input, pipeline and output registers
bypassed, so a product is a ~3 ns combinational block between two routed nets. Where a product's
operands are registered and used for nothing else, :func:`input_registered_product` puts those
registers inside the DSP (``REG_INPUTA_CLK``/``REG_INPUTB_CLK`` = ``CLK0``) on an ECP5 build,
which takes the routing into the DSP off the path. Elsewhere (simulation, the other targets)
it builds the same registers and product in plain logic: the behavioural twin, the same
latency and bits, which the suite simulates.

An ECP5 build is one elaborated with a platform whose ``device`` is an ECP5 part: amaranth's
``LatticePlatform`` (``attenio board``) or :data:`ECP5_TARGET`, which ``attenio synth`` and the
block routes pass to the Verilog backend.
"""

from __future__ import annotations

from amaranth import ClockSignal, Const, Instance, Module, Signal, signed, unsigned
from amaranth.hdl import Value

__all__ = ["ECP5_TARGET", "Ecp5Target", "is_ecp5", "input_registered_product"]

DSP_BITS = 18      # a MULT18X18D's operands; its product has 36 bits


class Ecp5Target:
    """A stand-in platform for elaborating the ECP5 netlist outside amaranth's build flow
    (``verilog.convert(top, platform=ECP5_TARGET)``): only its ``device`` is read."""

    device = "LFE5U-85F"


ECP5_TARGET = Ecp5Target()


def is_ecp5(platform) -> bool:
    """Whether ``platform`` builds for an ECP5 (its ``device`` an LFE5U/LAE5U part)."""
    return str(getattr(platform, "device", "") or "").lower().startswith(("lfe5", "lae5"))


def input_registered_product(m: Module, platform, a_next: Value, b_next: Value,
                             name: str) -> Value:
    """``reg(a_next) · reg(b_next)``: both operands registered (one cycle), then multiplied;
    the product is combinational after the registers. Operands of at most 18 bits, signed or
    not; the product has ``len(a_next) + len(b_next)`` bits, signed if either operand is.

    On an ECP5 build the registers are the MULT18X18D's input registers (``CLK0``, always
    enabled, never reset: the twin's are ``reset_less`` to match); elsewhere they are plain
    registers."""
    for op in (a_next, b_next):
        if len(op) > DSP_BITS:
            raise ValueError(f"{name}: an operand of {op.shape()} does not fit a "
                             f"{DSP_BITS}-bit DSP input")
    is_signed = a_next.shape().signed or b_next.shape().signed
    width = len(a_next) + len(b_next)
    out = Signal(signed(width) if is_signed else unsigned(width), name=name)
    if not is_ecp5(platform):
        a_r = Signal(a_next.shape(), name=f"{name}_a", reset_less=True)
        b_r = Signal(b_next.shape(), name=f"{name}_b", reset_less=True)
        m.d.sync += [a_r.eq(a_next), b_r.eq(b_next)]
        m.d.comb += out.eq(a_r * b_r)
        return out
    # each operand widened to 18 bits as its shape says (sign or zero), its pin SIGNEDx set
    # when signed; the 36-bit product is then exact and its low bits are the result
    a = Signal(signed(DSP_BITS) if a_next.shape().signed else unsigned(DSP_BITS),
               name=f"{name}_ain")
    b = Signal(signed(DSP_BITS) if b_next.shape().signed else unsigned(DSP_BITS),
               name=f"{name}_bin")
    p = Signal(2 * DSP_BITS, name=f"{name}_p")
    m.d.comb += [a.eq(a_next), b.eq(b_next), out.eq(p[:width])]
    zero = Const(0, 1)
    ports = {f"i_A{k}": a[k] for k in range(DSP_BITS)}
    ports |= {f"i_B{k}": b[k] for k in range(DSP_BITS)}
    ports |= {f"i_C{k}": zero for k in range(DSP_BITS)}
    ports |= {f"o_P{k}": p[k] for k in range(2 * DSP_BITS)}
    ports |= {"i_SIGNEDA": Const(int(a_next.shape().signed), 1),
              "i_SIGNEDB": Const(int(b_next.shape().signed), 1),
              "i_SOURCEA": zero, "i_SOURCEB": zero,
              "i_CLK0": ClockSignal(), "i_CE0": Const(1, 1), "i_RST0": zero}
    regs = {"p_REG_INPUTA_CLK": "CLK0", "p_REG_INPUTA_CE": "CE0", "p_REG_INPUTA_RST": "RST0",
            "p_REG_INPUTB_CLK": "CLK0", "p_REG_INPUTB_CE": "CE0", "p_REG_INPUTB_RST": "RST0",
            "p_REG_INPUTC_CLK": "NONE", "p_REG_PIPELINE_CLK": "NONE",
            "p_REG_OUTPUT_CLK": "NONE", "p_GSR": "DISABLED", "p_RESETMODE": "SYNC",
            "p_MULT_BYPASS": "DISABLED", "p_CAS_MATCH_REG": "FALSE",
            "p_SOURCEB_MODE": "B_SHIFT"}
    m.submodules[name] = Instance("MULT18X18D", **regs, **ports)
    return out
