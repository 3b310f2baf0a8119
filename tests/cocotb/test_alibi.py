"""ALiBi on the RTL (issue #45): the tiny preset built with ``alibi_unit`` (the default suite: with
every unit, tests/cocotb/variant_models.py; the unit alone with ``make test-slow``) runs
attention with a slope per query head bit-exact with the integer model and cycle-exact with the
schedule (one more softmax stage, timing_for), within the contract of float64 attention with the
bias, under causal masks and GQA, a window that leaves rows with no key, a non-causal run with
more queries than keys, a paged GQA decode batch whose heads share a tile (rows packed, several
keys a step) with an empty cache and its statistics (lse), and AXI backpressure; every variant
together (soft cap, sinks and ALiBi: three side words) likewise; the same build without slopes
is the plain datapath, bit for bit."""

import dataclasses

import numpy as np
import pytest

from attenio.base import config as C
from attenio.model.golden import golden_output, quantized_inputs
from attenio.model.variants import alibi_slopes_standard
from attenio.verify.runner import simulate
from tests.cocotb.variant_models import EVERY_UNIT

HW = EVERY_UNIT
ALONE = C.preset("tiny+alibi")      # the unit alone, its own model: make test-slow

CASES = [
    (HW, C.Workload(seq_q=20, seq_k=33, head_dim=8, heads=2, kv_heads=1, causal=True),
     [0.5, 0.0625], {}),
    # rows 0-7 sit before the keys' window: they see none, their output is 0
    (HW, C.Workload(seq_q=24, seq_k=16, head_dim=16, heads=1, window_left=2, window_right=0,
                    causal=True, lse=True), [0.25], {"q_rows": True}),
    (HW, C.Workload(seq_q=30, seq_k=12, head_dim=8, heads=2, kv_heads=2, lse=True),
     alibi_slopes_standard(2), {}),
    (HW, C.VarlenWorkload(seqlens_q=[1] * 4, seqlens_k=[9, 30, 0, 17], head_dim=8, heads=2,
                          kv_heads=1, page_size=4, lse=True), [0.5, 0.125], {}),
    (HW, C.Workload(seq_q=20, seq_k=33, head_dim=8, heads=2, kv_heads=1, causal=True,
                     lse=True), [0.5, 0.0625], {"sinks": [1.0, -0.5], "softcap": 20.0}),
    (HW, C.VarlenWorkload(seqlens_q=[1] * 3, seqlens_k=[9, 0, 17], head_dim=8, heads=2,
                           kv_heads=1, page_size=4, lse=True), [0.5, 0.125],
     {"sinks": [2.0, 0.0]}),
]
# the cases with ALiBi alone on the preset with its unit alone
CASES += [pytest.param(ALONE, *case[1:], marks=pytest.mark.slow, id=f"alone{i}")
          for i, case in enumerate(CASES[:4])]


@pytest.mark.parametrize("hw, wl, slopes, kw", CASES)
def test_alibi_bit_exact_and_cycle_exact(hw, wl, slopes, kw):
    inp = quantized_inputs(hw, wl, seed=5, sigma=3.0, alibi_slopes=slopes, **kw)
    r = simulate(hw, wl, inputs=inp, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles
    assert r.errors["max_rel"] <= 1e-3                  # against float64 with the bias
    plain = golden_output(hw, wl, dataclasses.replace(inp, alibi_slopes=None))
    assert np.abs(plain - r.out).max() > 0              # the slopes changed the output


def test_alibi_under_backpressure():
    wl = C.Workload(seq_q=16, seq_k=40, head_dim=8, heads=2, kv_heads=2, causal=True)
    r = simulate(HW, wl, seed=3, alibi_slopes=[0.3, 1.0], p_stall=0.3, log=lambda *a: None)
    assert r.failures() == [], r.failures()


def test_no_slopes_is_the_plain_datapath():
    wl = C.Workload(seq_q=16, seq_k=24, head_dim=8, causal=True)
    r = simulate(HW, wl, seed=2, log=lambda *a: None)
    assert r.failures() == [] and r.cycles == r.predicted_cycles
    assert all(i.args["alibi"] == 0 for i in r.schedule.program if "alibi" in i.args)


@pytest.mark.slow     # a model of its own (fpga+sinks+alibi+softcap): make test-slow
def test_every_variant_on_the_fpga_preset():
    """gpt-oss's window layer scaled down (GQA 8/2, d = 64, a 16-key window, sinks) with
    ALiBi and the cap, and a paged decode batch, on the fpga preset built with every unit."""
    hw = C.preset("fpga+sinks+alibi+softcap")
    for wl in (C.Workload(seq_q=64, seq_k=64, head_dim=64, heads=8, kv_heads=2, causal=True,
                          window_left=15, window_right=0, lse=True),
               C.VarlenWorkload(seqlens_q=[1] * 3, seqlens_k=[70, 5, 33], head_dim=64,
                                heads=8, kv_heads=2, page_size=16, lse=True)):
        inp = quantized_inputs(hw, wl, seed=7, sigma=3.0, softcap=30.0,
                               sinks=np.linspace(-1.0, 2.0, 8),
                               alibi_slopes=alibi_slopes_standard(8))
        r = simulate(hw, wl, inputs=inp, log=lambda *a: None)
        assert r.failures() == [], r.failures()
        assert r.cycles == r.predicted_cycles
