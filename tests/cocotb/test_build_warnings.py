"""Verilator's warnings on the generated design (issue #30): every one is an idiom of Amaranth's
Verilog, none a defect of the design, and the test fails on any other kind (a latch, a
combinational loop, a multiply-driven signal, a real truncation), in the model the suite
simulates and in the fast path's wrapper (verify/fast_dram.sv). The builds are the suite's own
(cached); their output is in each build's build.log, out of the user's way."""

import re

import pytest

from attenio.base import config as C
from attenio.verify import runner

# kind → the messages Amaranth's Verilog gives it, and why they are harmless
IDIOMS = {
    # an operand narrower than its operator: Verilog widens it as Amaranth means it
    "WIDTHEXPAND": r"(Logical operator|Operator) \w+ expects \d+ bits? on the",
    # `! x` for `x == 0` on a multi-bit x, and `word_select` (a shift, then the low bits)
    "WIDTHTRUNC": r"Logical operator LOGNOT expects 1 bit|Operator ASSIGNW expects \d+ bits on "
                  r"the Assign RHS, but Assign RHS's SHIFTR",
    # a `case` over a value Amaranth fully covers by its default
    "CASEINCOMPLETE": r"Case values incompletely covered",
    # a zero-width signal declared [-1:0] (a parameter that came out 0)
    "ASCRANGE": r"Ascending bit range vector: left < right of bit range: \[-1:0\]",
}


@pytest.mark.parametrize("fast", [False, True], ids=["attenio_top", "attenio_fast"])
def test_verilator_warnings_are_amaranths_idioms_only(fast):
    bdir = runner.build(C.tiny(), "verilator", log=lambda *a: None,
                        fast_bytes=1 if fast else None)
    log = (bdir / "build.log").read_text(errors="replace")
    found = re.findall(r"%Warning-(\w+): [^\n]*?:\d+:\d+: ([^\n]*)", log)
    assert found, "no warnings parsed: the log's format changed"
    other = [(kind, msg) for kind, msg in found
             if kind not in IDIOMS or not re.search(IDIOMS[kind], msg)]
    assert other == [], other[:5]
