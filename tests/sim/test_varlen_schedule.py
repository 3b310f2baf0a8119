"""Varlen batches in the schedule generator: one program whose tiles each lie in one sequence,
address that sequence's rows and keys, and mask with its own diagonal; bytes equal the closed
form summed over the sequences; cycles no more than the sequences run one by one."""

import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.contract.program import Op
from attenio.model import io_analysis as io
from attenio.sim import schedule as S
from attenio.sim.program import program_tiles

TINY, FPGA, ASP = C.tiny(), C.fpga(), C.asplos26()

CASES = [
    (TINY, C.VarlenWorkload(seqlens_q=[5, 37, 1, 20], seqlens_k=[9, 37, 30, 64], head_dim=16,
                            heads=2, causal=True)),
    (TINY, C.VarlenWorkload(seqlens_q=[100, 3], seqlens_k=[100, 200], head_dim=8, heads=4,
                            kv_heads=2)),
    (FPGA, C.VarlenWorkload(seqlens_q=[700, 64, 300], seqlens_k=[700, 64, 300], head_dim=64,
                            causal=True)),
    (ASP, C.VarlenWorkload(seqlens_q=[3000, 17, 1024], seqlens_k=[3000, 17, 1024],
                           head_dim=128, heads=4, kv_heads=1, causal=True)),
]


@pytest.mark.parametrize("hw,wl", CASES)
def test_tiles_stay_in_their_sequence(hw, wl):
    sch = S.schedule(hw, wl, keep_spans=False)
    tiles = program_tiles(wl, sch.tilings)
    segs = wl.segments()
    assert [t.seg for t in tiles] == sorted((t.seg for t in tiles), key=segs.index)
    for t in tiles:
        assert 0 <= t.p0 and t.p0 + t.rows <= t.seg.seq_q and t.keys <= t.seg.seq_k
    # the rows every query head computes are exactly the packed tokens, once each
    rows = sum(t.rows * t.tiling.heads_per_tile for t in tiles)
    assert rows == wl.heads * wl.seq_q
    computes = [i for i in sch.program if i.op == Op.COMPUTE]
    assert [c.args["diag"] for c in computes] == [t.seg.diag for t in tiles]


@pytest.mark.parametrize("flow", ["attenio", "fa2"])
@pytest.mark.parametrize("hw,wl", CASES)
def test_bytes_equal_closed_form_and_cycles_at_most_one_by_one(hw, wl, flow):
    sch = S.schedule(hw, wl, flow, keep_spans=False)
    tr = io.workload_traffic(hw, wl, flow, sch.tilings)
    assert (sch.read_bytes, sch.write_bytes) == (tr.read_bytes, tr.write_bytes)
    alone = [S.schedule(hw, wl.sequence(i), flow, keep_spans=False)
             for i in range(wl.sequences)]
    assert sch.read_bytes == sum(a.read_bytes for a in alone)
    assert sch.useful_macs == sum(a.useful_macs for a in alone)
    # one program overlaps each sequence's finalize with the next one's loads
    assert sch.total_cycles <= sum(a.total_cycles for a in alone)


def test_dataflows_without_a_program_are_refused():
    with pytest.raises(ConfigError, match="dataflow.*varlen"):
        S.schedule(TINY, CASES[0][1], "flat")


def test_sequence_over_the_hardware_is_refused_by_name():
    wl = C.VarlenWorkload(seqlens_q=[8, 5000], seqlens_k=[8, 5000], head_dim=8)
    with pytest.raises(ConfigError, match=r"seqlens_q\[1\]"):
        S.schedule(TINY, wl)
