"""16-bit Q, K and V on the RTL (issue #33 item 4: ``configs/fpga-int16.toml``, the option that
closes int8's gap to bf16 on peaky scores). The datapath is generic in ``data_bits``; these runs
hold it bit-exact with the integer model and cycle-exact with the schedule at 16 bits, on the
tiny array and on the fpga array, with the scale schemes the option is recommended with (Q per
row, K per block), large logits, causal masks, GQA, a paged decode batch and the statistics
words."""

from pathlib import Path

import pytest

from attenio.base import config as C
from attenio.base.tomlfile import load_toml
from attenio.model.golden import quantized_inputs, within_bounds
from attenio.verify.runner import simulate

ROOT = Path(__file__).resolve().parents[2]
FPGA16 = load_toml(ROOT / "configs" / "fpga-int16.toml")[0]
# tiny at 16 bits: a 64-bit beat is one word of 4 elements; outputs of 16 + 16 bits (an output
# word is two beats)
TINY16 = C.replace(C.tiny(), data_bits=16, axi_data_bits=64, dram_bytes_per_cycle=8,
                   numerics=C.replace(C.tiny().numerics, out_frac_bits=16,
                                      finalize_guard_bits=18))

CASES = [
    (TINY16, dict(seq_q=40, seq_k=50, head_dim=16, causal=True, heads=4, kv_heads=2), {}, 0.0),
    (TINY16, dict(seq_q=70, seq_k=33, head_dim=12, causal=True, lse=True),
     dict(q_rows=True, k_block=4), 0.0),
    (TINY16, dict(seq_q=20, seq_k=60, head_dim=8, window_left=9, window_right=3),
     dict(q_rows=True, k_block=4), 0.3),
    (TINY16, dict(seqlens_q=[1] * 5, seqlens_k=[9, 30, 4, 17, 1], head_dim=8, heads=2,
                  kv_heads=1, page_size=4), {}, 0.0),                    # a paged decode batch
    # the fpga array at 16 bits builds its own model (about a minute): make test-slow
    pytest.param(FPGA16, dict(seq_q=300, seq_k=300, head_dim=64, causal=True),
                 dict(q_rows=True, k_block=16), 0.0, marks=pytest.mark.slow),
]


def test_the_shipped_config_is_the_fpga_array_at_16_bits():
    fpga = C.fpga()
    assert (FPGA16.mac_lines, FPGA16.macs_per_line, FPGA16.tile_rows) == \
        (fpga.mac_lines, fpga.macs_per_line, fpga.tile_rows)
    assert FPGA16.data_bits == 16 and FPGA16.axi_data_bits == 2 * fpga.axi_data_bits
    assert FPGA16.rtl_reason() == ""


@pytest.mark.parametrize("hw, shape, scales, p", CASES)
def test_int16_bit_exact_and_cycle_exact(hw, shape, scales, p):
    cls = C.VarlenWorkload if "seqlens_q" in shape else C.Workload
    wl = cls(**shape)
    r = simulate(hw, wl, seed=5, p_stall=p, log=lambda *a: None, **scales)
    assert r.failures() == [], r.failures()
    if p == 0:
        assert r.cycles == r.predicted_cycles
    if wl.lse:
        assert r.stats is not None and r.stats_mismatches == 0


def test_int16_large_logits_hold_the_contract_on_the_rtl():
    """Outlier-heavy scores of σ = 300 with Q per row and K per block, the case 16-bit Q/K is
    for: bit-exact with the integer model and within the contract of float64."""
    wl = C.Workload(seq_q=40, seq_k=64, head_dim=32)
    inp = quantized_inputs(TINY16, wl, "llm-outliers", 3, q_rows=True, k_block=4,
                           scheme="rotate", sigma=300.0)
    r = simulate(TINY16, wl, inputs=inp, log=lambda *a: None)
    assert r.failures() == [] and r.cycles == r.predicted_cycles
    assert r.errors and within_bounds(r.errors), r.errors
