"""The attenio command line: output, exit codes, one-line errors."""

from click.testing import CliRunner

from attenio.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_config_show_lists_fields_and_widths():
    r = run("config", "show", "--preset", "fpga")
    assert r.exit_code == 0
    assert "mac_lines              8" in r.output and "acc_bits" in r.output


def test_config_save_then_load(tmp_path):
    path = tmp_path / "hw.toml"
    assert run("config", "save", "--preset", "tiny", "-o", str(path)).exit_code == 0
    r = run("config", "show", "--config", str(path), "--toml")
    assert r.exit_code == 0 and "tile_rows = 64" in r.output


def test_golden_passes_and_prints_errors():
    r = run("golden", "--preset", "tiny", "--n", "64", "--d", "16", "--seed", "3")
    assert r.exit_code == 0, r.output
    assert "max abs error" in r.output and "PASS" in r.output


def test_golden_gqa_causal():
    r = run("golden", "--preset", "tiny", "--n", "40", "--d", "8", "--heads", "4",
            "--kv-heads", "2", "--causal", "--dist", "uniform")
    assert r.exit_code == 0, r.output


def test_bad_input_is_one_line_and_status_2():
    for args in (["config", "show", "--preset", "nope"],
                 ["golden", "--preset", "tiny", "--d", "65"],
                 ["golden", "--preset", "tiny", "--n", "0"],
                 ["golden", "--preset", "tiny", "--heads", "3", "--kv-heads", "2"]):
        r = run(*args)
        assert r.exit_code == 2, (args, r.output)
        lines = [x for x in r.output.splitlines() if x.startswith("error:")]
        assert len(lines) == 1 and "invalid" in lines[0] and "Traceback" not in r.output
