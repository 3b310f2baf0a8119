"""``return_lse`` (issue #32): each row's log-sum-exp as FlashAttention returns it, from the
statistics the accelerator writes after the row (docs/isa.md, ``STORE_O.lse``), checked
against float64 and used the way split-K decoding uses it."""

import numpy as np
import pytest

import attenio
from attenio.base.errors import ConfigError


def _lse_ref(q, k, scale, causal=False):
    """float64 log Σ exp(scale·q·k) per (batch, head, row): [b, h, nq, d] and [b, hk, nk, d]."""
    g = q.shape[1] // k.shape[1]
    s = np.einsum("bhqd,bhkd->bhqk", q, np.repeat(k, g, axis=1)) * scale
    if causal:
        nq, nk = s.shape[-2:]
        s = np.where(np.arange(nk)[None, :] <= np.arange(nq)[:, None] + nk - nq, s, -np.inf)
    mx = s.max(-1, keepdims=True)
    return (mx + np.log(np.exp(s - mx).sum(-1, keepdims=True)))[..., 0]


@pytest.mark.parametrize("preset, causal", [("fpga", False), ("fpga", True),
                                            ("asplos26", False)])
def test_lse_matches_float64(preset, causal):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 4, 50, 32)) for _ in range(3))
    k, v = k[:, :2], v[:, :2]                       # GQA
    out, lse = attenio.attention(q, k, v, causal=causal, preset=preset, layout="bhsd",
                                 return_lse=True)
    assert out.shape == q.shape and lse.shape == (2, 4, 50) and lse.dtype == np.float32
    ref = _lse_ref(q, k, 1 / np.sqrt(32), causal)
    # int8 inputs (fpga): the logits' own quantization error (measured 1.2e-2 and 2.5e-2);
    # int16 (asplos26) far below it (6.8e-5)
    assert np.abs(lse - ref).max() < (0.05 if preset == "fpga" else 3e-4)
    np.testing.assert_array_equal(attenio.attention(q, k, v, causal=causal, preset=preset,
                                                    layout="bhsd"), out)


def test_split_k_combines_two_halves_into_the_whole():
    # flash-decoding: each half of the keys on its own, combined by their lse
    rng = np.random.default_rng(5)
    q = rng.standard_normal((1, 2, 4, 64))
    k, v = rng.standard_normal((1, 2, 400, 64)), rng.standard_normal((1, 2, 400, 64))
    parts = [attenio.attention(q, k[:, :, s], v[:, :, s], preset="asplos26", layout="bhsd",
                               return_lse=True) for s in (slice(0, 200), slice(200, 400))]
    lse = np.logaddexp(parts[0][1], parts[1][1]).astype(np.float64)
    out = sum(o * np.exp(ls.astype(np.float64) - lse)[..., None] for o, ls in parts)
    exact = attenio.reference_attention(q, k, v, layout="bhsd")
    assert np.abs(out - exact).max() < 1e-4          # measured 1.7e-5 (the whole: 2.0e-5)
    assert np.abs(lse - _lse_ref(q, k, 1 / 8)).max() < 3e-4


def test_varlen_and_kvcache_lse_layouts():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 3, 4, 16))                    # [batch, seqlen_q, heads, d]
    kc, vc = rng.standard_normal((2, 30, 2, 16)), rng.standard_normal((2, 30, 2, 16))
    out, lse = attenio.attention_with_kvcache(q, kc, vc, [30, 11], causal=True,
                                              preset="asplos26", return_lse=True)
    assert out.shape == q.shape and lse.shape == (2, 4, 3)    # FA: [batch, heads, seqlen_q]
    for b, n in enumerate((30, 11)):
        one = _lse_ref(q[b:b + 1].transpose(0, 2, 1, 3), kc[b:b + 1, :n].transpose(0, 2, 1, 3),
                       0.25, causal=True)[0]
        assert np.abs(lse[b] - one).max() < 3e-4             # measured 7.6e-5
    _, lse_v = attenio.attention_varlen(q.reshape(6, 4, 16), kc.reshape(60, 2, 16),
                                        vc.reshape(60, 2, 16), [0, 3, 6], [0, 30, 60],
                                        preset="asplos26", return_lse=True)
    assert lse_v.shape == (4, 6)                              # FA varlen: [heads, total_q]


def test_a_row_that_sees_no_key_has_lse_minus_inf():
    rng = np.random.default_rng(9)
    q, k, v = (rng.standard_normal((1, 1, n, 8)) for n in (6, 3, 3))
    out, lse = attenio.attention(q, k, v, causal=True, preset="tiny", layout="bhsd",
                                 return_lse=True)
    assert np.isneginf(lse[0, 0, :3]).all() and np.isfinite(lse[0, 0, 3:]).all()
    assert (out[0, 0, :3] == 0).all()


def test_return_lse_must_be_a_flag():
    with pytest.raises(ConfigError, match="return_lse"):
        attenio.attention(np.ones((4, 8)), np.ones((4, 8)), np.ones((4, 8)), return_lse="yes")


def test_schedule_counts_the_statistics_words():
    plain = attenio.schedule(256, 64, preset="tiny")
    with_lse = attenio.schedule(256, 64, preset="tiny", lse=True)
    word = 4 * 2                                   # tiny: 4 outputs of 16 bits
    assert with_lse.write_bytes - plain.write_bytes == 256 * word
    assert with_lse.traffic.write_bytes == with_lse.write_bytes       # the closed form too
    assert with_lse.total_cycles > plain.total_cycles
