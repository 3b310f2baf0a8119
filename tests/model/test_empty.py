"""Empty sequences in varlen and decode batches (issue #48 item 3), as FlashAttention takes
them: a sequence with no queries adds nothing; one with no keys (an empty cache) gives rows of
0 and an lse of −∞, with no K, V or table read for it; the closed form counts exactly that."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

import attenio
from attenio.app.cli import main
from attenio.base import config as C
from attenio.base.blocktable import BlockTable
from attenio.model import io_analysis as io
from attenio.sim.plan import build_plan

RNG = np.random.default_rng(11)
TINY = C.tiny()


def test_empty_sequences_are_workloads_and_add_nothing_but_their_rows():
    wl = C.VarlenWorkload(seqlens_q=[0, 20, 5], seqlens_k=[9, 0, 5], head_dim=16)
    assert [wl.empty(i) for i in range(3)] == [True, True, False]
    plan = build_plan(TINY, wl)
    tiles = [i for i in plan.schedule.program if i.op.name == "COMPUTE"]
    loads = [i for i in plan.schedule.program if i.op.name == "LOAD_KV"]
    # no tile for the query-less sequence; the cache-less one's tiles stream no key
    assert sum(i.args["rows"] for i in tiles) == 25
    assert sum(i.args["keys"] for i in loads) == 5
    eb = TINY.element_bytes
    # only the third sequence's K/V rows are read; every query row is read and written once
    want_read = 25 * 16 * eb + 2 * 5 * 16 * eb
    assert plan.schedule.read_bytes == want_read == plan.traffic.read_bytes


def test_an_empty_cache_has_no_pages_and_its_row_may_be_all_padding():
    wl = C.VarlenWorkload(seqlens_q=[1, 1], seqlens_k=[0, 37], head_dim=16, page_size=16)
    t = BlockTable.of([[-1, -1, -1], [4, 0, 2]], [0, 37], 16)
    plan = build_plan(TINY, wl, block_table=t)
    assert plan.block_table.used(0) == () and plan.traffic.read_bytes == plan.schedule.read_bytes
    assert io.workload_traffic(TINY, wl, tiling=plan.tilings,
                               table_starts=[0, 3]).read_bytes == plan.schedule.read_bytes


@pytest.mark.parametrize("paged", [False, True])
def test_kvcache_with_an_empty_cache_gives_zero_and_minus_infinity(paged):
    lens = [0, 9, 4]
    q = RNG.standard_normal((3, 2, 4, 8))
    if paged:
        kc, vc = RNG.standard_normal((2, 6, 4, 2, 8))
        table = [[-1, -1, -1], [3, 0, 5], [1, -1, -1]]
    else:
        kc, vc = RNG.standard_normal((2, 3, 12, 2, 8))
        table = None
    out, lse = attenio.attention_with_kvcache(q, kc, vc, lens, table, causal=True,
                                              return_lse=True)
    assert np.all(out[0] == 0) and np.all(np.isneginf(lse[0]))
    assert np.isfinite(lse[1:]).all()
    for b in (1, 2):      # the others as the reference computes them from their own keys
        if paged:
            idx = [table[b][j // 4] for j in range(lens[b])]
            keys = np.stack([kc[idx[j], j % 4] for j in range(lens[b])])
            vals = np.stack([vc[idx[j], j % 4] for j in range(lens[b])])
        else:
            keys, vals = kc[b, :lens[b]], vc[b, :lens[b]]
        ref = attenio.reference_attention_varlen(q[b], keys, vals, [0, 2], [0, lens[b]],
                                                 causal=True)
        assert np.abs(out[b] - ref).max() < 0.08


def test_varlen_with_a_query_less_sequence():
    q = RNG.standard_normal((7, 2, 8))
    k, v = RNG.standard_normal((2, 12, 2, 8))
    out = attenio.attention_varlen(q, k, v, [0, 0, 7], [0, 5, 12])
    ref = attenio.reference_attention_varlen(q, k, v, [0, 0, 7], [0, 5, 12])
    assert out.shape == (7, 2, 8) and np.abs(out - ref).max() < 0.08


@pytest.mark.parametrize("args", [
    ["--decode", "--cache-lens", "0,37", "--page-size", "16", "--d", "16"],
    ["--seqlens", "0,20,5", "--seqlens-k", "9,0,5", "--d", "16", "--causal", "--lse"],
])
def test_closed_form_of_batches_with_empty_sequences(args, tmp_path):
    out = tmp_path / "s.json"
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", *args, "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["closed_form"]["equal"]


def test_all_empty_is_refused_by_name():
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--decode", "--cache-lens",
                                    "0,0", "--d", "16"])
    assert res.exit_code == 2 and "seqlens_k=[0, 0] is invalid: every sequence is empty" \
        in res.output, res.output
