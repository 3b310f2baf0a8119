"""The RTL regression fanned out (sim/fanout.py): the fault campaign's cases on a local Dask
cluster give the same outcomes, in the same order, as one process."""

import pytest

from attenio.base import config as C
from attenio.verify.campaign import campaign

TINY = C.tiny()
WL = C.Workload(seq_q=16, seq_k=16, head_dim=8, heads=1)


@pytest.mark.slow
def test_fault_cases_on_a_local_dask_cluster_match_one_process():
    pytest.importorskip("distributed")
    serial = campaign(TINY, WL, 3, seed=5)
    fanned = campaign(TINY, WL, 3, seed=5, scheduler="local:2")
    assert fanned["outcomes"] == serial["outcomes"]
    assert fanned["survived"] == fanned["injected"] == 3
