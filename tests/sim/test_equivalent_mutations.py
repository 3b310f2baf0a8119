"""Timing mutations no RTL workload can catch, because the schedule generator gives the same
timeline with them (issue #34; scripts/mutate_timing.py, data/verify/timing-mutations.json).
Each is an equivalent mutant for a stated reason; this test holds the claim on a sweep that
reaches every engine: if a model change ever makes one of them visible, it fails here, and
the constant then needs an RTL workload that pins it."""

import dataclasses

import pytest

from attenio import config as C
from attenio.contract.timing import TIMING
from attenio.sim import schedule as S

TINY, FPGA = C.tiny(), C.fpga()

EQUIVALENT = {
    # the fetch buffer holds whole chunks (fetch_buffer // fetch_chunk): 17 holds two, as 16
    ("fetch_buffer", +1): "the buffer holds whole chunks",
    # the channel's first request waits fetch_gap after its initial "last request" at −1:
    # with fetch_gap = 2 it is at cycle ≥ 1 whatever fetch_delay below 1 says
    ("fetch_delay", -1): "the first request is at cycle ≥ fetch_gap − 1 = 1 anyway",
    # a chunk's data takes ≥ 2 cycles (8 instructions of 32 B on a bus of ≤ 128 B), so the
    # next chunk's data never starts before the last ends when requests are 1 or 2 apart
    ("fetch_gap", -1): "a chunk's data outlasts a gap of 1 or 2",
    # a queue instruction keeps its engine ≥ request_delay + 1 cycles, so the engine, not the
    # queue's room, holds back the next one; the other queues' instructions behind a full
    # queue wait on its data (tokens) in generated programs
    ("queue_depth", +1): "the engines, not the queues' room, hold instructions back",
    ("queue_depth", -1): "the engines, not the queues' room, hold instructions back",
    # the ring caps K/V bursts in flight at 2 · ring rows ≤ 16 and Q/O transfers are one
    # burst a row or a 4 KB line: 17 in flight never occurs
    ("max_outstanding", +1): "no program has 17 bursts in flight",
    # the model does not read it: the store drains the output FIFO as the finalize fills it
    # (the FIFO's room is the RTL's concern: tests/hw/test_core.py, the output stalled)
    ("out_fifo_depth", +1): "the model does not read it",
    ("out_fifo_depth", -1): "the model does not read it",
}

WORKLOADS = [
    (TINY, C.Workload.square(256, 64)),
    (TINY, C.Workload(seq_q=100, seq_k=100, head_dim=32, causal=True, heads=4, kv_heads=2)),
    (TINY, C.Workload(seq_q=3, seq_k=50, head_dim=16)),
    (C.replace(TINY, dram_bytes_per_cycle=1), C.Workload.square(64, 8)),
    (C.replace(TINY, dram_latency=20, dram_bytes_per_cycle=1),
     C.VarlenWorkload(seqlens_q=[1] * 40, seqlens_k=[1 + i % 2 for i in range(40)],
                      head_dim=8, element_bytes=1)),
    (TINY, C.VarlenWorkload.from_options(TINY, seqlens=[1] * 4, nk=[37, 100, 64, 5], d=8,
                                         heads=4, kv_heads=2, page_size=4)),
    (TINY, C.Workload(seq_q=200, seq_k=200, head_dim=16, causal=True, window_left=30,
                      window_right=-1)),
    (C.replace(FPGA, dram_latency=400), C.Workload(seq_q=8, seq_k=200, head_dim=16)),
    (FPGA, C.Workload.square(1024, 64)),
    (C.replace(FPGA, dram_bytes_per_cycle=2), C.Workload.square(300, 128)),
]


def _key(s):
    return (s.total_cycles, s.busy, s.stalls, s.read_bytes, s.write_bytes, s.requests)


@pytest.mark.parametrize("mutation", sorted(EQUIVALENT), ids=lambda m: f"{m[0]}{m[1]:+d}")
def test_equivalent_mutations_leave_every_schedule_unchanged(mutation):
    name, delta = mutation
    mutated = dataclasses.replace(TIMING, **{name: getattr(TIMING, name) + delta})
    for hw, wl in WORKLOADS:
        base = S.schedule(hw, wl, keep_spans=False)
        assert _key(S.schedule(hw, wl, timing=mutated, keep_spans=False)) == _key(base), \
            (name, delta, wl)


def test_bursts_of_257_beats_and_more_are_reachable():
    # max_burst_beats + 1 is not equivalent: a transfer of 513 beats in one 4 KB line (tiny's
    # Q tile of 57 rows of 9 words) or of 770 (35 O rows of 11 words, 2 beats each) is 3
    # bursts, or 2 at 257; tests/cocotb/test_top.py::test_bursts_past_256_beats runs them
    mutated = dataclasses.replace(TIMING, max_burst_beats=TIMING.max_burst_beats + 1)
    for (n, d), port in (((57, 36), "read"), ((35, 44), "write")):
        wl = C.Workload.square(n, d)
        base = S.schedule(TINY, wl, keep_spans=False).requests
        assert S.schedule(TINY, wl, timing=mutated, keep_spans=False).requests[port] == \
            base[port] - 1


def test_a_caught_mutation_changes_a_schedule_of_the_sweep():
    # the sweep can see a change: request_gap + 1 moves the cycles of some workload, and
    # max_burst_beats − 1 the bursts of the fpga preset's Q loads (16 B beats, 4 KB lines)
    for name, delta, what in (("request_gap", +1, 0), ("max_burst_beats", -1, 5)):
        mutated = dataclasses.replace(TIMING, **{name: getattr(TIMING, name) + delta})
        assert any(_key(S.schedule(hw, wl, timing=mutated, keep_spans=False))[what]
                   != _key(S.schedule(hw, wl, keep_spans=False))[what]
                   for hw, wl in WORKLOADS), name
