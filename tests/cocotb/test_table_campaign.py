"""A seeded campaign of block tables on the tiny RTL (issue #48 item 5, in part): random page
sizes, cache lengths (empty ones too), query lengths, GQA, causal masks and windows, and tables
with pages in any order, shared between and within sequences, padded with −1. Every valid case
runs bit-exact and cycle-exact with its AXI monitors quiet; every invalid table is refused on
the host by name before a program exists; and a table the host never saw (its DRAM copy
overwritten, as a server's bug would) with an entry pointing outside the K/V window is refused
on the RTL with ADDRESS_RANGE, no burst a clean run would not make, nothing written outside the
write window, never a hang. (Hypothesis draws; CI's profile derandomizes them.)"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attenio.base import config as C
from attenio.base.blocktable import BlockTable
from attenio.base.errors import ConfigError, ErrorCode
from attenio.contract.rules import PAGE_ALIGN_LOG2
from attenio.verify.runner import prepare, simulate

from .test_top import data_reads

TINY = C.tiny()


@st.composite
def paged_batches(draw):
    page = draw(st.sampled_from([1, 2, 4, 8, 16]))
    n = draw(st.integers(1, 3))
    lens = draw(st.lists(st.integers(0, 40), min_size=n, max_size=n).filter(sum))
    rows = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n).filter(sum))
    heads, kv = draw(st.sampled_from([(1, 1), (2, 1), (4, 2)]))
    causal = draw(st.booleans())
    left = draw(st.sampled_from([-1, -1, 3, 17]))
    need = [-(-x // page) for x in lens]
    pool = sum(need) + draw(st.integers(0, 3))
    width = max(need) + draw(st.integers(0, 2))
    table = [[draw(st.integers(0, max(0, pool - 1))) for _ in range(k)] + [-1] * (width - k)
             for k in need]
    wl = C.VarlenWorkload(seqlens_q=rows, seqlens_k=lens, head_dim=8, heads=heads,
                          kv_heads=kv, causal=causal, window_left=left, page_size=page)
    return wl, table, draw(st.integers(0, 1000))


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=paged_batches())
def test_random_tables_run_bit_exact_and_cycle_exact(case):
    wl, table, seed = case
    r = simulate(TINY, wl, seed=seed, block_table=table, log=lambda *a: None)
    assert r.failures() == [], (wl, table)
    assert r.cycles == r.predicted_cycles


@settings(max_examples=40, deadline=None)
@given(lens=st.lists(st.integers(1, 30), min_size=1, max_size=4), page=st.sampled_from([2, 4]),
       fault=st.sampled_from(["short", "outside", "pad_inside", "fraction", "rows"]),
       data=st.data())
def test_random_bad_tables_are_refused_by_name(lens, page, fault, data):
    need = [-(-x // page) for x in lens]
    pool = sum(need) + 1
    table = [list(range(k)) for k in need]
    i = data.draw(st.integers(0, len(lens) - 1))
    g = data.draw(st.integers(0, need[i] - 1))
    if fault == "short":
        table[i] = table[i][:g]
        match = rf"block_table\[{i}\]='{g} pages' is invalid: sequence {i} has {lens[i]} keys"
    elif fault == "outside":
        table[i][g] = pool
        match = rf"block_table\[{i}\]\[{g}\]={pool} is invalid: must be in \[-1, {pool - 1}\]"
    elif fault == "pad_inside":
        table[i][g] = -1
        match = rf"block_table\[{i}\]\[{g}\]=-1 is invalid: sequence {i} needs page {g}"
    elif fault == "fraction":
        table[i][g] = g + 0.5
        match = rf"block_table\[{i}\]\[{g}\]={g + 0.5} is invalid: must be an integer"
    else:
        table = table + [[0]]
        match = rf"block_table='{len(lens) + 1} rows' is invalid: one per sequence: {len(lens)}"
    with pytest.raises(ConfigError, match=match):
        BlockTable.of(table, lens, page, pool)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page=st.sampled_from([2, 4, 8]), lens=st.lists(st.integers(1, 30), min_size=1,
                                                       max_size=3),
       where=st.sampled_from(["program", "q", "output", "past the end"]), data=st.data())
def test_random_tables_pointing_outside_the_kv_window_are_refused_on_the_rtl(page, lens, where,
                                                                            data):
    # a decode batch (every page of every sequence is read: no window, one query a sequence);
    # one entry of the table in DRAM overwritten after the host checked it
    wl = C.VarlenWorkload(seqlens_q=[1] * len(lens), seqlens_k=lens, head_dim=8, heads=2,
                          kv_heads=1, page_size=page)
    need = [-(-x // page) for x in lens]
    table = BlockTable.shuffle(lens, page, seed=data.draw(st.integers(0, 99)))
    i = data.draw(st.integers(0, len(lens) - 1))
    g = data.draw(st.integers(0, need[i] - 1))
    prep = prepare(TINY, wl, seed=3, block_table=table)
    lay = prep.layout
    addr = {"program": lay.program, "q": lay.q, "output": lay.o,
            "past the end": lay.end + 4096}[where]
    at = lay.tables + 4 * (lay.paged.table_start[i] + g)
    clean = simulate(TINY, wl, seed=3, block_table=table, trace=True, log=lambda *a: None)
    assert clean.failures() == []
    r = simulate(TINY, wl, seed=3, block_table=table, trace=True, check=False,
                 patch=[(at, (addr >> PAGE_ALIGN_LOG2).to_bytes(4, "little"))],
                 log=lambda *a: None)
    assert r.done and not r.timed_out, (lens, page, where)
    assert r.error == ErrorCode.ADDRESS_RANGE, (r.error, lens, page, where)
    assert r.axi_violations == 0, r.axi_report
    assert r.stray_bytes == 0
    assert data_reads(r) <= data_reads(clean), (lens, page, where)
