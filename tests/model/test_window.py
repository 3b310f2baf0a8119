"""Sliding windows (FlashAttention's ``window_size``) in the shared mask rule and both golden
models, against a plain dense softmax with the window written out from FlashAttention's
definition: query i attends keys ``i + nk − nq − left … i + nk − nq + right`` (−1 unbounded),
causal caps the right side at the diagonal, a row that sees no key gives 0."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.contract.rules import check_window, key_span, visible
from attenio.model import numerics as nm
from attenio.model import reference as ref
from attenio.model.golden import golden_check

TINY = C.tiny()


def fa_mask(nq, nk, causal, window):
    """The mask as FlashAttention's docs define it, one pair at a time."""
    left, right = window
    m = np.zeros((nq, nk), dtype=bool)
    for i in range(nq):
        for j in range(nk):
            c = i + nk - nq
            ok = (left < 0 or j >= c - left) and (right < 0 or j <= c + right)
            m[i, j] = ok and (not causal or j <= c)
    return m


def dense(q, k, v, mask):
    """softmax(q kᵀ/√d) v with the mask, rows with no key 0: no streaming, no skipping."""
    s = q @ k.T / np.sqrt(q.shape[1])
    s = np.where(mask, s, -np.inf)
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        if mask[i].any():
            p = np.exp(s[i] - s[i][mask[i]].max())
            out[i] = (p / p.sum()) @ v
    return out


CASES = [(12, 12, False, (3, 2)), (12, 12, True, (4, -1)), (9, 20, True, (5, 0)),
         (20, 9, False, (0, 0)), (7, 30, False, (-1, 3)), (16, 16, False, (-1, 0)),
         (8, 4, True, (1, 1)), (5, 5, False, (-1, -1))]


@pytest.mark.parametrize("nq, nk, causal, window", CASES)
def test_rule_is_flashattentions(nq, nk, causal, window):
    want = fa_mask(nq, nk, causal, window)
    got = visible(np.arange(nk)[None, :], np.arange(nq)[:, None], nk - nq, causal, window)
    got = np.ones((nq, nk), dtype=bool) if got is None else got
    assert np.array_equal(got, want)
    # the key span of any rows covers exactly the keys those rows see
    for lo, hi in ((0, nq - 1), (nq // 3, nq // 2)):
        first, end = key_span(lo, hi, nk - nq, nk, causal, window)
        cols = np.nonzero(want[lo:hi + 1].any(axis=0))[0]
        if len(cols):
            assert first <= cols.min() and cols.max() < end
            assert not want[lo:hi + 1, :first].any() and not want[lo:hi + 1, end:].any()


@pytest.mark.parametrize("nq, nk, causal, window", CASES)
def test_float_reference(nq, nk, causal, window):
    rng = np.random.default_rng(nq * 31 + nk)
    q, k, v = (rng.standard_normal((n, 8)) for n in (nq, nk, nk))
    got = ref.attention_head(q, k, v, causal=causal, window=window, block=3, chunk=4)
    assert np.allclose(got, dense(q, k, v, fa_mask(nq, nk, causal, window)), atol=1e-12)


def test_rows_that_see_nothing_are_zero():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((n, 4)) for n in (8, 4, 4))
    out = ref.attention_head(q, k, v, window=(0, 0))     # row i sees key i − 4 only
    assert np.all(out[:4] == 0) and np.all(np.abs(out[4:]) > 0)
    wl = C.Workload(seq_q=8, seq_k=4, head_dim=4, window_left=0, window_right=0)
    qi, kk, vi = (rng.integers(-100, 100, size=(n, 4)) for n in (8, 4, 4))
    o = nm.attention_int(TINY, wl, qi[None, None], kk[None, None], vi[None, None], 0.01, 0.01)
    assert np.all(o[0, 0, :4] == 0)


@pytest.mark.parametrize("hw", [TINY, C.fpga()])
@pytest.mark.parametrize("nq, nk, causal, window", CASES[:6])
def test_integer_model_stepwise_equals_vectorized(hw, nq, nk, causal, window):
    rng = np.random.default_rng(7)
    lim = 1 << (hw.data_bits - 1)
    q, k, v = (rng.integers(-lim, lim, size=(n, 16)) for n in (nq, nk, nk))
    sp = nm.softmax_scale(hw, 0.02, 0.03, 16)
    a = nm.attention_head_stepwise(hw, q, k, v, sp, causal, window=window)
    b = nm.attention_head(hw, q, k, v, sp, causal, window=window)
    assert np.array_equal(a, b)


@pytest.mark.parametrize("n, causal, window", [(300, True, (40, 0)), (256, False, (17, 5)),
                                               (200, False, (-1, 3))])
def test_integer_model_keeps_the_contract_with_windows(n, causal, window):
    wl = C.Workload(seq_q=n, seq_k=n, head_dim=32, causal=causal, window_left=window[0],
                    window_right=window[1])
    m = golden_check(TINY, wl, "gaussian", seed=2)
    assert m["ok"], m


def test_bad_windows_are_refused():
    for bad in ((-2, 0), (1,), "ab", (1.5, 2), (True, 0)):
        with pytest.raises(C.ConfigError, match="window"):
            check_window(bad)
    with pytest.raises(C.ConfigError, match="window_left=-3"):
        C.Workload(seq_q=4, seq_k=4, head_dim=4, window_left=-3)


def test_api_and_cli_take_windows():
    from click.testing import CliRunner

    import attenio
    from attenio.app.cli import main

    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 2, 96, 16)) for _ in range(3))
    exact = attenio.reference_attention(q, k, v, causal=True, window=(10, 0), layout="bhsd")
    got = attenio.attention(q, k, v, causal=True, window=(10, 0), preset="fpga", layout="bhsd")
    full = attenio.reference_attention(q, k, v, causal=True, layout="bhsd")
    # int8 inputs: the error is quantization's, far below the window's effect
    err = np.abs(got - exact).max()
    assert err < 0.05 and err < np.abs(got - full).max() / 10
    res = CliRunner().invoke(main, ["golden", "--preset", "tiny", "--n", "128", "--d", "16",
                                    "--causal", "--window", "12"])
    assert res.exit_code == 0 and "window=12,12" in res.output and "PASS" in res.output
