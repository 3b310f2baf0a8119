"""The float64 reference: against a naive softmax, GQA, causal alignment, bounded memory."""

import tracemalloc

import numpy as np
import pytest

from attenio.base.errors import ConfigError
from attenio.model import reference as ref


def naive(q, k, v, causal=False):
    s = q @ k.T / np.sqrt(q.shape[1])
    if causal:
        nq, nk = s.shape
        s = np.where(np.arange(nk)[None, :] <= np.arange(nq)[:, None] + nk - nq, s, -np.inf)
    with np.errstate(invalid="ignore"):
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out = p @ v / p.sum(axis=1, keepdims=True)
    return np.nan_to_num(out)


@pytest.mark.parametrize("nq,nk,causal", [(1, 1, False), (37, 300, False), (300, 37, True),
                                          (130, 130, True), (64, 200, True)])
def test_matches_naive(nq, nk, causal):
    rng = np.random.default_rng(nq * nk)
    q, k, v = rng.standard_normal((nq, 16)), rng.standard_normal((nk, 16)), \
        rng.standard_normal((nk, 16))
    got = ref.attention_head(q, k, v, causal=causal, block=17, chunk=23)
    np.testing.assert_allclose(got, naive(q, k, v, causal), rtol=1e-12, atol=1e-12)


def test_rows_without_keys_are_zero():
    rng = np.random.default_rng(0)
    out = ref.attention_head(rng.standard_normal((10, 4)), rng.standard_normal((3, 4)),
                             rng.standard_normal((3, 4)), causal=True)
    assert np.all(out[:7] == 0) and np.all(out[7:] != 0)


def test_gqa_batch_heads():
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, 6, 20, 8))
    k = rng.standard_normal((2, 3, 25, 8))
    v = rng.standard_normal((2, 3, 25, 8))
    out = ref.attention(q, k, v, causal=True)
    for b in range(2):
        for h in range(6):
            np.testing.assert_allclose(out[b, h], naive(q[b, h], k[b, h // 2], v[b, h // 2],
                                                        True), rtol=1e-12, atol=1e-12)


def test_bad_shapes():
    x = np.zeros((1, 4, 8, 8))
    with pytest.raises(ConfigError, match="kv_heads=3"):
        ref.attention(x, np.zeros((1, 3, 8, 8)), np.zeros((1, 3, 8, 8)))
    with pytest.raises(ConfigError, match="v.shape"):
        ref.attention(x, np.zeros((1, 2, 8, 8)), np.zeros((1, 2, 9, 8)))
    with pytest.raises(ConfigError, match="q.ndim=3"):
        ref.attention(np.zeros((4, 8, 8)), x, x)


def test_memory_is_linear_in_n():
    n, d = 8192, 4
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((n, d)) for _ in range(3))
    tracemalloc.start()
    ref.attention_head(q, k, v, block=256, chunk=256)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < n * n * 8 / 32  # an N×N float64 matrix would be 512 MiB; this stays ~MiB


def test_error_metrics_uses_v_range():
    m = ref.error_metrics(np.array([1.0, 2.0]), np.array([1.0, 2.5]), np.array([-1.0, 4.0]))
    assert m["max_abs"] == 0.5 and m["v_range"] == 5.0 and m["max_rel"] == 0.1
    assert ref.error_metrics(np.zeros(2), np.zeros(2), np.full(3, 2.0))["v_range"] == 2.0


def test_a_softmax_scale_the_hardware_carries_matches_a_softmax_written_here():
    """--softmax-scale (issue #45, item 1's scale): the same integers with Q's scale times
    s·√d, so the multiplier applies s; the integer model against softmax(s·Q Kᵀ) V written
    out here in NumPy (not the project's reference), at Gemma 2 27B's 1/√144 with d = 128."""
    import numpy as np

    from attenio.base import config as C
    from attenio.model import numerics as nm
    from attenio.model.golden import golden_output, multipliers, quantized_inputs

    hw = C.fpga()
    wl = C.Workload(seq_q=64, seq_k=96, head_dim=128, causal=True)
    s = 1 / 12
    plain = quantized_inputs(hw, wl, "gaussian", 3)
    inp = quantized_inputs(hw, wl, "gaussian", 3, softmax_scale=s)
    assert np.array_equal(inp.q, plain.q) and np.array_equal(inp.k, plain.k)
    assert inp.sq == pytest.approx(plain.sq * s * np.sqrt(128))
    assert multipliers(hw, wl, inp).c_m != multipliers(hw, wl, plain).c_m
    q = (inp.q * plain.sq)[0, 0]            # Q as quantized, before the scale rides on it
    k = (inp.k * inp.sk)[0, 0]
    v = (inp.v * inp.sv)[0, 0]
    logits = s * q @ k.T
    seen = np.arange(96)[None, :] <= np.arange(64)[:, None] + 32     # causal, bottom-right
    logits = np.where(seen, logits, -np.inf)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ v
    got = nm.dequantize_output(hw, golden_output(hw, wl, inp), inp.sv)[0, 0]
    span = v.max() - v.min()
    assert np.abs(got - want).max() < 1e-3 * span
    # and 1/√d itself is the default
    default = quantized_inputs(hw, wl, "gaussian", 3, softmax_scale=128 ** -0.5)
    assert default.sq == pytest.approx(plain.sq)
