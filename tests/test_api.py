"""The Python API (app/api.py): the README's example runs as written, and each function
checks its input."""

import re
from pathlib import Path

import numpy as np
import pytest

import attenio
from attenio.base.errors import ConfigError

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_example_runs(capsys):
    block = re.search(r"## Python API\n\n```python\n(.*?)```", README, re.S).group(1)
    assert len(block.strip().splitlines()) <= 12
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "cycles, PE" in out and attenio.__version__ in out


def test_attention_is_the_integer_model():
    from attenio.base import config as C
    from attenio.model.numerics import attention_int, dequantize_output, quantize

    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, 4, 33, 16)) for _ in range(3))
    k, v = k[:, :2], v[:, :2]                                  # GQA, 2 K/V heads
    o = attenio.attention(q, k, v, preset="tiny", layout="bhsd")
    hw = C.tiny()
    (qi, sq), (ki, sk), (vi, sv) = (quantize(x, hw.data_bits) for x in (q, k, v))
    wl = C.Workload(seq_q=33, seq_k=33, head_dim=16, heads=4, kv_heads=2, batch=2)
    np.testing.assert_array_equal(o, dequantize_output(hw, attention_int(hw, wl, qi, ki, vi,
                                                                          sq, sk), sv))
    assert np.max(np.abs(o - attenio.reference_attention(q, k, v, layout="bhsd"))) < 0.05


def test_attention_with_finer_scales_on_outlier_activations():
    """The host scheme and scale granularities reach the API: on outlier-heavy activations
    rotate with per-row Q and per-block K is closer to float attention than per tensor, and
    bad options are refused by name."""
    from attenio.base import config as C
    from attenio.model import accuracy as A

    wl = C.Workload(seq_q=64, seq_k=96, head_dim=32)
    q, k, v = (x[0, 0] for x in A.make_inputs(wl, "llm-outliers", seed=2))
    exact = attenio.reference_attention(q, k, v)
    plain = attenio.attention(q, k, v)
    fine = attenio.attention(q, k, v, scheme="rotate", q_scales="row", k_block=16)
    assert fine.shape == q.shape
    assert A.rel_frobenius(fine, exact) < 0.6 * A.rel_frobenius(plain, exact)
    with pytest.raises(ConfigError, match=r"^q_scales='rows'"):
        attenio.attention(q, k, v, q_scales="rows")
    with pytest.raises(ConfigError, match=r"^k_block=0"):
        attenio.attention(q, k, v, k_block=0)
    with pytest.raises(ConfigError, match=r"^scheme='spin'"):
        attenio.attention(q, k, v, scheme="spin")


def test_bad_shapes_are_clear():
    x = np.zeros((8, 16))
    with pytest.raises(ConfigError, match=r"q=.*\[seq, d\]"):
        attenio.attention(np.zeros(5), x, x)
    with pytest.raises(ConfigError, match=r"head dim 16"):
        attenio.attention(x, np.zeros((8, 8)), np.zeros((8, 8)))
    with pytest.raises(ConfigError, match=r"head_dim=100"):
        attenio.attention(np.zeros((8, 100)), np.zeros((8, 100)), np.zeros((8, 100)),
                          preset="tiny")
    with pytest.raises(AttributeError):
        _ = attenio.nothing_here


def test_schedule_of_a_varlen_batch():
    sch = attenio.schedule(seqlens=[300, 17, 64], d=64, causal=True, preset="fpga")
    assert sch.workload.seqlens_q == (300, 17, 64) and len(sch.tilings) == 3
    with pytest.raises(ConfigError, match="seqlens"):
        attenio.schedule(100, seqlens=[3, 4])
    with pytest.raises(ConfigError, match="n=None"):
        attenio.schedule()


def test_a_4d_tensor_needs_its_layout_and_both_layouts_agree():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 40, 4, 16)).astype(np.float32) for _ in range(3))
    # FlashAttention's [batch, seq, heads, d] once read silently as 40 heads of 4 tokens
    with pytest.raises(ConfigError, match=r"layout=None is invalid: a 4-D q is"):
        attenio.attention(q, k, v)
    with pytest.raises(ConfigError, match=r"layout='bsdh' is invalid"):
        attenio.attention(q, k, v, layout="bsdh")
    fa = attenio.attention(q, k, v, layout="bshd", preset="tiny", causal=True)
    sdpa = attenio.attention(*(x.transpose(0, 2, 1, 3) for x in (q, k, v)), layout="bhsd",
                             preset="tiny", causal=True)
    assert fa.shape == q.shape and fa.dtype == np.float32       # q's layout and dtype kept
    np.testing.assert_array_equal(fa, sdpa.transpose(0, 2, 1, 3))
    ref = attenio.reference_attention(q, k, v, layout="bshd", causal=True)
    assert ref.dtype == np.float64 and np.abs(ref - fa).max() < 0.05
    # unbatched FlashAttention layout [seq, heads, d] (one scale a tensor: batch 0's own)
    one = attenio.attention(q[0], k[0], v[0], layout="bshd", preset="tiny", causal=True)
    first = attenio.attention(q[:1], k[:1], v[:1], layout="bshd", preset="tiny", causal=True)
    np.testing.assert_array_equal(one, first[0])


