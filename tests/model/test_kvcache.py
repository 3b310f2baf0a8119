"""``attenio.attention_with_kvcache`` (FlashAttention's ``flash_attn_with_kvcache``): new
queries against contiguous or paged K/V caches, checked against a softmax written out here
(the keys each row sees, listed by hand from the cache and the block table) and against the
varlen path on the gathered keys."""

import numpy as np
import pytest

import attenio
from attenio.base.errors import ConfigError

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
    with pytest.raises(ConfigError, match=r"cache_seqlens\[2\]=-1"):
        attenio.attention_with_kvcache(q, kc, vc, [9, 3, -1], table)
    with pytest.raises(ConfigError, match=r"block_table\[0\]"):
        attenio.attention_with_kvcache(q, kc, vc, [30, 3, 16], table[:, :2])
    with pytest.raises(ConfigError, match=r"cache_seqlens\[0\]=21"):
        attenio.attention_with_kvcache(q, kc[:3, :, :, :], vc[:3], [21, 3, 16])
    with pytest.raises(ConfigError, match="q="):
        attenio.attention_with_kvcache(q[0], kc, vc, lens, table)


def _gathered(cache, table, lens, page):
    """Each sequence's first ``lens[b]`` keys gathered from the pool by hand, packed."""
    return np.concatenate([np.stack([cache[table[b][j // page], j % page] for j in range(n)])
                           for b, n in enumerate(lens)])


def test_shared_pages_padding_and_partial_pages_match_the_reference():
    # prefix caching: sequences 0 and 2 share their first page; −1 pads the rows as vLLM
    # does; no length is a multiple of the page; the pool has pages no one reads (garbage)
    page, lens = 4, [9, 3, 6]
    table = [[5, 2, 7, -1], [0, -1, -1, -1], [5, 3, -1, -1]]
    kc, vc = RNG.standard_normal((2, 9, page, 2, 8))
    kc[[1, 4, 6, 8]] = 1e6                                 # unread pages leave no trace
    q = RNG.standard_normal((3, 2, 4, 8))
    out, lse = attenio.attention_with_kvcache(q, kc, vc, lens, table, causal=True,
                                              return_lse=True)
    cu = [0, *np.cumsum(lens).tolist()]
    ref = attenio.reference_attention_varlen(
        q.reshape(6, 4, 8), _gathered(kc, table, lens, page), _gathered(vc, table, lens, page),
        [0, 2, 4, 6], cu, causal=True).reshape(3, 2, 4, 8)
    # int8 on unit-variance inputs: the quantization's order of error (as above)
    assert np.abs(out - ref).max() < 0.08
    assert lse.shape == (3, 4, 2) and np.isfinite(lse).all()
    # the same integer datapath as on the caches gathered by hand into contiguous rows: bit
    # for bit (the host's scales see the same keys: the pages no sequence reads take no part)
    flat_k, flat_v = np.zeros((2, 3, 9, 2, 8))
    for b, n in enumerate(lens):
        for j in range(n):
            flat_k[b, j] = kc[table[b][j // page], j % page]
            flat_v[b, j] = vc[table[b][j // page], j % page]
    flat, flat_lse = attenio.attention_with_kvcache(q, flat_k, flat_v, lens, causal=True,
                                                    return_lse=True)
    assert np.array_equal(out, flat) and np.array_equal(lse, flat_lse)


def test_paged_cache_reads_the_pool_where_it_lies(monkeypatch):
    # the integer model reads each sequence's keys through the table (BlockTable.key_rows),
    # not from a gathered copy: the pool reaches it whole
    from attenio.model import numerics as nm

    seen = {}
    original = nm.attention_int

    def spy(cfg, wl, q, k, v, *a, **kw):
        seen["k"], seen["table"] = np.shape(k), kw.get("table")
        return original(cfg, wl, q, k, v, *a, **kw)

    monkeypatch.setattr(nm, "attention_int", spy)
    q, kc, vc, lens, table, page = _paged_case()
    attenio.attention_with_kvcache(q, kc, vc, lens, table)
    assert seen["k"] == (1, kc.shape[2], kc.shape[0] * page, kc.shape[3])
    assert seen["table"].rows[0][:3] == tuple(table[0][:3])


@pytest.mark.parametrize("change,match", [
    (lambda t, n: ([[0.7, *t[0][1:]], *t[1:]], n),
     r"block_table\[0\]\[0\]=0.7 is invalid: must be an integer in \[-1, 10\]"),
    (lambda t, n: (t, [9.0, 3, 16]), r"cache_seqlens\[0\]=9.0 is invalid: must be an integer"),
    (lambda t, n: (t, [9, 3]), (r"cache_seqlens='2 lengths' is invalid: one per sequence of "
                               r"q's batch, 3")),
    (lambda t, n: (t[:2], n), r"block_table='2 rows' is invalid: one per sequence: 3"),
    (lambda t, n: (t[:, :2], [9, 3, 16]), (r"block_table\[0\]='2 pages' is invalid: sequence 0 "
                                          r"has 9 keys: it needs 3 pages of 4")),
    (lambda t, n: (np.where(np.arange(5) == 1, -1, t), n),
     r"block_table\[0\]\[1\]=-1 is invalid: sequence 0 needs page 1 \(its keys 4 … 7\)"),
    (lambda t, n: (t, [9, 3, 45]), (r"cache_seqlens\[2\]=45 is invalid: must be in \[0, 44\] "
                                   r"\(the 11 pages of 4 keys\)")),
])
def test_bad_block_tables_and_lengths_name_the_entry(change, match):
    q, kc, vc, lens, table, page = _paged_case()
    t, n = change(table, lens)
    with pytest.raises(ConfigError, match=match):
        attenio.attention_with_kvcache(q, kc, vc, n, t)
