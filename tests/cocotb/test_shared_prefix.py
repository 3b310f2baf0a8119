"""Shared prefixes read once (issue #46): decode sequences whose block tables begin with the
same pages share one tile a K/V head; its first part streams the shared pages once to every
sequence's rows, then a part a sequence streams its own pages to its rows alone
(``COMPUTE.select``), continuing their softmax (``COMPUTE.cont``). On the RTL: bit-exact with
the integer model of each sequence's own decode, cycle-exact with the schedule, under AXI
backpressure, with sinks and statistics."""

import pytest

from attenio.base import config as C
from attenio.contract.program import Op
from attenio.verify.runner import simulate
from tests.cocotb.variant_models import EVERY_UNIT

TINY = C.preset("tiny")


def decode(lens, heads=4, kv_heads=2, d=8, page=4, **kw):
    return C.VarlenWorkload(seqlens_q=[1] * len(lens), seqlens_k=lens, head_dim=d,
                            heads=heads, kv_heads=kv_heads, page_size=page, **kw)


CASES = [
    # three sequences sharing two pages, own tails of 5, 1 and 3 keys
    (TINY, decode([13, 9, 11]), [[0, 1, 2, 3], [0, 1, 4], [0, 1, 5]], {}),
    # three query heads a K/V head: a sequence's rows cross a row group; one sequence has
    # no keys of its own; an unshared sequence between two runs; statistics
    (TINY, decode([8, 12, 10, 7, 9], heads=6, kv_heads=2, lse=True),
     [[0, 1], [0, 1, 2], [3, 4, 5], [6, 7], [6, 7, 8]], {}),
    # one query head a K/V head (MHA), sinks, backpressure below
    (EVERY_UNIT, decode([17, 21, 6], heads=2, kv_heads=2),
     [[9, 8, 7, 1, 2], [9, 8, 7, 3, 4, 5], [9, 0]], {"sinks": [0.5, -1.0]}),
    # the fpga preset (8 lines, d = 64), four sequences sharing three pages of 8
    (C.fpga(), decode([40, 27, 31, 25], heads=8, kv_heads=2, d=64, page=8),
     [[0, 1, 2, 3, 4], [0, 1, 2, 5], [0, 1, 2, 6], [0, 1, 2, 7]], {}),
]


@pytest.mark.parametrize("hw, wl, table, kw", CASES)
def test_shared_prefix_bit_exact_and_cycle_exact(hw, wl, table, kw):
    r = simulate(hw, wl, seed=3, log=lambda *a: None, block_table=table, share_prefix=True,
                 **kw)
    assert r.failures() == [], r.failures()
    assert r.schedule.shared_runs
    comps = [i for i in r.schedule.program if i.op == Op.COMPUTE]
    assert any(c.args.get("select") for c in comps)
    assert r.cycles == r.predicted_cycles
    assert r.errors["max_rel"] <= 1e-3
    # every shared page is read once a K/V head: fewer bytes than the same batch unshared
    alone = simulate(hw, wl, seed=3, log=lambda *a: None, block_table=table,
                     share_prefix=False, check=False, **kw)
    assert r.schedule.read_bytes < alone.schedule.read_bytes
    assert (r.out == alone.out).all()          # the same bits as each sequence alone


def test_shared_prefix_under_backpressure():
    wl = decode([14, 10, 13], heads=4, kv_heads=1)
    r = simulate(TINY, wl, seed=5, p_stall=0.3, log=lambda *a: None, share_prefix=True,
                 block_table=[[2, 3, 0, 1], [2, 3, 4], [2, 3, 5, 6]])
    assert r.failures() == [], r.failures()
    assert r.schedule.shared_runs == [(0, 3, 2)]
