"""Timing mutations no RTL workload can catch, because the schedule generator gives the same
timeline with them (issue #34; scripts/studies/mutate_timing.py, data/verify/timing-mutations.json).
Each is an equivalent mutant for a stated reason; this test holds the claim on a sweep that
reaches every engine: if a model change ever makes one of them visible, it fails here, and
the constant then needs an RTL workload that pins it."""

import dataclasses

import pytest

from attenio.base import config as C
from attenio.contract.timing import EQUIVALENT_MUTATIONS as EQUIVALENT
from attenio.contract.timing import TIMING
from attenio.sim import schedule as S

TINY, FPGA = C.tiny(), C.fpga()


WORKLOADS = [
    (TINY, C.Workload.square(256, 64)),
    (TINY, C.Workload(seq_q=100, seq_k=100, head_dim=32, causal=True, heads=4, kv_heads=2)),
    (TINY, C.Workload(seq_q=3, seq_k=50, head_dim=16)),
    (C.replace(TINY, dram_bytes_per_cycle=1), C.Workload.square(64, 8)),
    (C.replace(TINY, dram_latency=20, dram_bytes_per_cycle=1),
     C.VarlenWorkload(seqlens_q=[1] * 40, seqlens_k=[1 + i % 2 for i in range(40)],
                      head_dim=8)),
    (TINY, C.VarlenWorkload.from_options(TINY, seqlens=[1] * 4, nk=[37, 100, 64, 5], d=8,
                                         heads=4, kv_heads=2, page_size=4)),
    (TINY, C.Workload(seq_q=200, seq_k=200, head_dim=16, causal=True, window_left=30,
                      window_right=-1)),
    (C.replace(FPGA, dram_latency=400), C.Workload(seq_q=8, seq_k=200, head_dim=16)),
    (FPGA, C.Workload.square(1024, 64)),
    (C.replace(FPGA, dram_bytes_per_cycle=2), C.Workload.square(300, 128)),
    # a decode batch in parts: three sequences read two shared pages once (sim/shared.py)
    (TINY, C.VarlenWorkload(seqlens_q=[1] * 3, seqlens_k=[13, 9, 11], head_dim=8, heads=4,
                            kv_heads=2, page_size=4),
     [[0, 1, 2, 3], [0, 1, 4], [0, 1, 5]]),
]


def _key(s):
    return (s.total_cycles, s.busy, s.stalls, s.read_bytes, s.write_bytes, s.requests)


@pytest.mark.parametrize("mutation", sorted(EQUIVALENT), ids=lambda m: f"{m[0]}{m[1]:+d}")
def test_equivalent_mutations_leave_every_schedule_unchanged(mutation):
    name, delta = mutation
    mutated = dataclasses.replace(TIMING, **{name: getattr(TIMING, name) + delta})
    for hw, wl, *table in WORKLOADS:
        kw = {"keep_spans": False, "block_table": table[0] if table else None}
        base = S.schedule(hw, wl, **kw)
        assert _key(S.schedule(hw, wl, timing=mutated, **kw)) == _key(base), (name, delta, wl)


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
                   for hw, wl, *_ in WORKLOADS), name
