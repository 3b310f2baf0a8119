"""Attention sinks on the RTL (issue #45): the tiny preset built with ``sinks_unit`` (the default
suite: with every unit, tests/cocotb/variant_models.py; the unit alone, two side words a Q row,
with ``make test-slow``) runs attention with a sink per query head bit-exact with the integer
model and cycle-exact with the schedule, within the contract of float64 attention with the sink
as one more column of the softmax, under causal masks and GQA, a window that leaves rows with no
key, per-row Q scales, a paged decode batch with an empty cache and its statistics (lse), and
AXI backpressure; the same build without sinks is the plain datapath, bit for bit."""

import dataclasses

import numpy as np
import pytest

from attenio.base import config as C
from attenio.model.golden import golden_output, quantized_inputs
from attenio.verify.runner import simulate
from tests.cocotb.variant_models import EVERY_UNIT, models

HW = EVERY_UNIT

CASES = [
    (C.Workload(seq_q=20, seq_k=33, head_dim=8, heads=2, kv_heads=1, causal=True),
     [1.5, -0.5], False),
    # rows 0-7 sit before the keys' window: they see none, their output is 0, their lse the sink
    (C.Workload(seq_q=24, seq_k=16, head_dim=16, heads=1, window_left=2, window_right=0,
                causal=True, lse=True), [2.0], True),
    (C.VarlenWorkload(seqlens_q=[1] * 4, seqlens_k=[9, 30, 0, 17], head_dim=8, heads=2,
                      kv_heads=1, page_size=4, lse=True), [0.25, 3.0], False),
]


@pytest.mark.parametrize("hw", models("tiny+sinks"))
@pytest.mark.parametrize("wl, sinks, q_rows", CASES)
def test_sinks_bit_exact_and_cycle_exact(hw, wl, sinks, q_rows):
    inp = quantized_inputs(hw, wl, seed=5, sigma=3.0, sinks=sinks, q_rows=q_rows)
    r = simulate(hw, wl, inputs=inp, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles
    assert r.errors["max_rel"] <= 1e-3                  # against float64 with the sink column
    plain = golden_output(hw, wl, dataclasses.replace(inp, sinks=None))
    assert np.abs(plain - r.out).max() > 0              # the sinks changed the output


def test_sinks_under_backpressure():
    wl = C.Workload(seq_q=16, seq_k=40, head_dim=8, heads=2, kv_heads=2, causal=True)
    r = simulate(HW, wl, seed=3, sinks=[-1.0, 4.0], p_stall=0.3, log=lambda *a: None)
    assert r.failures() == [], r.failures()


def test_no_sinks_is_the_plain_datapath():
    wl = C.Workload(seq_q=16, seq_k=24, head_dim=8, causal=True)
    r = simulate(HW, wl, seed=2, log=lambda *a: None)
    assert r.failures() == [] and r.cycles == r.predicted_cycles
    assert all(i.args["sinks"] == 0 for i in r.schedule.program if "sinks" in i.args)

