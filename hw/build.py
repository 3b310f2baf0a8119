"""Verilog generation for hw/ components (plain Verilog for synthesis, -sv for simulation)."""

from __future__ import annotations

from pathlib import Path

from amaranth.back import rtlil, verilog


def to_verilog(component, name: str, *, sv: bool = False) -> str:
    """Verilog text of ``component`` with top module ``name``.

    ``sv=True`` emits SystemVerilog (always_comb/always_ff), which Icarus needs to see the
    initial values of Amaranth's combinational processes (toolchain-notes.md, gotcha a).
    """
    if not sv:
        return verilog.convert(component, name=name, emit_src=False)
    text = rtlil.convert(component, name=name, emit_src=False)
    return verilog._convert_rtlil_text(text, write_verilog_opts=["-sv"])


def write_verilog(component, name: str, path: str | Path, *, sv: bool = False) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(to_verilog(component, name, sv=sv))
    return p
