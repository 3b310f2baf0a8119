"""Variable-length batches (FlashAttention's ``cu_seqlens``) in the workload, both golden models
and the API, against a dense softmax over the packed tokens with the document mask written out
from FlashAttention's definition: a token sees only keys of its own sequence, causal and the
window aligned at that sequence's bottom right, a row that sees no key gives 0."""

import numpy as np
import pytest

import attenio
from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.model import numerics as nm
from attenio.model import reference as ref
from attenio.model.golden import golden_check, quantized_inputs

from .test_window import dense, fa_mask

TINY = C.tiny()


def document_mask(cu_q, cu_k, causal, window):
    """The packed [total_q, total_k] mask: FlashAttention's per sequence, nothing across."""
    m = np.zeros((cu_q[-1], cu_k[-1]), dtype=bool)
    for i in range(len(cu_q) - 1):
        nq, nk = cu_q[i + 1] - cu_q[i], cu_k[i + 1] - cu_k[i]
        m[cu_q[i]:cu_q[i + 1], cu_k[i]:cu_k[i + 1]] = fa_mask(nq, nk, causal, window)
    return m


CASES = [([0, 5, 17, 40], [0, 9, 17, 60], False, (-1, -1)),
         ([0, 5, 17, 40], [0, 9, 17, 60], True, (-1, -1)),
         ([0, 12, 13, 30], [0, 4, 20, 37], True, (3, -1)),    # rows that see nothing
         ([0, 1, 2, 3], [0, 30, 31, 64], True, (-1, -1)),     # decode: one row each
         ([0, 16, 48], [0, 16, 48], False, (4, 2))]


