"""The run plan (sim/plan.py): built once per run, read by every consumer; its closed-form
traffic equal to the schedule's bytes for every workload kind the CLI accepts."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from attenio.app.cli import main
from attenio.base import config as C
from attenio.base.config import HardwareConfig
from attenio.model import scales
from attenio.sim import plan as P
from attenio.sim.layout import Layout

TINY = C.tiny()

# one command line of each workload kind `attenio schedule` takes (tiny, d a multiple of
# the word), each run with and without --lse
KINDS = {
    "dense": ["--n", "40", "--d", "16"],
    "causal": ["--n", "70", "--d", "16", "--causal"],
    "gqa": ["--n", "24", "--d", "8", "--heads", "4", "--kv-heads", "2"],
    "batch": ["--n", "20", "--d", "16", "--batch", "3"],
    "varlen": ["--seqlens", "20,12", "--d", "16"],
    "window": ["--seqlens", "30,9", "--d", "16", "--causal", "--window", "7,0"],
    "decode": ["--decode", "--cache-lens", "37,20,5", "--d", "16"],
    "paged-decode": ["--decode", "--cache-lens", "37,20,5", "--page-size", "16", "--d", "16"],
    "paged-batch": ["--n", "9", "--batch", "2", "--page-size", "4", "--d", "16"],
}


@pytest.mark.parametrize("lse", [False, True], ids=["plain", "lse"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_closed_form_equals_the_schedule_for_every_kind(kind, lse, tmp_path):
    out = tmp_path / "s.json"
    args = ["schedule", "--preset", "tiny", *KINDS[kind], "--json", str(out)]
    res = CliRunner().invoke(main, args + (["--lse"] if lse else []))
    assert res.exit_code == 0, res.output
    rep = json.loads(out.read_text())
    cf = rep["closed_form"]
    assert cf["equal"] and (cf["read_bytes"], cf["write_bytes"]) == (rep["read_bytes"],
                                                                     rep["write_bytes"])


def _count_builds(monkeypatch) -> dict[str, int]:
    """Counters of what a run builds: schedules (program and timeline), layouts, workload
    checks, softmax multipliers (every module's reference to the function patched) and sets of
    random inputs."""
    from attenio.model import golden

    calls = dict.fromkeys(("schedule", "layout", "check", "multipliers", "inputs"), 0)

    depth = dict.fromkeys(calls, 0)

    def counted(name, fn):
        # a build counts once: the calls it makes of its own kind inside it do not
        # (softmax_scale_rows works each row's multiplier out with softmax_scale)
        def wrapper(*a, **k):
            calls[name] += depth[name] == 0
            depth[name] += 1
            try:
                return fn(*a, **k)
            finally:
                depth[name] -= 1
        return wrapper

    monkeypatch.setattr(P._Builder, "schedule", counted("schedule", P._Builder.schedule))
    monkeypatch.setattr(Layout, "packed", classmethod(counted("layout",
                                                              Layout.packed.__func__)))
    monkeypatch.setattr(HardwareConfig, "check_workload",
                        counted("check", HardwareConfig.check_workload))
    monkeypatch.setattr(golden.ref, "random_inputs", counted("inputs", golden.ref.random_inputs))
    # the multipliers of one tensor scale or of one scale per Q row, wherever imported
    for fn in ("softmax_scale", "softmax_scale_rows"):
        original = getattr(scales, fn)
        wrapped = counted("multipliers", original)
        for mod in list(sys.modules.values()):
            if getattr(mod, "__name__", "").startswith("attenio") and \
                    getattr(mod, fn, None) is original:
                monkeypatch.setattr(mod, fn, wrapped)
    return calls


@pytest.mark.parametrize("args", [
    ["--n", "7", "--d", "8"],
    ["--n", "7", "--d", "8", "--q-scales", "row", "--k-block", "4"],
    ["--decode", "--cache-lens", "37,20,5", "--page-size", "16", "--d", "16"],
], ids=["dense", "scales", "paged-decode"])
def test_one_simulate_builds_each_part_once(monkeypatch, args):
    calls = _count_builds(monkeypatch)
    res = CliRunner().invoke(main, ["simulate", "--preset", "tiny", *args])
    assert res.exit_code == 0 and "PASS" in res.output, res.output
    assert calls == {"schedule": 1, "layout": 1, "check": 1, "multipliers": 1, "inputs": 1}


def test_schedule_builds_each_part_once(monkeypatch):
    calls = _count_builds(monkeypatch)
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", *KINDS["paged-decode"]])
    assert res.exit_code == 0, res.output
    assert (calls["schedule"], calls["layout"]) == (1, 1)


def test_the_plan_is_what_every_reader_sees():
    wl = C.VarlenWorkload(seqlens_q=[1, 1], seqlens_k=[9, 4], head_dim=16, page_size=4)
    plan = P.build_plan(TINY, wl, block_table=[[3, 1, 0, -1], [1, -1, -1, -1]])
    assert plan.block_table.to_dict()["block_table"] == [[3, 1, 0, -1], [1, -1, -1, -1]]
    assert plan.layout.paged.table_start == (0, 4)          # the caller's rows, as given
    assert plan.traffic.read_bytes == plan.schedule.read_bytes
    assert plan.program_bytes[:32] == plan.program_bytes[:32]  # cached, one encoding
    with pytest.raises(AttributeError):
        plan.wl = wl                                          # frozen
