"""The schedule generator: bytes equal the closed form, the timeline's books balance, the
steady-state shortcut is exact, and the model behaves like hardware should."""

import dataclasses
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attenio.base import config as C
from attenio.model import io_analysis as io
from attenio.model.numerics import softmax_scale
from attenio.sim import schedule as S
from attenio.sim import tile_loop
from attenio.sim.program import build_program, program_length, program_tiles
from attenio.sim.trace import chrome_trace, write_chrome_trace, write_plot

TINY, FPGA, ASP = C.tiny(), C.fpga(), C.asplos26()

CASES = [
    (TINY, C.Workload.square(256, 64)),
    (TINY, C.Workload(seq_q=200, seq_k=77, head_dim=7, causal=True)),
    (TINY, C.Workload(seq_q=33, seq_k=300, head_dim=16, heads=4, kv_heads=2, batch=2)),
    (TINY, C.Workload(seq_q=16, seq_k=100, head_dim=8, heads=8, kv_heads=1, causal=True)),
    (FPGA, C.Workload.square(1024, 64)),
    (ASP, C.Workload.square(8192, 64)),
    (ASP, C.Workload.square(8192, 128, causal=True)),
]


@pytest.mark.parametrize("flow", ["attenio", "fa2", "fa2-uncapped"])
@pytest.mark.parametrize("hw,wl", CASES)
def test_bytes_equal_closed_form(hw, wl, flow):
    # a program's rows move as whole words: the closed form at the padded row width (d = 7
    # moves 8). The program's bytes are counted from its instructions, the closed form from
    # the tiling's algebra: two derivations. (FLAT and Standard have no program: their phase
    # models take their bytes from the closed form, checked against hand counts below.)
    sch = S.schedule(hw, wl, flow, keep_spans=False)
    moved = dataclasses.replace(wl, head_dim=hw.row_elements(wl.head_dim))
    tr = io.workload_traffic(hw, moved, flow, sch.tiling)
    assert (sch.read_bytes, sch.write_bytes) == (tr.read_bytes, tr.write_bytes)


