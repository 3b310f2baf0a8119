"""ComputeCore against the integer model, whole tiles, streams with random gaps."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.model import numerics as nm

from .core_tb import ref_core, rtl_core

TINY = C.tiny()


def data(nq, nk, d, seed, dist="gaussian", dv=None):
    rng = np.random.default_rng(seed)
    draw = {"gaussian": rng.standard_normal, "pm1": lambda s: rng.choice([-1.0, 1.0], s)}[dist]
    (qi, sq), (ki, sk), (vi, _) = (nm.quantize(draw(s), 8)
                                   for s in ((nq, d), (nk, d), (nk, dv or d)))
    return qi, ki, vi, nm.softmax_scale(TINY, sq, sk, d)


@pytest.mark.parametrize("nq,nk,d,causal,seed", [
    (1, 1, 1, False, 0),
    (5, 9, 3, False, 1),
    (16, 16, 8, True, 2),
    (20, 33, 16, False, 3),
    (70, 12, 5, False, 4),     # two tiles, the second of 6 rows
    (40, 24, 7, True, 5),      # seq_q > seq_k: rows that see no key
])
def test_core_bit_exact(nq, nk, d, causal, seed):
    q, k, v, sp = data(nq, nk, d, seed)
    np.testing.assert_array_equal(rtl_core(TINY, q, k, v, sp, causal, seed=seed),
                                  ref_core(TINY, q, k, v, sp, causal))


@pytest.mark.parametrize("d", [3, 8])
def test_core_under_heavy_output_backpressure(d):
    # READY low 85% of the time: the output FIFO fills and finalize issues with gaps, so a
    # row's first word often follows a pause (its lane select copies, hw/finalize_stage.py,
    # must load with the word's issue, not with whatever came before); d = 3 is one word a
    # row, every word a new lane
    q, k, v, sp = data(24, 10, d, 21)
    np.testing.assert_array_equal(rtl_core(TINY, q, k, v, sp, False, seed=21,
                                           p_backpressure=0.85),
                                  ref_core(TINY, q, k, v, sp, False))


@pytest.mark.parametrize("nq,nk,d,b,causal,seed", [
    (1, 9, 5, 4, False, 11),     # decode-like: one row, four keys per step, partial last step
    (2, 16, 8, 2, True, 12),
    (1, 30, 16, 2, False, 13),
    (2, 3, 3, 2, False, 14),     # fewer keys than one step
])
def test_core_several_keys_per_step(nq, nk, d, b, causal, seed):
    q, k, v, sp = data(nq, nk, d, seed)
    np.testing.assert_array_equal(rtl_core(TINY, q, k, v, sp, causal, seed=seed,
                                           keys_per_step=b),
                                  ref_core(TINY, q, k, v, sp, causal))


def test_several_keys_per_step_is_faster():
    q, k, v, sp = data(1, 64, 16, 15)
    one, four = {}, {}
    rtl_core(TINY, q, k, v, sp, seed=1, p_idle=0, p_backpressure=0, stats=one)
    rtl_core(TINY, q, k, v, sp, seed=1, p_idle=0, p_backpressure=0, stats=four,
             keys_per_step=4)
    # the same MAC work in a quarter of the steps (each step padded to MIN_PHASE cycles)
    assert four["pe_busy"] * 4 == one["pe_busy"]
    assert four["cycles"] < 0.4 * one["cycles"]


def test_next_tile_q_rows_load_during_finalize():
    # two tiles (64 + 6 rows): the second tile's Q command and rows are taken after the first
    # tile's last step and before its last output word (the third overlap level), and the
    # second tile's command only once the first has ended
    q, k, v, sp = data(70, 12, 5, 4)
    st = {}
    out = rtl_core(TINY, q, k, v, sp, seed=4, p_idle=0, p_backpressure=0.5, stats=st)
    np.testing.assert_array_equal(out, ref_core(TINY, q, k, v, sp))
    hs = st["handshakes"]
    words = 64 * -(-5 // TINY.macs_per_line)       # the first tile's words, in and out
    first_out, last_out_t0 = hs["o"][0], hs["o"][words - 1]
    q_t1_first, q_t1_last = hs["q"][words], hs["q"][-1]
    assert len(hs["qcmd"]) == 2 and hs["qcmd"][1] < first_out
    assert hs["qcmd"][1] < q_t1_first <= q_t1_last < last_out_t0
    assert hs["cmd"][1] > last_out_t0


def test_core_full_scale_inputs():
    q, k, v, sp = data(12, 20, 9, 7, "pm1")
    np.testing.assert_array_equal(rtl_core(TINY, q, k, v, sp, seed=7, p_idle=0.5,
                                           p_backpressure=0.5),
                                  ref_core(TINY, q, k, v, sp))


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("field,value,match", [
    ("mac_lines", 3, r"mac_lines=3 .*power of two"),
    ("softmax_block", 2, r"softmax_block=2"),
    ("exp_lanes", 2, r"exp_lanes=2"),
])
def test_unsupported_parameters_are_refused(field, value, match):
    from attenio.hw.core import ComputeCore

    extra = {"exp_lanes": 3, "max_keys_per_step": 1} if field == "mac_lines" else {}
    cfg = C.replace(TINY, **extra, **{field: value})
    with pytest.raises(C.ConfigError, match=match):
        ComputeCore(cfg)


def test_core_converts_to_verilog():
    from attenio.hw.build import to_verilog
    from attenio.hw.core import ComputeCore

    text = to_verilog(ComputeCore(TINY), "attenio_core")
    assert "module attenio_core" in text and "kv__payload" in text


@pytest.mark.parametrize("nq,nk,d,dv,b,causal,seed", [
    (20, 33, 16, 5, 1, True, 21),     # V narrower than Q and K (MLA's 192 and 128, small)
    (9, 14, 3, 12, 1, False, 22),     # V wider
    (2, 16, 8, 4, 2, True, 23),       # two keys a step
])
def test_core_v_of_its_own_head_dim(nq, nk, d, dv, b, causal, seed):
    q, k, v, sp = data(nq, nk, d, seed, dv=dv)
    got = rtl_core(TINY, q, k, v, sp, causal, seed=seed, keys_per_step=b)
    assert got.shape == (nq, dv)
    np.testing.assert_array_equal(got, ref_core(TINY, q, k, v, sp, causal))


@pytest.mark.parametrize("nq,nk,d,b,causal,seed", [
    (3, 20, 32, 1, False, 21),
    (70, 80, 5, 1, True, 22),       # two causal tiles, the first of 6 rows
    (2, 16, 8, 2, False, 23),       # two keys per step: each row copied into its two lines
])
def test_core_per_row_multipliers(nq, nk, d, b, causal, seed):
    """Per-row Q scales: every row's multiplier (the word after the row) drives its lane."""
    q, k, v, sp = data(nq, nk, d, seed)
    rng = np.random.default_rng(seed)
    sq = rng.uniform(0.3, 3.0, nq) * sp.multiplier / nm.softmax_scale(TINY, 1, 1, d).multiplier
    rows = nm.softmax_scale_rows(TINY, sq, 1.0, d)
    assert len(set(rows.c_m.tolist())) > 1
    np.testing.assert_array_equal(
        rtl_core(TINY, q, k, v, rows, causal, seed=seed, keys_per_step=b),
        ref_core(TINY, q, k, v, rows, causal))


def test_output_fifo_depth_and_finalize_latency_measured():
    # the output held 200 cycles from its first VALID: the finalize unit issues words until
    # the FIFO and its pipeline hold out_fifo_depth, and the first word is at the FIFO's head
    # finalize_latency cycles after its issue (the timing contract, observed, issue #34)
    from attenio.contract.timing import TIMING

    q, k, v, sp = data(20, 12, 16, 3)
    st = {}
    out = rtl_core(TINY, q, k, v, sp, False, seed=1, p_idle=0, p_backpressure=0, stats=st,
                   hold_output=200)
    np.testing.assert_array_equal(out, ref_core(TINY, q, k, v, sp, False))
    assert st["fin_held"] == TIMING.out_fifo_depth < 20 * 4      # words of the tile: 80
    assert st["o_first"] - st["fin_first"] == TIMING.finalize_latency
