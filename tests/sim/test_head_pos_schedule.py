"""Windowed GQA tiles with their heads interleaved (``COMPUTE.head_pos``) in the schedule: the
program's masks, read as the hardware reads them (row ρ at position ρ >> log2(rows)), give
FlashAttention's mask for every head; bytes equal the closed form; the row-group skipping at
both edges of a window is exact under the steady-state shortcut and the remembered tile rests,
and it is what makes gpt-oss's 128-token windows cheap."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.contract.program import Op
from attenio.model import io_analysis as io
from attenio.sim import schedule as S
from attenio.sim import tile_loop
from attenio.sim.program import program_tiles

from ..model.test_window import fa_mask

TINY, ASP = C.tiny(), C.asplos26()


def windowed(nq, nk, d, window, causal, **kw):
    return C.Workload(seq_q=nq, seq_k=nk, head_dim=d, causal=causal, window_left=window[0],
                      window_right=window[1], **kw)


CASES = [
    (TINY, windowed(60, 60, 8, (7, 0), True, heads=4, kv_heads=1)),
    (TINY, windowed(50, 70, 8, (5, 3), False, heads=4, kv_heads=2)),
    (TINY, windowed(90, 90, 16, (9, -1), True, heads=2, kv_heads=1)),
    (ASP, windowed(1200, 1200, 64, (127, 0), True, heads=16, kv_heads=2)),
]


@pytest.mark.parametrize("hw,wl", CASES)
def test_interleaved_tiles_mask_as_flashattention(hw, wl):
    sch = S.schedule(hw, wl, keep_spans=False)
    assert sch.tiling.head_pos and sch.layout.token_major
    assert (sch.read_bytes, sch.write_bytes) == (sch.traffic.read_bytes, sch.traffic.write_bytes)
    mask = fa_mask(wl.seq_q, wl.seq_k, wl.causal, wl.window)
    comps = [i for i in sch.program if i.op == Op.COMPUTE]
    g = sch.tiling.heads_per_tile
    for t, c in zip(program_tiles(wl, sch.tiling), comps, strict=True):
        a = c.args
        assert (a["head_pos"], a["rows"], a["heads"]) == (1, g, t.rows)
        # the tile's rows as the core numbers them: position ρ >> log2(g), head ρ mod g
        rho = np.arange(a["rows"] * a["heads"])
        pos = (rho >> (g.bit_length() - 1))[:, None] + a["q_pos"]
        keys = np.arange(a["keys"])[None, :]
        ok = np.ones((len(rho), a["keys"]), dtype=bool)
        if a["causal"]:
            ok &= keys <= pos + a["diag"]
        if a["window"]:
            ok &= keys >= pos + a["win_diag"]
        want = mask[t.p0:t.p0 + t.rows, t.first:t.first + t.keys]
        for h in range(g):
            assert np.array_equal(ok[h::g], want)


@pytest.mark.parametrize("hw,wl", CASES[::3])
def test_skipping_shortcuts_stay_exact(monkeypatch, hw, wl):
    fast = S.schedule(hw, wl, keep_spans=False)
    monkeypatch.setattr(tile_loop, "STEADY_STATE_SKIP", False)
    monkeypatch.setattr(tile_loop, "SUFFIX_MEMO", False)
    slow = S.schedule(hw, wl, keep_spans=False)
    assert (fast.total_cycles, fast.busy, fast.stalls) == \
        (slow.total_cycles, slow.busy, slow.stalls)


def test_window_edges_skip_row_groups(monkeypatch):
    # one head: the window's upper edge alone skips groups (causal skipping was there before)
    wl = windowed(8192, 8192, 128, (4095, 0), True)
    with_skip = S.schedule(ASP, wl, keep_spans=False)
    monkeypatch.setattr(tile_loop, "ROW_GROUP_SKIP", False)
    without = S.schedule(ASP, wl, keep_spans=False)
    assert with_skip.busy["pe"] < without.busy["pe"]
    assert with_skip.useful_macs == without.useful_macs


def test_gpt_oss_windows_interleaved_against_one_head_a_tile():
    # gpt-oss: 64 query heads on 8 K/V heads, d = 64, 128-token windows (model/zoo.toml)
    wl = windowed(4096, 4096, 64, (127, 0), True, heads=64, kv_heads=8)
    packed = S.schedule(ASP, wl, keep_spans=False)
    alone = io.choose_tiling(ASP, wl, pack=False)
    one = S.schedule(ASP, wl, keep_spans=False, tiling=alone)
    assert packed.tiling.head_pos and not one.tiling.head_pos
    assert packed.total_cycles * 2 < one.total_cycles       # 2.87 M against 7.37 M cycles
    assert packed.pe_util_mac > 0.7
