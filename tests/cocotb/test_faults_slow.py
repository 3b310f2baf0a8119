"""The seeded fault campaign (verify/campaign.py) behind the slow marker: every injected fault
ends with done and an error code or a correct result, no stray write, no AXI violation, and
the clean run right after is bit-exact."""

import pytest

from attenio.base import config as C
from attenio.verify.campaign import KINDS, campaign, make_cases

TINY = C.tiny()
WL = C.Workload(seq_q=40, seq_k=40, head_dim=16, heads=2)


def test_cases_are_seeded_and_cover_every_kind():
    a, b = make_cases(TINY, WL, 12, seed=3), make_cases(TINY, WL, 12, seed=3)
    assert [(c.kind, c.p_stall, c.what) for c in a] == [(c.kind, c.p_stall, c.what) for c in b]
    assert {c.kind for c in a} == set(KINDS)
    assert all(c.accepted is not None for c in a if c.kind == "mutated program")


@pytest.mark.slow
def test_fault_campaign():
    rep = campaign(TINY, WL, 36, seed=7)
    broken = [o for o in rep["outcomes"] if o["broken"]]
    assert not broken, broken
    assert rep["survived"] == rep["injected"] == 36