@pytest.mark.parametrize("hw,wl", CASES)
def test_flat_and_standard_bytes_by_hand(hw, wl):
    """The phase models' bytes counted here from their definitions, not by io_analysis: FLAT
    reads Q once and K and V once per tile of R query rows (S spilled once each way when a row
    does not fit), writes O once; Standard writes S and P (N_q·N_k each) and O once, and reads
    S and P at least once and Q, K, V at least once."""
    b, ob = hw.element_bytes, hw.out_element_bytes       # inputs; outputs (out_bits wide)
    nq, nk, d = wl.seq_q, wl.seq_k, wl.head_dim
    qo = wl.batch * wl.heads * nq * d
    kv_heads = wl.batch * wl.heads         # FLAT and Standard do not share K/V across a group
    flat = S.schedule(hw, wl, "flat", keep_spans=False)
    r = flat.tiling.rows
    sizes = [r] * (nq // r)
    if nq % r:                             # the short tile: last, or first under a causal mask
        sizes = [nq % r] + sizes if wl.causal else sizes + [nq % r]
    kv_reads, p0 = 0, 0
    for rows in sizes:                     # a causal tile reads up to its last row's diagonal
        kv_reads += 2 * d * (max(0, min(nk, nk - nq + p0 + rows)) if wl.causal else nk)
        p0 += rows
    spill = nq * nk * kv_heads if "spills" in flat.tiling.notes else 0
    assert flat.read_bytes == b * (qo + kv_heads * kv_reads + spill)
    assert flat.write_bytes == ob * qo + b * spill
    std = S.schedule(hw, wl, "standard", keep_spans=False)
    s_p = kv_heads * nq * nk
    assert std.write_bytes == b * 2 * s_p + ob * qo
    assert std.read_bytes >= b * (2 * s_p + qo + 2 * kv_heads * nk * d)


@pytest.mark.parametrize("hw,wl", CASES)
def test_busy_plus_idle_is_total(hw, wl):
    sch = S.schedule(hw, wl, keep_spans=False)
    assert sch.busy["pe"] + sum(sch.stalls.values()) == sch.total_cycles
    assert all(v >= 0 for v in sch.stalls.values())
    assert 0 < sch.pe_util_mac <= sch.pe_util_time <= 1


@pytest.mark.parametrize("hw,wl,flow", [
    (C.replace(TINY, dram_bytes_per_cycle=1, dram_latency=37), C.Workload.square(300, 24),
     "attenio"),
    (C.replace(FPGA, dram_bytes_per_cycle=3, kv_ring_depth=6), C.Workload.square(700, 40),
     "attenio"),
    (TINY, C.Workload(seq_q=8, seq_k=500, head_dim=12), "attenio"),  # several keys per step
    (C.replace(ASP, dram_bytes_per_cycle=4), C.Workload.square(3000, 64, causal=True), "attenio"),
    # keys not a multiple of the block: the last K block is short, and it is loaded during
    # the step before the last (the shortcut once counted it as a whole block)
    (ASP, C.Workload.square(3000, 128, causal=True), "fa2"),
    (TINY, C.Workload(seq_q=8, seq_k=501, head_dim=12), "attenio"),
])
def test_steady_state_skip_is_exact(monkeypatch, hw, wl, flow):
    fast = S.schedule(hw, wl, flow, keep_spans=False)
    monkeypatch.setattr(tile_loop, "STEADY_STATE_SKIP", False)
    slow = S.schedule(hw, wl, flow, keep_spans=False)
    assert fast.total_cycles == slow.total_cycles
    assert fast.busy == slow.busy and fast.stalls == slow.stalls
    assert (fast.read_bytes, fast.write_bytes) == (slow.read_bytes, slow.write_bytes)


@pytest.mark.parametrize("hw,wl", [
    (ASP, C.Workload.square(32768, 64, causal=True)),
    (C.replace(ASP, dram_bytes_per_cycle=4), C.Workload.square(6000, 128, causal=True)),
    (FPGA, C.Workload(seq_q=3000, seq_k=3500, head_dim=64, heads=4, kv_heads=2, causal=True)),
    (FPGA, C.Workload(seq_q=3000, seq_k=3000, head_dim=64, causal=True, window_left=700)),
    (TINY, C.Workload(seq_q=1000, seq_k=1000, head_dim=16, causal=True, batch=2)),
    (ASP, C.VarlenWorkload(seqlens_q=[4000, 2500, 4000], seqlens_k=[4000, 2600, 4000],
                           head_dim=128, causal=True)),
])
def test_causal_tile_suffix_memo_is_exact(monkeypatch, hw, wl):
    fast = S.schedule(hw, wl, keep_spans=False)
    monkeypatch.setattr(tile_loop, "SUFFIX_MEMO", False)
    slow = S.schedule(hw, wl, keep_spans=False)
    assert fast.total_cycles == slow.total_cycles
    assert fast.busy == slow.busy and fast.stalls == slow.stalls
    assert (fast.read_bytes, fast.write_bytes) == (slow.read_bytes, slow.write_bytes)
    # and the same as the schedule with spans, which never uses the memos
    assert fast.total_cycles == S.schedule(hw, wl).total_cycles


@pytest.mark.parametrize("hw,wl", [
    (TINY, C.Workload.square(200, 32)),
    (TINY, C.Workload(seq_q=70, seq_k=50, head_dim=12, heads=3, kv_heads=1, causal=True)),
    (TINY, C.Workload(seq_q=1, seq_k=239, head_dim=64, heads=4, kv_heads=1, causal=True)),
    (FPGA, C.Workload(seq_q=300, seq_k=10, head_dim=8, causal=True, batch=2)),  # keyless tiles
])
def test_program_length_is_counted_exactly(hw, wl):
    # the layout after the program is placed from the count, before any instruction exists
    sch = S.schedule(hw, wl, keep_spans=False)
    tiles = program_tiles(wl, sch.tiling)
    assert program_length(tiles) == len(sch.program)
    lay = S.Layout.packed(hw, wl, 0)
    assert len(build_program(hw, wl, sch.tiling, lay, softmax_scale(hw, 0.01, 0.01, 8))) \
        == len(sch.program)


def test_compute_bound_tile_runs_at_the_array_rate():
    # fpga, N = 1024, d = 64: four 256-row tiles on 4 × 8 MACs -> 64 row groups × 8 words a
    # step, 2·64·8 cycles per key and tile
    sch = S.schedule(FPGA, C.Workload.square(1024, 64), keep_spans=False)
    assert sch.tiling.rows == FPGA.tile_rows == 256
    assert sch.busy["pe"] == 4 * 1024 * (2 * 64 * 8)
    # the K/V stream keeps up: the array waits only for each later tile's first block (its
    # request waits for the tile before to end, when the ring's credits are the new tile's)
    assert sch.stalls.get("pe: waiting for K/V (DRAM)", 0) < 3 * (FPGA.dram_latency + 20)
    # the third overlap level: the second tile's Q rows load during the first's finalize
    # and store, so only the first tile waits for its Q rows (the later ones for the
    # command's two cycles)
    first_q = next(s for s in S.schedule(FPGA, C.Workload.square(1024, 64)).spans
                   if s.name == "LOAD_Q t0")
    later = 3 * sch.timing.cmd_latency
    assert sch.stalls["pe: waiting for Q load or O store"] <= first_q.end + later + 4


def test_next_tile_q_load_overlaps_finalize_and_store():
    sch = S.schedule(FPGA, C.Workload.square(1024, 64))
    span = {s.name: s for s in sch.spans}
    assert span["LOAD_Q t1"].start < span["FINALIZE t0"].start + 4
    assert span["LOAD_Q t1"].end < span["FINALIZE t0"].end
    assert span["COMPUTE t1"].start == span["FINALIZE t0"].end


def test_memory_bound_when_bandwidth_is_scarce():
    # 8-row tiles take 2 keys per step: 128 PE cycles against 256 bytes at 1 byte/cycle
    wl = C.Workload.square(512, 64)
    hw = C.replace(TINY, tile_rows=8)
    slow = S.schedule(C.replace(hw, dram_bytes_per_cycle=1, axi_data_bits=32), wl,
                      keep_spans=False)
    fast = S.schedule(hw, wl, keep_spans=False)
    assert slow.total_cycles > fast.total_cycles
    assert slow.stalls["pe: waiting for K/V (DRAM)"] > 0.1 * slow.total_cycles


def test_more_bandwidth_is_never_slower():
    wl = C.Workload.square(400, 32)
    cycles = [S.schedule(C.replace(TINY, dram_bytes_per_cycle=bw), wl, keep_spans=False)
              .total_cycles for bw in (1, 2, 4, 8)]
    assert cycles == sorted(cycles, reverse=True)


def test_causal_and_small_tiles_save_cycles():
    full = S.schedule(ASP, C.Workload.square(32768, 64), keep_spans=False)
    causal = S.schedule(ASP, C.Workload.square(32768, 64, causal=True),
                        keep_spans=False)
    assert causal.total_cycles <= 0.6 * full.total_cycles
    # 1 row on 4 MAC lines: 4 keys per step instead of 1 (with the bandwidth to feed them)
    hw = C.replace(FPGA, dram_bytes_per_cycle=64, axi_data_bits=512, kv_ring_depth=64,
                   max_keys_per_step=4)
    wl = C.Workload(seq_q=1, seq_k=4096, head_dim=128)
    small = S.schedule(hw, wl, keep_spans=False)
    assert small.program[1].keys_per_step == 4
    one = S.schedule(hw, wl, keep_spans=False, tiling=io.Tiling("attenio", rows=1,
                                                                 keys_per_step=1, fixed_b=True))
    assert small.pe_util_mac > 0.8 and one.pe_util_mac < 0.3
    assert one.total_cycles > 3 * small.total_cycles


def test_unknown_dataflow_and_bad_head_dim():
    with pytest.raises(C.ConfigError, match="dataflow='nope'"):
        S.schedule(TINY, C.Workload.square(8, 8), "nope")
    with pytest.raises(C.ConfigError, match=r"head_dim=65"):
        S.schedule(TINY, C.Workload.square(8, 65))


def test_trace_and_plot(tmp_path):
    sch = S.schedule(TINY, C.Workload.square(130, 16))
    tr = chrome_trace(sch)
    json.dumps(tr)
    spans = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    names = {e["args"]["name"] for e in tr["traceEvents"] if e["name"] == "thread_name"}
    assert {"DMA read (Q)", "DMA read (K/V)", "DMA write", "PE array", "EXP (softmax)",
            "finalize"} <= names
    assert {e["args"]["tile"] for e in spans} == {0, 1, 2}
    us = sch.total_cycles / sch.hw.clock_mhz                  # time in µs of the clock
    assert all(0 <= e["ts"] and e["ts"] + e["dur"] <= us * (1 + 1e-12) for e in spans)
    assert all(e["args"]["end_cycle"] <= sch.total_cycles for e in spans)
    png = tmp_path / "t.png"
    write_plot(sch, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("hw, wl", [
    (TINY, C.Workload.square(300, 16)),
    (ASP, C.Workload.square(131072, 64)),
    (FPGA, C.Workload(seq_q=40, seq_k=40, head_dim=16, heads=8, kv_heads=2, causal=True)),
])
def test_trace_slices_nest_on_every_track(hw, wl):
    # the trace-event format: slices on one thread nest (older Perfetto drops the others)
    tr = chrome_trace(S.schedule(hw, wl))
    by_tid = {}
    for e in tr["traceEvents"]:
        if e["ph"] == "X":
            by_tid.setdefault(e["tid"], []).append((e["args"]["start_cycle"],
                                                    e["args"]["end_cycle"]))
    for tid, sl in by_tid.items():
        sl.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for a, b in sl:
            while stack and stack[-1] <= a:
                stack.pop()
            assert not stack or b <= stack[-1], (tid, a, b, stack[-1])
            stack.append(b)
    kv = [e for e in tr["traceEvents"] if e["ph"] == "X" and e["name"].startswith("LOAD_KV")]
    assert kv, "the K/V stream is in the trace"


def test_trace_gz(tmp_path):
    import gzip

    sch = S.schedule(TINY, C.Workload.square(64, 16))
    n = write_chrome_trace(sch, tmp_path / "t.json.gz")
    assert n == (tmp_path / "t.json.gz").stat().st_size
    assert json.loads(gzip.decompress((tmp_path / "t.json.gz").read_bytes()))["traceEvents"]


# ---- GQA packing only when it wins; causal decode is the non-causal work ----

@settings(max_examples=30, deadline=None)
@given(st.integers(1, 96), st.integers(1, 160), st.sampled_from([8, 16, 24, 32, 64]),
       st.sampled_from([(2, 1), (4, 1), (4, 2), (6, 2), (8, 2)]), st.booleans())
def test_tiling_never_worse_than_mha(nq, nk, d, heads, causal):
    wl = C.Workload(seq_q=nq, seq_k=nk, head_dim=d, heads=heads[0], kv_heads=heads[1],
                    causal=causal)
    chosen = S.schedule(TINY, wl, keep_spans=False)
    mha = S.schedule(TINY, wl, keep_spans=False,
                     tiling=io.choose_tiling(TINY, wl, pack=False))
    # (cycles ≤ MHA's holds by construction: the tiling takes the better of the two; what can
    # fail is what packing is for) a packed tile reads each K/V head once for its query heads:
    # no more K/V bytes than MHA, the same Q and O bytes; unpacked, it is MHA's schedule
    assert chosen.total_cycles <= mha.total_cycles
    h = chosen.tiling.heads_per_tile
    if h == 1:
        assert (chosen.total_cycles, chosen.read_bytes) == (mha.total_cycles, mha.read_bytes)
    else:
        q_bytes = wl.batch * wl.heads * wl.seq_q * TINY.row_elements(d)
        assert chosen.write_bytes == mha.write_bytes
        assert chosen.read_bytes - q_bytes <= mha.read_bytes - q_bytes


def test_gqa_packing_that_loses_is_not_taken():
    # 6/2 heads, 64×100, d = 24: packed 127,414 cycles and 47.6 KB against MHA's 122,502 and 38.0
    wl = C.Workload(seq_q=64, seq_k=100, head_dim=24, heads=6, kv_heads=2)
    packed = S.schedule(TINY, wl, keep_spans=False, tiling=io.choose_tiling(TINY, wl))
    chosen = S.schedule(TINY, wl, keep_spans=False)
    assert packed.tiling.heads_per_tile == 3
    assert chosen.tiling.heads_per_tile == 1 and chosen.total_cycles < packed.total_cycles


@pytest.mark.parametrize("hw, nk, d, heads", [(TINY, 239, 64, (4, 1)), (FPGA, 4096, 128, (32, 8))])
def test_causal_decode_costs_what_non_causal_does(hw, nk, d, heads):
    # one query sees every key (bottom-right alignment): the mask hides nothing
    runs = [S.schedule(hw, C.Workload(seq_q=1, seq_k=nk, head_dim=d, heads=heads[0],
                                      kv_heads=heads[1], causal=c), keep_spans=False)
            for c in (True, False)]
    assert runs[0].total_cycles == runs[1].total_cycles
    assert runs[0].read_bytes == runs[1].read_bytes
    assert runs[0].tiling.heads_per_tile == heads[0] // heads[1]


def test_causal_gqa_shares_kv():
    # the group's queries fit one tile: K/V is read once for the group, as without the mask
    wl = C.Workload(seq_q=16, seq_k=200, head_dim=8, heads=4, kv_heads=1, causal=True)
    gqa = S.schedule(TINY, wl, keep_spans=False)
    mha = S.schedule(TINY, wl, keep_spans=False, tiling=io.choose_tiling(TINY, wl, pack=False))
    assert gqa.tiling.heads_per_tile == 4
    row = wl.head_dim * TINY.element_bytes
    q_bytes = wl.heads * wl.seq_q * row
    assert gqa.read_bytes <= (mha.read_bytes - q_bytes) / 4 + q_bytes
    assert gqa.total_cycles < mha.total_cycles


def test_causal_packing_needs_a_row_group_per_head():
    # 4/1 heads of 3 queries: 3 rows per head < 4 MAC lines, so one head per tile
    wl = C.Workload(seq_q=3, seq_k=50, head_dim=16, heads=4, kv_heads=1, causal=True)
    assert io.choose_tiling(TINY, wl).heads_per_tile == 1


def test_progress_is_reported():
    seen = []
    S.schedule(TINY, C.Workload(seq_q=400, seq_k=400, head_dim=16, heads=4, kv_heads=2),
               keep_spans=False, progress=seen.append)
    assert seen and seen == sorted(seen) and 0 <= seen[0] and seen[-1] <= 1
    assert seen[-1] > 0.9


@pytest.mark.parametrize("hw, wl", [(TINY, C.Workload.square(300, 16)),
                                    (ASP, C.Workload.square(32768, 64))])
def test_plot_density_agrees_with_the_busy_counts(hw, wl):
    # the Gantt's binned busy fractions average to each engine's utilization
    from attenio.sim.trace import busy_density

    sch = S.schedule(hw, wl)
    for eng in S.ENGINES:
        dens = busy_density(sch.activity[eng], 0, sch.total_cycles, 500)
        assert abs(dens.mean() - sch.busy[eng] / sch.total_cycles) <= 0.01, eng


@pytest.mark.parametrize("hw, wl", [
    (C.tiny(), C.Workload(seq_q=200, seq_k=300, head_dim=24, heads=3)),
    (C.tiny(), C.Workload(seq_q=256, seq_k=256, head_dim=59, batch=2)),
    (C.tiny(), C.Workload(seq_q=150, seq_k=150, head_dim=16, causal=True, heads=2)),
    (C.fpga(), C.Workload(seq_q=1024, seq_k=1024, head_dim=64, heads=4, kv_heads=2)),
    (C.replace(C.asplos26(), sram_bytes=96 * 1024),
     C.Workload.square(8192, 128)),
])
def test_tile_memo_is_exact(hw, wl):
    # without spans the model reuses a tile's timeline for tiles in the same relative state;
    # with spans it simulates every tile: the two must agree on everything
    fast = S.schedule(hw, wl, keep_spans=False)
    full = S.schedule(hw, wl, keep_spans=True)
    assert (fast.total_cycles, fast.read_bytes, fast.write_bytes) == \
        (full.total_cycles, full.read_bytes, full.write_bytes)
    assert fast.busy == full.busy and fast.stalls == full.stalls
    assert fast.requests == full.requests and fast.requests["read"] > 0


def test_gantt_draws_the_schedules_data(tmp_path):
    """The Gantt (schedule --plot) checked on its data (issue #32): each panel's mean busy
    fraction is the engine's busy count over that window, the bars are the utilization, the
    title names the preset, the workload and causal, the zoom is the second tile counted from
    1 and, on a long tile, its first steps only (a step-level view), on a linear scale."""
    from attenio.sim.trace import ZOOM_STEPS, write_plot

    wl = C.Workload.square(300, 16, causal=True)
    sch = S.schedule(TINY, wl)
    drawn = write_plot(sch, tmp_path / "g.png", label="tiny")
    assert (tmp_path / "g.png").stat().st_size > 10_000
    whole, zoom = drawn["panels"]
    assert whole["title"].startswith("tiny: attenio, N=300×300 d=16") and "causal" in \
        whole["title"]
    for eng in S.ENGINES:
        assert drawn["utilization"][eng] == sch.busy[eng] / sch.total_cycles
        assert abs(whole["mean_busy"][eng] - sch.busy[eng] / sch.total_cycles) < 1e-6
    tiles = sorted({sp.args["tile"] for sp in sch.spans if "tile" in sp.args})
    assert zoom["title"].startswith(f"tile 2 of {len(tiles)} (PE steps 1–{ZOOM_STEPS} of")
    lo, hi = zoom["window"]
    steps = sorted((sp for sp in sch.spans if sp.engine == "pe" and sp.args.get("tile") ==
                    tiles[1] and sp.name.split()[0] in ("QK", "PV")), key=lambda sp: sp.start)
    assert hi == steps[ZOOM_STEPS - 1].end and hi - lo < (steps[-1].end - lo) / 2
    pe_busy = sum(min(sp.end, hi) - max(sp.start, lo) for sp in steps
                  if sp.end > lo and sp.start < hi)
    assert abs(zoom["mean_busy"]["pe"] - pe_busy / (hi - lo)) < 1e-6


def test_phase_models_have_no_timeline_to_draw(tmp_path):
    from click.testing import CliRunner

    from attenio.app.cli import main

    for opt in ("--plot", "--trace"):
        r = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--n", "64", "--d", "16",
                                      "--dataflow", "flat", opt, str(tmp_path / "x.png")])
        assert r.exit_code == 2 and "have no timeline" in r.output, r.output
