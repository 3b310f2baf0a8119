"""GQA heads interleaved in a windowed tile (``COMPUTE.head_pos``, issue #45: gpt-oss's short
windows) and row-group skipping at a window's upper edge, on the RTL: each row group holds
``mac_lines/g`` positions of every head of the group, so a step skips the groups its key's
window does not reach (and, causal, the ones below its diagonal), as one head's tile does; Q
and O lie position by position so a position's heads move in one burst. Bit-exact with the
integer model, cycle-exact with the schedule, within the float64 contract, with sinks, ALiBi,
statistics, a varlen batch, a paged decode batch and AXI backpressure."""

import pytest

from attenio.base import config as C
from attenio.contract.program import Op
from attenio.verify.runner import simulate
from tests.cocotb.variant_models import EVERY_UNIT

TINY = C.preset("tiny")


def windowed(nq, nk, d, window, causal, **kw):
    return C.Workload(seq_q=nq, seq_k=nk, head_dim=d, causal=causal, window_left=window[0],
                      window_right=window[1], **kw)


CASES = [
    # one position a row group (4 heads on 4 lines), causal window
    (TINY, windowed(24, 24, 8, (5, 0), True, heads=4, kv_heads=1), {}),
    # two positions a group, a window on both sides, more keys than queries, lse
    (TINY, windowed(20, 30, 8, (3, 2), False, heads=4, kv_heads=2, lse=True), {}),
    # one head: the window's upper edge skips row groups of a plain tile too
    (TINY, windowed(40, 40, 12, (6, -1), True), {}),
    (EVERY_UNIT, windowed(28, 28, 8, (7, 0), True, heads=4, kv_heads=1),
     {"sinks": [0.5, -1.0, 2.0, 1.0]}),
    (EVERY_UNIT, windowed(22, 22, 8, (6, 0), True, heads=2, kv_heads=1),
     {"alibi_slopes": [0.25, 0.0625]}),
    (C.fpga(), windowed(96, 96, 64, (31, 0), True, heads=4, kv_heads=1), {}),
]


@pytest.mark.parametrize("hw, wl, kw", CASES)
def test_head_pos_bit_exact_and_cycle_exact(hw, wl, kw):
    r = simulate(hw, wl, seed=4, log=lambda *a: None, **kw)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles
    assert r.errors["max_rel"] <= 1e-3
    comps = [i for i in r.schedule.program if i.op == Op.COMPUTE]
    if wl.group_size > 1:           # the tiles interleave their heads (positions are heads)
        assert r.schedule.tiling.head_pos and r.schedule.layout.token_major
        assert all(c.args["head_pos"] == 1 and c.rows == r.schedule.tiling.heads_per_tile
                   for c in comps)


def test_head_pos_varlen_under_backpressure():
    wl = C.VarlenWorkload(seqlens_q=[9, 17, 4], seqlens_k=[9, 17, 4], head_dim=8, heads=4,
                          kv_heads=2, causal=True, window_left=4, window_right=0)
    r = simulate(TINY, wl, seed=6, p_stall=0.3, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert any(c.args.get("head_pos") for c in r.schedule.program if c.op == Op.COMPUTE)


def test_head_pos_paged_windowed_decode():
    # decode: one query a sequence; the window still hides old keys of the longer caches
    wl = C.VarlenWorkload(seqlens_q=[1] * 3, seqlens_k=[19, 6, 33], head_dim=8, heads=4,
                          kv_heads=1, causal=True, window_left=8, window_right=0, page_size=4)
    r = simulate(TINY, wl, seed=2, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles
