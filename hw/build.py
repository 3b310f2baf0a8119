"""Verilog generation for hw/ components (plain Verilog for synthesis, -sv for simulation)."""

from __future__ import annotations

from pathlib import Path

from amaranth.back import rtlil, verilog


def to_verilog(component, name: str, *, sv: bool = False, muxes: bool = False,
               platform=None) -> str:
    """Verilog text of ``component`` with top module ``name``, elaborated for ``platform``
    (``None``; the ECP5 flows pass ``hw.dsp.ECP5_TARGET``, which puts the DSP registers in the
    MULT18X18Ds: hw/dsp.py).

    ``sv=True`` emits SystemVerilog (always_comb/always_ff), which Icarus needs to see the
    initial values of Amaranth's combinational processes (toolchain-notes.md, gotcha a).

    ``muxes=True`` (for Icarus) lowers every combinational process to multiplexers and
    continuous assignments. Icarus makes an ``always_comb`` sensitive to a whole vector when
    it reads one constant bit range of it, and Amaranth's processes assign a default and then
    override it; together they make zero-delay events that never settle at time 0 in the
    core with four keys per step. Continuous assignments have neither problem.
    """
    if muxes:
        from amaranth._toolchain.yosys import find_yosys

        text = rtlil.convert(component, name=name, emit_src=False, platform=platform)
        script = "\n".join([f"read_rtlil <<rtlil\n{text}\nrtlil", "proc -norom",
                             "memory_collect", "opt_clean",
                             "write_verilog -noattr -sv"])
        return find_yosys(lambda ver: ver >= (0, 40)).run(["-q", "-"], script,
                                                          ignore_warnings=True)
    if not sv:
        return verilog.convert(component, name=name, emit_src=False, platform=platform)
    text = rtlil.convert(component, name=name, emit_src=False, platform=platform)
    return verilog._convert_rtlil_text(text, write_verilog_opts=["-sv"])


def write_verilog(component, name: str, path: str | Path, *, sv: bool = False,
                  platform=None) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(to_verilog(component, name, sv=sv, platform=platform))
    return p
