"""A random power-on state (issue #47, "fan-out by design"): the datapath's registers are not
reset by START (``reset_less``), which takes them off the engine's reset net, so their
correctness rests on each being written before it is read. Here every register without a
reset starts from a random value (the Verilog without initial values, Verilator's
``+verilator+rand+reset+2``), seeded; runs with every variant, statistics, a paged decode
batch, AXI backpressure, and an aborted run followed by a clean one stay bit- and
cycle-exact. The every-unit model (tests/cocotb/variant_models.py) holds every datapath unit;
the fpga preset (its DSP products, words of several beats) behind the slow marker."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.model.golden import quantized_inputs
from attenio.model.variants import alibi_slopes_standard
from attenio.verify.runner import simulate, without_initial_values
from tests.cocotb.variant_models import EVERY_UNIT

VARIANTS = {"softcap": 20.0, "sinks": [1.0, -0.5], "alibi_slopes": [0.5, 0.0625]}


@pytest.mark.parametrize("state, p_stall", [(1, 0.0), (2, 0.3)])
def test_every_variant_from_a_random_state(state, p_stall):
    wl = C.Workload(seq_q=20, seq_k=33, head_dim=8, heads=2, kv_heads=1, causal=True, lse=True)
    inp = quantized_inputs(EVERY_UNIT, wl, seed=5, sigma=3.0, **VARIANTS)
    r = simulate(EVERY_UNIT, wl, inputs=inp, random_state=state, p_stall=p_stall,
                 log=lambda *a: None)
    assert r.failures() == [], r.failures()
    if p_stall == 0:
        assert r.cycles == r.predicted_cycles


def test_paged_decode_and_v_factors_from_a_random_state():
    wl = C.VarlenWorkload(seqlens_q=[1] * 4, seqlens_k=[9, 30, 0, 17], head_dim=8, heads=2,
                          kv_heads=1, page_size=4, lse=True)
    r = simulate(EVERY_UNIT, wl, seed=4, random_state=3, v_keys=True, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles


def test_a_run_after_an_abort_from_a_random_state():
    """An abort leaves the pipelines full of one run's words; the next run's START does not
    clear them, and its output is still the golden model's."""
    wl = C.Workload(seq_q=24, seq_k=40, head_dim=16, heads=2, kv_heads=2, causal=True)
    r = simulate(EVERY_UNIT, wl, seed=6, random_state=4, abort_at=700, rerun=True,
                 alibi_slopes=alibi_slopes_standard(2), log=lambda *a: None)
    assert r.extra["rerun"]["bit_exact"], r.extra["rerun"]


@pytest.mark.slow      # a model of its own (fpga+sinks+alibi+softcap, no initial values)
def test_the_fpga_preset_from_a_random_state():
    hw = C.preset("fpga+sinks+alibi+softcap")
    wl = C.Workload(seq_q=64, seq_k=64, head_dim=64, heads=8, kv_heads=2, causal=True,
                    window_left=15, window_right=0, lse=True)
    inp = quantized_inputs(hw, wl, seed=7, sigma=3.0, softcap=30.0,
                           sinks=np.linspace(-1.0, 2.0, 8), alibi_slopes=alibi_slopes_standard(8))
    r = simulate(hw, wl, inputs=inp, random_state=5, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles


def test_initial_values_are_removed_from_registers_only():
    text = ("module m;\n  reg [7:0] a = 8'h00;\n  reg \\b$1 = 1'h0;\n  wire [3:0] c = d;\n"
            "  reg [7:0] mem [0:3];\n  initial begin\n    mem[0] = 8'h01;\n  end\nendmodule\n")
    out = without_initial_values(text)
    assert "reg [7:0] a ;" in out and "reg \\b$1 ;" in out
    assert "wire [3:0] c = d;" in out and "mem[0] = 8'h01;" in out
    with pytest.raises(RuntimeError, match="initial values"):
        without_initial_values("module m;\n  wire a;\nendmodule\n")