def test_softmax_scale_is_flashattentions():
    """``softmax_scale`` replaces 1/√d (FlashAttention's argument): against a softmax written
    out with that scale, on every entry point; 1/√d itself gives the default bit for bit; a
    bad value is refused by name."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((1, 2, 24, 16)) for _ in range(3))
    s = 0.05
    want = np.einsum("bhqk,bhkd->bhqd", _softmax(np.einsum("bhqd,bhkd->bhqk", q, k) * s), v)
    got = attenio.attention(q, k, v, preset="asplos26", layout="bhsd", softmax_scale=s)
    assert np.max(np.abs(got - want)) < 2e-3
    default = attenio.attention(q, k, v, preset="tiny", layout="bhsd")
    same = attenio.attention(q, k, v, preset="tiny", layout="bhsd", softmax_scale=16 ** -0.5)
    np.testing.assert_array_equal(default, same)
    qv = q[0].transpose(1, 0, 2)                                       # [total, heads, d]
    kv_, vv = k[0].transpose(1, 0, 2), v[0].transpose(1, 0, 2)
    got_v = attenio.attention_varlen(qv, kv_, vv, [0, 24], [0, 24], preset="asplos26",
                                     softmax_scale=s)
    np.testing.assert_array_equal(got_v, got[0].transpose(1, 0, 2))
    got_c = attenio.attention_with_kvcache(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3),
                                           v.transpose(0, 2, 1, 3), [24], preset="asplos26",
                                           softmax_scale=s)
    np.testing.assert_array_equal(got_c, got.transpose(0, 2, 1, 3))
    for bad_scale in (0.0, -1.0, float("nan"), True):
        with pytest.raises(ConfigError, match=r"^softmax_scale="):
            attenio.attention(q, k, v, preset="tiny", layout="bhsd", softmax_scale=bad_scale)


def test_softcap_is_flashattentions():
    """``softcap`` (FlashAttention's, Gemma 2's 50; here a tight 3 so the cap bites): against
    a softmax of ``c·tanh(s/c)`` written out here, causal at the bottom right, on every entry
    point (the paged cache read through its table); a preset without the soft-capping unit and
    bad caps are refused by name."""
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((1, 2, 24, 16)) * 2 for _ in range(3))
    c = 3.0
    s = np.einsum("bhqd,bhkd->bhqk", q, k) / 4.0
    s = c * np.tanh(s / c)
    s = np.where(np.tril(np.ones((24, 24), dtype=bool)), s, -np.inf)
    want = np.einsum("bhqk,bhkd->bhqd", _softmax(s), v)
    got = attenio.attention(q, k, v, preset="asplos26+softcap", layout="bhsd", causal=True,
                            softcap=c)
    assert np.max(np.abs(got - want)) < 2e-3
    plain = attenio.attention(q, k, v, preset="asplos26", layout="bhsd", causal=True)
    assert np.max(np.abs(plain - want)) > 0.05             # the cap changes the result
    qv = q[0].transpose(1, 0, 2)
    kv_, vv = k[0].transpose(1, 0, 2), v[0].transpose(1, 0, 2)
    got_v = attenio.attention_varlen(qv, kv_, vv, [0, 24], [0, 24], preset="asplos26+softcap",
                                     causal=True, softcap=c)
    np.testing.assert_array_equal(got_v, got[0].transpose(1, 0, 2))
    pages = k.transpose(0, 2, 1, 3).reshape(3, 8, 2, 16)[::-1]    # three pages, reversed
    vpages = v.transpose(0, 2, 1, 3).reshape(3, 8, 2, 16)[::-1]
    got_c = attenio.attention_with_kvcache(q.transpose(0, 2, 1, 3), pages, vpages, [24],
                                           block_table=[[2, 1, 0]], causal=True,
                                           preset="asplos26+softcap", softcap=c)
    assert np.max(np.abs(got_c - want.transpose(0, 2, 1, 3))) < 2e-3
    with pytest.raises(ConfigError, match=r"^softcap=3.0 .*no soft-capping unit"):
        attenio.attention(q, k, v, preset="asplos26", layout="bhsd", softcap=c)
    for bad_cap in (0.0, -1.0, float("nan"), True):
        with pytest.raises(ConfigError, match=r"^softcap="):
            attenio.attention(q, k, v, preset="tiny+softcap", layout="bhsd", softcap=bad_cap)


def test_sinks_are_a_softmax_column_with_no_value():
    """``sinks`` (gpt-oss's, FlashInfer's): against a softmax over the scores with one more
    column per query head holding its sink, dropped before P·V (written out here), causal at
    the bottom right, GQA, on every entry point, the lse including the sink; bad sinks and a
    preset without them are refused by name."""
    rng = np.random.default_rng(12)
    q = rng.standard_normal((1, 4, 24, 16)) * 2
    k, v = (rng.standard_normal((1, 2, 24, 16)) * 2 for _ in range(2))
    sinks = np.array([0.5, 3.0, -1.0, 6.0])
    kk, vv = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, kk) / 4.0
    s = np.where(np.tril(np.ones((24, 24), dtype=bool)), s, -np.inf)
    s = np.concatenate([s, np.broadcast_to(sinks[None, :, None, None], (1, 4, 24, 1))], -1)
    want = np.einsum("bhqk,bhkd->bhqd", _softmax(s)[..., :-1], vv)
    want_lse = np.log(np.exp(s).sum(axis=-1))
    got, lse = attenio.attention(q, k, v, preset="asplos26+sinks", layout="bhsd", causal=True,
                                 sinks=sinks, return_lse=True)
    assert np.max(np.abs(got - want)) < 2e-3 and np.max(np.abs(lse - want_lse)) < 1e-3
    plain = attenio.attention(q, k, v, preset="asplos26", layout="bhsd", causal=True)
    assert np.max(np.abs(plain - want)) > 0.05             # the sinks change the result
    qv, kv_, vv_ = (x[0].transpose(1, 0, 2) for x in (q, k, v))
    got_v = attenio.attention_varlen(qv, kv_, vv_, [0, 24], [0, 24], preset="asplos26+sinks",
                                     causal=True, sinks=sinks)
    np.testing.assert_array_equal(got_v, got[0].transpose(1, 0, 2))
    pages = k.transpose(0, 2, 1, 3).reshape(3, 8, 2, 16)[::-1]    # three pages, reversed
    vpages = v.transpose(0, 2, 1, 3).reshape(3, 8, 2, 16)[::-1]
    got_c = attenio.attention_with_kvcache(q.transpose(0, 2, 1, 3), pages, vpages, [24],
                                           block_table=[[2, 1, 0]], causal=True,
                                           preset="asplos26+sinks", sinks=sinks)
    assert np.max(np.abs(got_c - want.transpose(0, 2, 1, 3))) < 2e-3
    with pytest.raises(ConfigError, match=r"^sinks=.*NAME\+sinks"):
        attenio.attention(q, k, v, preset="asplos26", layout="bhsd", sinks=sinks)
    for bad, why in (([1.0, 2.0], "one per query head"), ([float("inf")] * 4, "finite")):
        with pytest.raises(ConfigError, match=r"^sinks=") as e:
            attenio.attention(q, k, v, preset="asplos26+sinks", layout="bhsd", sinks=bad)
        assert why in str(e.value)


def test_alibi_is_the_score_matrix_with_the_bias():
    """``alibi_slopes`` (FlashAttention's): against the scores less slope·|i + nk − nq − j|
    (written out here), causal at the bottom right with fewer queries than keys, GQA, on
    every entry point, the lse with the bias; bad slopes and a preset without the unit are
    refused by name."""
    rng = np.random.default_rng(13)
    q = rng.standard_normal((1, 4, 16, 16)) * 2
    k, v = (rng.standard_normal((1, 2, 24, 16)) * 2 for _ in range(2))
    slopes = np.array([0.5, 0.25, 0.125, 0.0])
    kk, vv = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    i, j = np.arange(16)[:, None], np.arange(24)[None, :]
    s = np.einsum("bhqd,bhkd->bhqk", q, kk) / 4.0
    s = s - slopes[None, :, None, None] * np.abs(i + 8 - j)
    s = np.where(j <= i + 8, s, -np.inf)
    want = np.einsum("bhqk,bhkd->bhqd", _softmax(s), vv)
    want_lse = np.log(np.exp(s).sum(axis=-1))
    got, lse = attenio.attention(q, k, v, preset="asplos26+alibi", layout="bhsd", causal=True,
                                 alibi_slopes=slopes, return_lse=True)
    assert np.max(np.abs(got - want)) < 2e-3 and np.max(np.abs(lse - want_lse)) < 1e-3
    plain = attenio.attention(q, k, v, preset="asplos26", layout="bhsd", causal=True)
    assert np.max(np.abs(plain - want)) > 0.05             # the bias changes the result
    qv, kv_, vv_ = (x[0].transpose(1, 0, 2) for x in (q, k, v))
    got_v = attenio.attention_varlen(qv, kv_, vv_, [0, 16], [0, 24], preset="asplos26+alibi",
                                     causal=True, alibi_slopes=slopes)
    np.testing.assert_array_equal(got_v, got[0].transpose(1, 0, 2))
    pages = k.transpose(0, 2, 1, 3).reshape(3, 8, 2, 16)[::-1]    # three pages, reversed
    vpages = v.transpose(0, 2, 1, 3).reshape(3, 8, 2, 16)[::-1]
    got_c = attenio.attention_with_kvcache(q.transpose(0, 2, 1, 3), pages, vpages, [24],
                                           block_table=[[2, 1, 0]], causal=True,
                                           preset="asplos26+alibi", alibi_slopes=slopes)
    assert np.max(np.abs(got_c - want.transpose(0, 2, 1, 3))) < 2e-3
    with pytest.raises(ConfigError, match=r"^alibi_slopes=.*NAME\+alibi"):
        attenio.attention(q, k, v, preset="asplos26", layout="bhsd", alibi_slopes=slopes)
    for bad, why in (([1.0, 2.0], "one per query head"), ([-0.5] * 4, "≥ 0"),
                     ([float("nan")], "≥ 0")):
        with pytest.raises(ConfigError, match=r"^alibi_slopes=") as e:
            attenio.attention(q, k, v, preset="asplos26+alibi", layout="bhsd",
                              alibi_slopes=bad)
        assert why in str(e.value)


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_a_3d_tensor_needs_its_layout():
    # [heads, seq, d] and FlashAttention's [seq, heads, d] (or its varlen [total, heads, d])
    # cannot be told apart by shape: a 3-D tensor without a layout is refused, as a 4-D one is
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((3, 16, 8)) for _ in range(3))     # [heads, seq, d]
    with pytest.raises(ConfigError, match=r"^layout=None is invalid: a 3-D q is \[heads, seq, "
                                          r"d\] \(layout='bhsd'\) or \[seq, heads, d\]"):
        attenio.attention(q, k, v, preset="tiny")
    with pytest.raises(ConfigError, match=r"^layout=None is invalid: a 3-D q"):
        attenio.reference_attention(q, k, v)
    hsd = attenio.attention(q, k, v, preset="tiny", layout="bhsd")
    shd = attenio.attention(*(x.transpose(1, 0, 2) for x in (q, k, v)), preset="tiny",
                            layout="bshd")
    assert shd.shape == (16, 3, 8) and np.array_equal(shd.transpose(1, 0, 2), hsd)


def test_kvcache_v_scales_per_key():
    """``v_scales="key"`` (an 8-bit serving cache's V, one scale per token and K/V head, its
    factors in the V pages): against float attention of the same caches it beats one V scale
    where the tokens differ in size; it needs a paged cache and the V factor unit."""
    rng = np.random.default_rng(21)
    # queries that weigh every key alike (Q·K = 0): the error is V's quantization alone
    q = np.zeros((2, 1, 4, 16))
    kc = rng.standard_normal((6, 8, 2, 16))
    vc = rng.standard_normal((6, 8, 2, 16)) * 10.0 ** rng.uniform(-3, 0, (6, 8, 1, 1))
    table, lens = [[4, 1, 0], [2, 5, 3]], [20, 24]
    want = []
    for b, (row, n) in enumerate(zip(table, lens, strict=True)):
        k = np.concatenate([kc[p] for p in row])[:n][None]       # [1, n, kv_heads, d]
        v = np.concatenate([vc[p] for p in row])[:n][None]
        want.append(attenio.reference_attention(q[b:b + 1], k, v, layout="bshd"))
    want = np.concatenate(want)
    err = {}
    for vs in ("tensor", "key"):
        got = attenio.attention_with_kvcache(q, kc, vc, lens, block_table=table,
                                             preset="fpga+vscales", q_scales="row", k_block=1,
                                             v_scales=vs)
        err[vs] = np.abs(got - want).max()
    assert err["key"] < 0.6 * err["tensor"], err
    with pytest.raises(ConfigError, match=r"^v_scales='key'.*block_table"):
        attenio.attention_with_kvcache(q, kc[:2], vc[:2], [8, 8], v_scales="key")
    with pytest.raises(ConfigError, match=r"^v_scale=.*NAME\+vscales"):
        attenio.attention_with_kvcache(q, kc, vc, lens, block_table=table, preset="fpga",
                                       v_scales="key")
