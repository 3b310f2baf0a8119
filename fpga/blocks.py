"""Out-of-context synthesis and place-and-route of one block of the accelerator at a time
(issue #47, block-level closure): a block's own netlist routes in minutes where the whole
fpga preset takes an hour or more, so a session can close many paths, not one.

:class:`Registered` wraps a block with a register on every port (inputs registered before the
block, outputs after it), so every path nextpnr times starts and ends at a flip-flop, as it
would inside the accelerator; :func:`route_block` synthesizes it with yosys, places and routes
it with nextpnr-ecp5 out of context at each speed grade asked for, and returns each run's
resources, Fmax and worst paths. ``scripts/route_block.py`` is the command.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from amaranth import Const, Module, Signal
from amaranth.lib import wiring

from attenio.base.config import HardwareConfig
from attenio.base.errors import bad

__all__ = ["BLOCKS", "Registered", "block_design", "route_block"]


def _blocks() -> dict:
    from attenio.hw.core import ComputeCore
    from attenio.hw.ctrl.decode import InstructionDecoder
    from attenio.hw.ctrl.fetch import ProgramFetch
    from attenio.hw.ctrl.load import LoadEngine
    from attenio.hw.ctrl.store import StoreEngine
    from attenio.hw.exp2 import Exp2
    from attenio.hw.finalize import Finalize
    from attenio.hw.kvring import KVRing
    from attenio.hw.pe_array import PEArray
    from attenio.hw.pv_stage import PVStage
    from attenio.hw.qbuf import QBuffer
    from attenio.hw.reciprocal import Reciprocal
    from attenio.hw.score import ScoreStage
    from attenio.hw.softmax import SoftmaxUnit

    return {"pe": PEArray, "softmax": SoftmaxUnit, "exp2": Exp2, "finalize": Finalize,
            "reciprocal": Reciprocal, "score": ScoreStage, "qbuf": QBuffer, "kvring": KVRing,
            "load": LoadEngine, "store": StoreEngine, "fetch": ProgramFetch,
            "decode": InstructionDecoder, "pv": PVStage, "core": ComputeCore}


# name -> what it is (the class each name builds: _blocks())
BLOCKS = {
    "pe": "the PE array (hw/pe_array.py): every MAC line, Q Kᵀ and P V",
    "softmax": "the softmax/EXP unit (hw/softmax.py): every lane, with the config's units",
    "exp2": "one exp2 lane (hw/exp2.py)",
    "finalize": "the finalize unit (hw/finalize.py): O/ℓ and the output words",
    "reciprocal": "the reciprocal (hw/reciprocal.py): seed ROM and a Newton step",
    "score": "the score stage's control (hw/score.py): mask, multipliers, ALiBi distance",
    "qbuf": "the Q buffer and its multiplier table (hw/qbuf.py)",
    "kvring": "the K/V rings (hw/kvring.py)",
    "load": "the load engine (hw/ctrl/load.py): Q and K/V reads, the page walk",
    "store": "the store engine (hw/ctrl/store.py)",
    "fetch": "the program fetch (hw/ctrl/fetch.py)",
    "decode": "the instruction decoder and its field rules (hw/ctrl/decode.py)",
    "pv": "the P V stage (hw/pv_stage.py): operand routing, with V's factors on the unit",
    "core": "the whole compute core (hw/core.py)",
}


class Registered(wiring.Component):
    """``block`` with a register on each of its ports: every input taken into a register
    before the block sees it and every output registered after it (one cycle each way), so
    that timing measures the block's own register-to-register paths. The ports are the
    block's, flattened (``i__payload``, …); constant ones (a stream's always-ready side) are
    left out."""

    def __init__(self, block: wiring.Component):
        self.block = block
        self._ports = [(path, member) for path, member, value in
                       block.signature.flatten(block) if not isinstance(value, Const)]
        super().__init__({_name(path): (wiring.In if member.flow == wiring.In else wiring.Out)(
            member.shape) for path, member in self._ports})

    def elaborate(self, platform):
        m = Module()
        m.submodules.block = blk = self.block
        inner = {path: value for path, _, value in blk.signature.flatten(blk)}
        for path, member in self._ports:
            o, i = getattr(self, _name(path)), inner[path]
            if member.flow == wiring.In:
                r = Signal(member.shape, name=f"in_{_name(path)}")
                m.d.sync += r.eq(o)
                m.d.comb += i.eq(r)
            else:
                m.d.sync += o.eq(i)
        return m


def _name(path) -> str:
    return "__".join(str(x) for x in path)


def block_design(hw: HardwareConfig, name: str) -> Registered:
    """Block ``name`` (:data:`BLOCKS`) of ``hw``, registered at its ports."""
    blocks = _blocks()
    if name not in blocks:
        raise bad("block", name, f"choose one of: {', '.join(BLOCKS)}")
    return Registered(blocks[name](hw))


def route_block(hw: HardwareConfig, name: str, *, preset: str = "", speeds=(8, 6),
                freq_mhz: float = 125.0, out: Path | str = "build", log=print) -> dict:
    """Synthesize block ``name`` of ``hw`` (:func:`block_design`) and place and route it out of
    context on the ECP5-85F at each of ``speeds``: ``{"block", "preset", "runs": [{"speed",
    "fmax_mhz", "cells", "critical_path", "seconds"}, …]}``, each run's worst path as
    nextpnr reports it (its steps, cells and delays)."""
    from attenio.fpga.synth import synthesize

    runs = []
    for speed in speeds:
        t0 = time.perf_counter()
        rep = synthesize(hw, "ecp5-85k", preset=preset, out=out, freq_mhz=freq_mhz,
                         speed=speed, design=block_design(hw, name), top=f"block_{name}",
                         log=log)
        runs.append({"speed": speed, "fmax_mhz": rep.fmax_mhz, "target_mhz": freq_mhz,
                     "cells": rep.cells, "lut_mapper": rep.lut_mapper,
                     "critical_from": rep.critical_from, "critical_to": rep.critical_to,
                     "critical_path": getattr(rep, "critical_path", None),
                     "seconds": {**rep.seconds, "total": round(time.perf_counter() - t0, 1)}})
        log(f"block {name} speed {speed}: {rep.fmax_mhz} MHz "
            f"({rep.critical_from} -> {rep.critical_to})")
    return {"block": name, "preset": preset, "what": BLOCKS[name], "runs": runs}


def write_report(result: dict, path: Path | str) -> Path:
    """``result`` of :func:`route_block` as JSON at ``path``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(result, indent=1))
    return p
