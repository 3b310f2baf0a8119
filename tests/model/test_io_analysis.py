"""Closed-form traffic: the paper's Fig. 11, optimality of the tiling, causal and GQA."""

import math

import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.model import io_analysis as io

HW = C.asplos26()
NS = [8192, 16384, 32768, 65536, 131072]


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs))


@pytest.mark.parametrize("d,expected", [
    (64, {"flat": 274, "standard": 57, "fa2": 27}),
    (128, {"flat": 149, "standard": 16, "fa2": 7.3}),
])
def test_fig11_traffic_ratios(d, expected):
    """Paper Fig. 11: baseline / AttenIO data movement, geomean over N = 8K..128K."""
    a = io.attenio_rows_eq14(io.memory_elements(HW), d)
    for flow, want in expected.items():
        ratios = []
        for n in NS:
            wl = C.Workload.square(n, d)
            base = io.workload_traffic(HW, wl, "attenio", io.Tiling("attenio", rows=a))
            ratios.append(io.workload_traffic(HW, wl, flow).elements / base.elements)
        assert geomean(ratios) == pytest.approx(want, rel=0.10), flow


def test_eq14_and_eq15():
    m, d, n = 262144, 64, 131072
    a = io.attenio_rows_eq14(m, d)
    assert a == (m - d) // (2 * d + 4)
    wl = C.Workload.square(n, d)
    t = io.workload_traffic(HW, wl, "attenio", io.Tiling("attenio", rows=a)).elements
    assert t == 2 * n * d * (1 + -(-n // a))
    # Eq. 15 (continuous a): within the rounding of a and of N/a
    assert t == pytest.approx(2 * n * d + 4 * n * n * d * (d + 2) / (m - d), rel=0.02)


@pytest.mark.parametrize("n,d,m", [(64, 4, 200), (100, 3, 150), (50, 8, 400), (37, 2, 90)])
def test_exhaustive_search_finds_nothing_below_the_optimum(n, d, m):
    best, _, _ = io.search_attenio_tiling(n, d, m)
    a = io.attenio_rows_eq14(m, d)
    assert best == 2 * n * d * (1 + -(-n // a))


def test_memory_too_small_names_the_need():
    with pytest.raises(ConfigError, match=r"head_dim=64.*at least 196 elements"):
        io.attenio_rows_eq14(150, 64)


def test_compulsory_and_lower_bound():
    wl = C.Workload.square(1024, 64)
    assert io.compulsory(wl) == 4 * 1024 * 64
    assert io.lower_bound_reference(1024, 64, 4096) == 4 * 1024**2 * 64**2 / 4096


def test_causal_skipping_halves_traffic_at_long_n():
    for n in (16384, 32768, 65536):
        full = io.workload_traffic(HW, C.Workload.square(n, 64))
        causal = io.workload_traffic(HW, C.Workload.square(n, 64, causal=True))
        assert causal.elements <= 0.6 * full.elements


def test_causal_counts_only_visible_keys():
    hw = C.tiny()  # 64-row tiles
    wl = C.Workload.square(200, 8, causal=True)
    t = io.workload_traffic(hw, wl)
    # the 8-row remainder tile goes first: tiles end at rows 7, 71, 135, 199
    assert t.reads["K"] == 8 * (8 + 72 + 136 + 200)
    assert io.query_tiles(200, 64, True) == [(0, 8), (8, 64), (72, 64), (136, 64)]
    assert io.query_tiles(200, 64, False) == [(0, 64), (64, 64), (128, 64), (192, 8)]


def test_gqa_shares_kv_passes():
    hw = C.tiny()
    mha = C.Workload(seq_q=16, seq_k=256, head_dim=8, heads=4, kv_heads=4)
    gqa = C.Workload(seq_q=16, seq_k=256, head_dim=8, heads=4, kv_heads=1)
    t_gqa = io.workload_traffic(hw, gqa)
    tiling = io.choose_tiling(hw, gqa)
    assert tiling.heads_per_tile == 4
    # one K/V head, one pass for all four query heads (4·16 rows fit the 64-row tile)
    assert t_gqa.reads["K"] == 256 * 8
    unshared = io.workload_traffic(hw, gqa, tiling=io.Tiling("attenio", rows=64))
    assert unshared.reads["K"] == 4 * t_gqa.reads["K"]
    assert io.workload_traffic(hw, mha).reads["K"] == 4 * 256 * 8


def test_fa2_tiles_follow_the_papers_rule():
    t = io.choose_tiling(HW, C.Workload.square(8192, 64), "fa2")
    assert (t.rows, t.keys_per_step) == (64, 1024)
    t = io.choose_tiling(HW, C.Workload.square(8192, 64), "fa2-uncapped")
    assert t.rows == 1024


def test_small_tiles_take_several_keys_per_step():
    # one row per MAC line: 1007 rows fill the 64 lines, so b stays 1 (the paper's tile)
    t = io.choose_tiling(HW, C.Workload.square(8192, 128))
    assert (t.rows, t.keys_per_step) == (1007, 1)
    fpga4 = C.replace(C.fpga(), max_keys_per_step=4)
    t1 = io.choose_tiling(fpga4, C.Workload(seq_q=1, seq_k=64, head_dim=64))  # 1 row, 4 lines
    assert t1.keys_per_step == 4
    t2 = io.choose_tiling(fpga4, C.Workload(seq_q=2, seq_k=64, head_dim=64))  # 2 rows, 4 lines
    assert t2.keys_per_step == 2
    # the preset builds no chains: one key per step
    assert io.choose_tiling(C.fpga(), C.Workload(seq_q=2, seq_k=64, head_dim=64)).keys_per_step == 1


def test_unknown_dataflow():
    with pytest.raises(ConfigError, match=r"dataflow='fa3'.*attenio, fa2"):
        io.choose_tiling(HW, C.Workload.square(64, 64), "fa3")