@pytest.mark.parametrize("cu_q, cu_k, causal, window", CASES)
def test_reference_is_the_document_mask(cu_q, cu_k, causal, window):
    rng = np.random.default_rng(len(cu_q))
    heads, kv_heads, d = 4, 2, 8
    q = rng.standard_normal((cu_q[-1], heads, d))
    k = rng.standard_normal((cu_k[-1], kv_heads, d))
    v = rng.standard_normal((cu_k[-1], kv_heads, d))
    got = attenio.reference_attention_varlen(q, k, v, cu_q, cu_k, causal=causal, window=window)
    mask = document_mask(cu_q, cu_k, causal, window)
    for h in range(heads):
        want = dense(q[:, h], k[:, h // 2], v[:, h // 2], mask)
        np.testing.assert_allclose(got[:, h], want, atol=1e-12)
    # the integer model through the API meets the float one
    out = attenio.attention_varlen(q, k, v, cu_q, cu_k, causal=causal, window=window,
                                   preset="asplos26")
    assert np.abs(out - got).max() < 1e-3 * np.abs(v).max() * 2


@pytest.mark.parametrize("cu_q, cu_k, causal, window", CASES[1:4])
def test_integer_model_per_sequence(cu_q, cu_k, causal, window):
    """Each sequence of a packed batch gives, bit for bit, what it gives run alone with the
    same scales; the stepwise model agrees with the vectorized one."""
    wl = C.VarlenWorkload.from_cu_seqlens(cu_q, cu_k, head_dim=8, heads=2, kv_heads=1,
                                          causal=causal, window_left=window[0],
                                          window_right=window[1])
    inp = quantized_inputs(TINY, wl, seed=3, q_rows=True, k_block=4)
    out = nm.attention_int(TINY, wl, inp.q, inp.k, inp.v, inp.sq, inp.sk)
    step = nm.attention_int(TINY, wl, inp.q, inp.k, inp.v, inp.sq, inp.sk, stepwise=True)
    assert np.array_equal(out, step)
    ks, sk = nm.key_reference(inp.sk)
    for i, seg in enumerate(wl.segments()):
        one = wl.sequence(i)
        for h in range(2):
            sp = nm.softmax_scale_rows(TINY, inp.sq[0, h, seg.rows, 0], sk, 8)
            sp = nm.with_key_scales(TINY, sp, ks[0, 0, seg.keys].reshape(-1), sk)
            alone = nm.attention_head(TINY, inp.q[0, h, seg.rows], inp.k[0, 0, seg.keys],
                                      inp.v[0, 0, seg.keys], sp, one.causal, window=one.window)
            assert np.array_equal(out[0, h, seg.rows], alone)


def test_golden_check_meets_the_contract():
    wl = C.VarlenWorkload(seqlens_q=[37, 100, 5], seqlens_k=[37, 120, 64], head_dim=16,
                          heads=2, causal=True)
    m = golden_check(TINY, wl)
    assert m["ok"], m


@pytest.mark.parametrize("kw, field", [
    ({"seqlens_q": [3, -1], "seqlens_k": [3, 4]}, "seqlens_q[1]"),
    ({"seqlens_q": [0, 0], "seqlens_k": [3, 4]}, "seqlens_q=[0, 0] is invalid: every sequence"),
    ({"seqlens_q": [3, 4], "seqlens_k": [3]}, "seqlens_k"),
    ({"seqlens_q": [], "seqlens_k": []}, "seqlens_q"),
    ({"seqlens_q": [3, 2.5], "seqlens_k": [3, 4]}, "seqlens_q[1]"),
    ({"seqlens_q": [3], "seqlens_k": [3], "window_left": -2}, "window_left"),
])
def test_bad_workload_names_the_field(kw, field):
    with pytest.raises(ConfigError, match=field.replace("[", r"\[")):
        C.VarlenWorkload(head_dim=8, **kw)


def test_bad_cu_seqlens_names_the_entry():
    with pytest.raises(ConfigError, match=r"cu_seqlens_q\[2\].*at least cu_seqlens_q\[1\]"):
        C.VarlenWorkload.from_cu_seqlens([0, 5, 4], [0, 3, 6], head_dim=8)
    # an empty sequence (a repeated entry) is one FlashAttention takes
    assert C.VarlenWorkload.from_cu_seqlens([0, 5, 5], [0, 3, 6], head_dim=8).seqlens_q == (5, 0)
    with pytest.raises(ConfigError, match=r"cu_seqlens_k\[0\]"):
        C.VarlenWorkload.from_cu_seqlens([0, 5], [1, 3], head_dim=8)
    with pytest.raises(ConfigError, match="as many as cu_seqlens_q"):
        C.VarlenWorkload.from_cu_seqlens([0, 5], [0, 3, 6], head_dim=8)


def test_sequence_over_the_hardware_is_named():
    wl = C.VarlenWorkload(seqlens_q=[8, 5000], seqlens_k=[8, 5000], head_dim=8)
    with pytest.raises(ConfigError, match=r"seqlens_q\[1\].*max_seq_len"):
        TINY.check_workload(wl)


def test_api_checks_the_tensors_against_the_lengths():
    q = np.zeros((10, 2, 8))
    kv = np.zeros((12, 1, 8))
    with pytest.raises(ConfigError, match=r"q.*cu_seqlens_q\[-1\] = 9"):
        attenio.reference_attention_varlen(q, kv, kv, [0, 4, 9], [0, 6, 12])
    with pytest.raises(ConfigError, match="max_seqlen_k"):
        attenio.reference_attention_varlen(q, kv, kv, [0, 4, 10], [0, 6, 12], 6, 5)
    with pytest.raises(ConfigError, match="varlen layout"):
        attenio.attention_varlen(q[None], kv, kv, [0, 4, 10], [0, 6, 12])


def test_workload_round_trips_and_shapes_the_packed_tensors():
    wl = C.VarlenWorkload(seqlens_q=[3, 9], seqlens_k=[5, 9], head_dim=8, causal=True)
    assert C.VarlenWorkload.from_dict(wl.to_dict()) == wl
    assert ref.random_inputs(wl)[0].shape == (1, 1, 12, 8)
