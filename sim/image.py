"""The DRAM image of one run: the program from the schedule generator and the quantized Q, K,
V laid out as ``Layout.packed`` places them. The RTL runner and the board self-test load it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attenio.config import HardwareConfig, Workload
from attenio.contract.program import encode
from attenio.model import io_analysis as io
from attenio.model.golden import GoldenInputs
from attenio.model.numerics import softmax_scale
from attenio.sim.schedule import Layout, Schedule, schedule

__all__ = ["RunImage", "run_image"]


@dataclass(frozen=True)
class RunImage:
    """What a host writes to DRAM before ``CTRL.START`` and what it reads back."""

    inputs: GoldenInputs
    schedule: Schedule
    program: bytes
    layout: Layout
    image: bytes
    o_bytes: int          # bytes of O the run writes at ``layout.o``
    ob: int               # bytes per output element


def _pack(x: np.ndarray, nbytes: int) -> bytes:
    return np.asarray(x, dtype=f"<i{nbytes}").tobytes()


def run_image(hw: HardwareConfig, wl: Workload, inp: GoldenInputs) -> RunImage:
    """The program for ``wl`` (with the softmax multiplier of ``inp``'s scales) and the DRAM
    image holding it and ``inp``'s Q, K and V."""
    sp = softmax_scale(hw, inp.sq, inp.sk, wl.head_dim)
    sched = schedule(hw, wl, scale=sp, keep_spans=False)
    program = encode(sched.program)
    lay = Layout.packed(hw, wl, len(program))
    eb, ob = hw.element_bytes, io.out_element_bytes(hw)
    image = bytearray(lay.end)
    image[lay.program:lay.program + len(program)] = program
    for base, x in ((lay.q, inp.q), (lay.k, inp.k), (lay.v, inp.v)):
        data = _pack(x, eb)
        image[base:base + len(data)] = data
    o_bytes = wl.batch * wl.heads * wl.seq_q * wl.head_dim * ob
    return RunImage(inp, sched, program, lay, bytes(image), o_bytes, ob)
