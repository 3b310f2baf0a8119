"""``lse``: each row's softmax statistics (running max m, row sum ℓ) written by the RTL as one
more output word after the row's O (docs/isa.md, ``STORE_O.lse``): bit-exact with the integer
model (SimResult.failures compares the words), cycle-exact with the schedule, and their
log-sum-exp within the contract of float64's."""

import shutil

import numpy as np
import pytest

from attenio.base import config as C
from attenio.contract.formats import stats_of_words
from attenio.model.golden import LSE_REL_BOUND, lse_error
from attenio.verify.runner import prepare, simulate

TINY = C.tiny()

CASES = [
    (TINY, dict(seq_q=40, seq_k=50, head_dim=16, causal=True, heads=4, kv_heads=2), 0.0),
    (TINY, dict(seq_q=70, seq_k=30, head_dim=12, causal=True), 0.0),    # rows that see no key
    (TINY, dict(seq_q=20, seq_k=60, head_dim=8, window_left=9, window_right=3), 0.3),
    (TINY, dict(seqlens_q=[1] * 5, seqlens_k=[9, 30, 4, 17, 1], head_dim=8, heads=2,
                kv_heads=1, page_size=4), 0.0),                          # a paged decode batch
    (C.fpga(), dict(seq_q=300, seq_k=300, head_dim=64, causal=True), 0.0),
]


@pytest.mark.parametrize("hw, shape, p", CASES)
def test_statistics_words_bit_exact_and_cycle_exact(hw, shape, p):
    cls = C.VarlenWorkload if "seqlens_q" in shape else C.Workload
    wl = cls(lse=True, **shape)
    r = simulate(hw, wl, seed=11, p_stall=p, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.stats is not None and r.stats_mismatches == 0
    if p == 0:
        assert r.cycles == r.predicted_cycles
    # the words read back as the log-sum-exp of the quantized inputs' scores, within the
    # contract (the golden check's own comparison, on the RTL's words)
    m, l = stats_of_words(hw, r.stats)
    err = lse_error(hw, wl, {"m": m, "l": l}, prepare(hw, wl, seed=11).inputs)
    assert err["lse_rows_agree"] and err["lse_max_rel"] <= LSE_REL_BOUND, err

def test_a_statistics_word_is_one_more_word_a_row():
    wl = C.Workload(seq_q=64, seq_k=64, head_dim=16)
    plain = simulate(TINY, wl, seed=2, log=lambda *a: None)
    with_lse = simulate(TINY, C.replace(wl, lse=True), seed=2, log=lambda *a: None)
    assert with_lse.failures() == [] and plain.failures() == []
    word = TINY.macs_per_line * TINY.out_element_bytes
    assert with_lse.counters["bytes_wr"] - plain.counters["bytes_wr"] == 64 * word
    np.testing.assert_array_equal(with_lse.out, plain.out)       # O itself unchanged


def test_icarus_statistics_words():
    if shutil.which("iverilog") is None:
        pytest.fail("iverilog is not installed: make test installs it (apt-get install iverilog)")
    wl = C.Workload(seq_q=9, seq_k=5, head_dim=8, causal=True, lse=True)
    r = simulate(TINY, wl, sim="icarus", seed=4, log=lambda *a: None)
    assert r.failures() == [] and r.cycles == r.predicted_cycles
