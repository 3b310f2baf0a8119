"""The DRAM image of one run: the program from the schedule generator and the quantized Q, K,
V laid out as ``Layout.packed`` places them (rows padded to whole words of ``macs_per_line``
elements, so any head dim the config accepts runs). The RTL runner and the board self-test load
it."""

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
    row: int              # elements a row occupies in DRAM (head_dim padded to whole words)

    def pack_output(self, o: np.ndarray) -> bytes:
        """O (batch, heads, seq_q, head_dim) as the run writes it at ``layout.o``: rows padded
        to whole words with zeros (the hardware writes 0 there: its padded lanes are 0)."""
        return _pack(_pad_rows(np.asarray(o), self.row), self.ob)

    def unpack_output(self, raw: bytes) -> np.ndarray:
        """The O the run wrote (``o_bytes`` read back at ``layout.o``), padding dropped."""
        o = np.frombuffer(raw, dtype=f"<i{self.ob}").astype(np.int64)
        d = self.inputs.q.shape[-1]
        return o.reshape(*self.inputs.q.shape[:-1], self.row)[..., :d]


def _pack(x: np.ndarray, nbytes: int) -> bytes:
    return np.asarray(x, dtype=f"<i{nbytes}").tobytes()


def _pad_rows(x: np.ndarray, row: int) -> np.ndarray:
    """``x`` with its last axis padded with zeros to ``row`` elements."""
    pad = row - x.shape[-1]
    return np.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, pad)]) if pad else x


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
    row = hw.row_elements(wl.head_dim)
    for base, x in ((lay.q, inp.q), (lay.k, inp.k), (lay.v, inp.v)):
        data = _pack(_pad_rows(np.asarray(x), row), eb)
        image[base:base + len(data)] = data
    o_bytes = wl.batch * wl.heads * wl.seq_q * row * ob
    return RunImage(inp, sched, program, lay, bytes(image), o_bytes, ob, row)
