"""``attenio.attention_with_kvcache`` (FlashAttention's ``flash_attn_with_kvcache``): new
queries against contiguous or paged K/V caches, checked against a softmax written out here
(the keys each row sees, listed by hand from the cache and the block table) and against the
varlen path on the gathered keys."""

import numpy as np
import pytest

import attenio
from attenio.errors import ConfigError

RNG = np.random.default_rng(7)


def _dense(q, keys, values, causal):
    """Float softmax attention of one sequence: q [sq, heads, d], keys/values [n, kv, d]."""
    sq, h, d = q.shape
    n, hk = keys.shape[:2]
    out = np.zeros_like(q)
    for i in range(sq):
        last = n - sq + i if causal else n - 1        # bottom-right aligned
        for hh in range(h):
            kk = keys[:last + 1, hh // (h // hk)]
            s = kk @ q[i, hh] / np.sqrt(d)
            p = np.exp(s - s.max())
            out[i, hh] = p @ values[:last + 1, hh // (h // hk)] / p.sum()
    return out


def _paged_case(page=4, lens=(9, 3, 16), sq=2, h=4, hk=2, d=8):
    pages = sum(-(-n // page) for n in lens) + 3          # spare pages in the pool
    kc, vc = RNG.standard_normal((2, pages, page, hk, d))
    perm = RNG.permutation(pages)
    table, at = [], 0
    for n in lens:
        need = -(-n // page)
        table.append(list(perm[at:at + need]) + [0] * (5 - need))
        at += need
    q = RNG.standard_normal((len(lens), sq, h, d))
    return q, kc, vc, list(lens), np.array(table), page


@pytest.mark.parametrize("causal", [False, True])
def test_paged_cache_matches_a_softmax_written_out(causal):
    q, kc, vc, lens, table, page = _paged_case()
    out = attenio.attention_with_kvcache(q, kc, vc, lens, table, causal=causal, preset="fpga")
    for b, n in enumerate(lens):
        idx = [table[b][j // page] for j in range(n)]
        keys = np.stack([kc[idx[j], j % page] for j in range(n)])
        values = np.stack([vc[idx[j], j % page] for j in range(n)])
        ref = _dense(q[b], keys, values, causal)
        # int8 datapath: the accuracy contract's order of error on unit-variance inputs
        assert np.abs(out[b] - ref).max() < 0.08


def test_paged_and_contiguous_caches_agree_bit_for_bit():
    q, kc, vc, lens, table, page = _paged_case()
    flat_k = np.zeros((len(lens), 20, *kc.shape[2:]))
    flat_v = np.zeros_like(flat_k)
    for b, n in enumerate(lens):
        for j in range(n):
            flat_k[b, j] = kc[table[b][j // page], j % page]
            flat_v[b, j] = vc[table[b][j // page], j % page]
    paged = attenio.attention_with_kvcache(q, kc, vc, lens, table, causal=True)
    flat = attenio.attention_with_kvcache(q, flat_k, flat_v, lens, causal=True)
    assert np.array_equal(paged, flat)


def test_kvcache_errors_name_the_entry():
    q, kc, vc, lens, table, page = _paged_case()
    bad = table.copy()
    bad[1][0] = 999
    with pytest.raises(ConfigError, match=r"block_table\[1\]\[0\]=999"):
        attenio.attention_with_kvcache(q, kc, vc, lens, bad)
    with pytest.raises(ConfigError, match=r"cache_seqlens\[2\]=0"):
        attenio.attention_with_kvcache(q, kc, vc, [9, 3, 0], table)
    with pytest.raises(ConfigError, match=r"block_table\[0\]"):
        attenio.attention_with_kvcache(q, kc, vc, [30, 3, 16], table[:, :2])
    with pytest.raises(ConfigError, match=r"cache_seqlens\[0\]=21"):
        attenio.attention_with_kvcache(q, kc[:3, :, :, :], vc[:3], [21, 3, 16])
    with pytest.raises(ConfigError, match="q="):
        attenio.attention_with_kvcache(q[0], kc, vc, lens, table)
