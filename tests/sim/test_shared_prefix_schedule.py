"""Shared prefixes read once (issue #46), in the schedule: the runs found from the block
tables alone, the program's parts, the bytes (the closed form equal to the timeline's, each
shared page read once a K/V head), the choice against the plain program, and the refusals."""

import pytest

from attenio.base import config as C
from attenio.base.blocktable import BlockTable
from attenio.base.errors import ConfigError
from attenio.contract.program import Op
from attenio.sim.plan import build_plan
from attenio.sim.shared import shared_runs

TINY = C.tiny()


def decode(lens, heads=4, kv_heads=2, page=4, **kw):
    return C.VarlenWorkload(seqlens_q=[1] * len(lens), seqlens_k=lens, head_dim=8,
                            heads=heads, kv_heads=kv_heads, page_size=page, **kw)


def test_runs_are_found_from_the_tables():
    wl = decode([13, 9, 11, 8, 10, 6])
    # 0-2 share pages 0, 1; 3 shares nothing; 4 and 5 share page 9 (5 fills only one page of
    # its two: 6 keys); a page a sequence fills only in part is never shared
    table = [[0, 1, 2, 3], [0, 1, 4], [0, 1, 5], [6, 7], [9, 10, 11], [9, 12]]
    assert shared_runs(TINY, wl, BlockTable.of(table, wl.seqlens_k, 4)) == [(0, 3, 2),
                                                                          (4, 2, 1)]
    # the last page of 8 keys is full for sequence 1 only
    wl2 = decode([8, 7])
    assert shared_runs(TINY, wl2, BlockTable.of([[0, 1], [0, 1]], [8, 7], 4)) == [(0, 2, 1)]


def test_a_long_group_is_cut_into_near_equal_runs():
    n = 300
    wl = decode([9] * n, heads=2, kv_heads=2)
    table = [[0, 1, 2 + i] for i in range(n)]
    runs = shared_runs(C.replace(TINY, tile_rows=4096), wl, BlockTable.of(table, [9] * n, 4))
    assert runs == [(0, 150, 2), (150, 150, 2)]      # not 255 and 45


def test_the_program_reads_each_shared_page_once_a_kv_head():
    wl = decode([13, 9, 11, 8, 10], lse=True)
    table = [[0, 1, 2, 3], [0, 1, 4], [0, 1, 5], [6, 7], [6, 7, 8]]
    plain = build_plan(TINY, wl, block_table=table, share_prefix=False).schedule
    s = build_plan(TINY, wl, block_table=table, share_prefix=True).schedule
    assert s.shared_runs == [(0, 3, 2), (3, 2, 2)]
    # the closed form is the timeline's count, and the K/V rows are the distinct ones
    assert (s.read_bytes, s.write_bytes) == (s.traffic.read_bytes, s.traffic.write_bytes)
    distinct = (8 + 5 + 1 + 3) + (8 + 0 + 2)       # shared keys once a run, then own keys
    assert s.traffic.reads["K"] == wl.kv_heads * distinct * 8
    assert plain.traffic.reads["K"] == wl.kv_heads * sum(wl.seqlens_k) * 8
    assert s.write_bytes == plain.write_bytes
    # one tile a run and K/V head: LOAD_Q, the parts (shared, then one a sequence with keys of
    # its own), FINALIZE, STORE_O
    comps = [i for i in s.program if i.op == Op.COMPUTE]
    assert [(c.cont, c.more, c.select, c.sel_row) for c in comps[:4]] == [
        (0, 1, 0, 0), (1, 1, 1, 0), (1, 1, 1, 2), (1, 0, 1, 4)]
    assert sum(1 for i in s.program if i.op == Op.LOAD_Q) == 2 * wl.kv_heads


def test_the_faster_program_is_kept_by_default():
    wl = decode([40, 41, 42, 43], heads=4, kv_heads=1, page=4)
    table = [list(range(10)) + [10 + i] for i in range(4)]
    auto = build_plan(TINY, wl, block_table=table).schedule
    both = [build_plan(TINY, wl, block_table=table, share_prefix=s).schedule
            for s in (False, True)]
    best = min(both, key=lambda x: (x.total_cycles, x.read_bytes))
    assert (auto.total_cycles, auto.shared_runs) == (best.total_cycles, best.shared_runs)


@pytest.mark.parametrize("wl, why", [
    (C.VarlenWorkload(seqlens_q=[2, 1], seqlens_k=[8, 8], head_dim=8, page_size=4),
     "not a decode batch"),
    (C.VarlenWorkload(seqlens_q=[1, 1], seqlens_k=[8, 8], head_dim=8, page_size=4,
                      window_left=3, window_right=0, causal=True), "a sliding window"),
    (C.VarlenWorkload(seqlens_q=[1, 1], seqlens_k=[8, 8], head_dim=8), "not a paged"),
])
def test_share_prefix_refused_where_it_cannot_apply(wl, why):
    table = [[0, 1], [0, 1]] if wl.page_size else None
    with pytest.raises(ConfigError, match=f"share_prefix.*{why}"):
        build_plan(TINY, wl, block_table=table, share_prefix=True)
