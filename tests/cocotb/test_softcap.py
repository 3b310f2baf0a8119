"""Logit soft-capping on the RTL (issue #45): the tiny preset built with its soft-capping unit (the
default suite: with every unit, tests/cocotb/variant_models.py; the unit alone with ``make
test-slow``) runs capped attention bit-exact with the integer model and cycle-exact with the
schedule (the unit's stages in ``Timing.p_ready_latency``), within the contract of float64
attention of ``c·tanh(s/c)``, under causal masks, windows, GQA and a paged decode batch; the
same build with the cap off is the plain datapath, bit for bit."""

import dataclasses

import numpy as np
import pytest

from attenio.base import config as C
from attenio.model.golden import golden_output, quantized_inputs
from attenio.verify.runner import simulate
from tests.cocotb.variant_models import EVERY_UNIT, models

HW = EVERY_UNIT

CASES = [
    # logits of σ ≈ 6 against a cap of 2: most scores saturate toward ±c
    (C.Workload(seq_q=20, seq_k=33, head_dim=8, heads=2, kv_heads=1, causal=True), 2.0, 6.0),
    (C.Workload(seq_q=24, seq_k=40, head_dim=16, window_left=7, window_right=2), 5.0, 4.0),
    (C.VarlenWorkload(seqlens_q=[1] * 4, seqlens_k=[9, 30, 4, 17], head_dim=8, heads=2,
                      kv_heads=1, page_size=4, lse=True), 3.0, 4.0),
]


@pytest.mark.parametrize("hw", models("tiny+softcap"))
@pytest.mark.parametrize("wl, c, sigma", CASES)
def test_capped_attention_bit_exact_and_cycle_exact(hw, wl, c, sigma):
    inp = quantized_inputs(hw, wl, seed=5, sigma=sigma, softcap=c)
    r = simulate(hw, wl, inputs=inp, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles
    assert r.errors["max_rel"] <= 1e-3                   # against float64 c·tanh attention
    plain = golden_output(hw, wl, dataclasses.replace(inp, softcap=None))
    assert np.abs(plain - r.out).max() > 0               # the cap changed the output


def test_the_cap_off_is_the_plain_datapath():
    wl = C.Workload(seq_q=16, seq_k=24, head_dim=8, causal=True)
    r = simulate(HW, wl, seed=2, log=lambda *a: None)
    assert r.failures() == [] and r.cycles == r.predicted_cycles
    assert all(i.args["softcap"] == 0 for i in r.schedule.program if "softcap" in i.args)
