"""Sliding windows in the schedule generator: each tile streams exactly the keys some row of it
sees (FlashAttention's window_size, written out as a mask), never a block wholly outside every
row's window; bytes equal the closed form; the steady-state shortcut stays exact."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.contract.program import Op
from attenio.sim import schedule as S
from attenio.sim import tile_loop
from attenio.sim.program import program_tiles

from ..model.test_window import fa_mask

TINY, FPGA, ASP = C.tiny(), C.fpga(), C.asplos26()


def windowed(nq, nk, d, window, causal, **kw):
    return C.Workload(seq_q=nq, seq_k=nk, head_dim=d, causal=causal, window_left=window[0],
                      window_right=window[1], **kw)


CASES = [
    (TINY, windowed(200, 200, 16, (30, -1), True)),
    (TINY, windowed(100, 150, 8, (20, 10), False)),
    (TINY, windowed(1, 150, 8, (20, -1), True, heads=2, kv_heads=1)),     # windowed decode
    (TINY, windowed(40, 20, 8, (3, 0), False)),                             # rows see nothing
    (FPGA, windowed(2000, 2000, 64, (300, -1), True)),
    (ASP, windowed(20000, 20000, 128, (4096, -1), True)),
]


@pytest.mark.parametrize("hw,wl", CASES)
def test_tiles_stream_exactly_the_keys_their_rows_see(hw, wl):
    sch = S.schedule(hw, wl, keep_spans=False)
    assert (sch.read_bytes, sch.write_bytes) == (sch.traffic.read_bytes, sch.traffic.write_bytes)
    mask = fa_mask(wl.seq_q, wl.seq_k, wl.causal, wl.window) if wl.seq_q * wl.seq_k < 1e6 \
        else None
    for t in program_tiles(wl, sch.tiling):
        if mask is None:
            continue
        cols = np.nonzero(mask[t.p0:t.p0 + t.rows].any(axis=0))[0]
        if len(cols) == 0:
            assert t.keys == 0
        else:
            assert (t.first, t.first + t.keys) == (cols.min(), cols.max() + 1)
    # the program's masks, applied as the hardware reads them, give FlashAttention's mask
    if mask is not None and wl.heads == 1:
        got = np.zeros_like(mask)
        comps = [i for i in sch.program if i.op == Op.COMPUTE]
        for t, c in zip(program_tiles(wl, sch.tiling), comps, strict=True):
            a = c.args
            rows = np.arange(a["rows"])[:, None] + a["q_pos"]
            keys = np.arange(a["keys"])[None, :]
            ok = np.ones((a["rows"], a["keys"]), dtype=bool)
            if a["causal"]:
                ok &= keys <= rows + a["diag"]
            if a["window"]:
                ok &= keys >= rows + a["win_diag"]
            got[t.p0:t.p0 + t.rows, t.first:t.first + t.keys] = ok
        assert np.array_equal(got, mask)


@pytest.mark.parametrize("hw,wl", CASES[::2])
def test_steady_state_skip_is_exact_with_windows(monkeypatch, hw, wl):
    fast = S.schedule(hw, wl, keep_spans=False)
    monkeypatch.setattr(tile_loop, "STEADY_STATE_SKIP", False)
    slow = S.schedule(hw, wl, keep_spans=False)
    assert (fast.total_cycles, fast.busy, fast.read_bytes) == \
        (slow.total_cycles, slow.busy, slow.read_bytes)


def test_a_window_wider_than_the_sequence_costs_nothing():
    wide = S.schedule(TINY, windowed(200, 200, 16, (500, -1), True), keep_spans=False)
    none = S.schedule(TINY, windowed(200, 200, 16, (-1, -1), True), keep_spans=False)
    assert (wide.total_cycles, wide.read_bytes) == (none.total_cycles, none.read_bytes)


def test_windows_compute_less_than_causal():
    wl = windowed(4000, 4000, 64, (256, -1), True)
    win = S.schedule(FPGA, wl, keep_spans=False)
    full = S.schedule(FPGA, C.replace(wl, window_left=-1), keep_spans=False)
    assert win.total_cycles < full.total_cycles / 5
    # its tiles are whole (the steps skip the row groups outside the window at both edges,
    # so a large tile wastes no compute and reads K/V least): the array waits on DRAM for
    # under 5% of the run
    wait = win.stalls.get("pe: waiting for K/V (DRAM)", 0)
    assert win.tiling.rows == FPGA.tile_rows and wait < 0.05 * win.total_cycles


def test_varlen_with_a_window():
    wl = C.VarlenWorkload(seqlens_q=[300, 17, 64], seqlens_k=[300, 40, 64], head_dim=16,
                          causal=True, window_left=20)
    sch = S.schedule(TINY, wl, keep_spans=False)
    assert sch.read_bytes == sch.traffic.read_bytes
