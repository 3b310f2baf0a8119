"""The attenio command line: output, exit codes, one-line errors."""

from pathlib import Path

import pytest
from click.testing import CliRunner

from attenio.app.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def run_json(tmp_path, *args):
    """Run a command with ``--json FILE``; it must exit 0. Returns (result, the JSON)."""
    import json

    out = tmp_path / "out.json"
    r = run(*args, "--json", str(out))
    assert r.exit_code == 0, r.output
    return r, json.loads(out.read_text())


def test_config_show_lists_fields_and_widths():
    r = run("config", "show", "--preset", "fpga")
    assert r.exit_code == 0
    assert "mac_lines              4" in r.output and "acc_bits" in r.output


def test_config_save_then_load(tmp_path):
    path = tmp_path / "hw.toml"
    assert run("config", "save", "--preset", "tiny", "-o", str(path)).exit_code == 0
    r = run("config", "show", "--config", str(path), "--toml")
    assert r.exit_code == 0 and "tile_rows = 64" in r.output
    # the preset plus overrides, as the README describes: uncomment a field to change it
    text = path.read_text()
    assert text.startswith('[hardware]\npreset = "tiny"\n') and "\n# tile_rows = 64\n" in text
    path.write_text(text.replace("# tile_rows = 64", "tile_rows = 32"))
    r = run("config", "show", "--config", str(path), "--toml")
    assert r.exit_code == 0 and "tile_rows = 32" in r.output and "mac_lines = 4" in r.output


def test_golden_passes_and_prints_errors():
    r = run("golden", "--preset", "tiny", "--n", "64", "--d", "16", "--seed", "3")
    assert r.exit_code == 0, r.output
    assert "max abs error" in r.output and "PASS" in r.output


def test_golden_gqa_causal():
    r = run("golden", "--preset", "tiny", "--n", "40", "--d", "8", "--heads", "4",
            "--kv-heads", "2", "--causal", "--dist", "uniform")
    assert r.exit_code == 0, r.output


def test_bad_input_is_one_line_and_status_2():
    # the whole output is the one error line: no header printed before the check
    for args in (["config", "show", "--preset", "nope"],
                 ["golden", "--preset", "tiny", "--d", "65"],
                 ["golden", "--d", "300"],                   # the README's own example
                 ["golden", "--preset", "tiny", "--n", "0"],
                 ["golden", "--preset", "tiny", "--heads", "3", "--kv-heads", "2"],
                 ["golden", "--preset", "tiny", "--nk", "0"],     # 0 is not "the default"
                 ["schedule", "--n", "1024", "--kv-heads", "0"]):
        r = run(*args)
        assert r.exit_code == 2, (args, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:"), (args, r.output)
        assert "invalid" in lines[0] and "Traceback" not in r.output


def test_schedule_prints_summary_and_writes_files(tmp_path):
    from attenio.contract import program as P

    trace, png, binp = tmp_path / "t.json", tmp_path / "t.png", tmp_path / "p.bin"
    r = run("schedule", "--preset", "tiny", "--n", "200", "--d", "32", "--causal",
            "--trace", str(trace), "--plot", str(png), "--program", str(binp))
    assert r.exit_code == 0, r.output
    assert "total cycles" in r.output and "closed form          equal" in r.output
    assert trace.exists() and png.exists()
    assert P.decode(binp.read_bytes())[-1].op == P.Op.END


def test_schedule_rejects_program_for_phase_models():
    r = run("schedule", "--preset", "tiny", "--n", "64", "--dataflow", "flat", "--program",
            "x.bin")
    assert r.exit_code == 2 and "no program" in r.output


def test_dataflows_table_and_csv(tmp_path):
    out = tmp_path / "d.csv"
    r = run("dataflows", "--preset", "asplos26", "--ns", "8192,16384", "--ds", "64",
            "--csv", str(out), "--bandwidth-sweep")
    assert r.exit_code == 0, r.output
    assert "geomean" in r.output and "paper" in r.output and "bandwidth sweep" in r.output
    lines = out.read_text().splitlines()
    assert lines[0].startswith("d,n,dataflow") and len(lines) == 1 + 2 * 5


def test_infeasible_memory_is_one_line(tmp_path):
    import attenio.base.config as C
    from attenio.base.tomlfile import save_toml

    r = run("schedule", "--preset", "asplos26", "--n", "64", "--d", "256")
    assert r.exit_code == 0  # d = 256 fits 512 KB
    cfg = tmp_path / "small.toml"
    save_toml(cfg, C.replace(C.asplos26(), sram_bytes=600))
    r = run("schedule", "--config", str(cfg), "--n", "64", "--d", "128")
    assert r.exit_code == 2 and "at least" in r.output and "elements" in r.output


def test_registers_table_and_header(tmp_path):
    r = run("registers", "--preset", "fpga")
    assert r.exit_code == 0 and "0x024  STATUS" in r.output
    h = tmp_path / "regs.h"
    assert run("registers", "--preset", "tiny", "--header", str(h)).exit_code == 0
    assert "#define ATTENIO_STATUS_OFFSET 0x024u" in h.read_text()


def test_simulate_and_verilog_bad_input_is_one_line(tmp_path):
    runner = CliRunner()
    cases = [
        (["simulate", "--preset", "tiny", "--n", "7", "--d", "100"], "head_dim=100 is invalid"),
        (["simulate", "--n", "7", "--d", "8", "--stall", "1.5"], "stall=1.5 is invalid"),
        (["verilog", "--preset", "asplos26", "-o", str(tmp_path / "a.v")],
         "axi_data_bits=1024 is invalid"),
    ]
    for args, msg in cases:
        res = runner.invoke(main, args)
        assert res.exit_code == 2, (args, res.output)
        assert res.output.count("\n") == 1 and msg in res.output, res.output


def test_verilog_writes_the_top(tmp_path):
    out = tmp_path / "attenio_tiny.v"
    res = CliRunner().invoke(main, ["verilog", "--preset", "tiny", "-o", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "module attenio_top" in text and "m_axi_arvalid" in text and "s_axil_awaddr" in text


def test_failed_tool_run_is_one_line_and_status_1(monkeypatch):
    from attenio.verify import runner

    def broken(*a, **k):
        raise RuntimeError("the verilator simulation failed (exit 3); see its log above")

    monkeypatch.setattr(runner, "simulate", broken)
    res = CliRunner().invoke(main, ["simulate", "--preset", "tiny", "--n", "7", "--d", "8"])
    assert res.exit_code == 1
    assert "error: the verilator simulation failed" in res.output
    assert "Traceback" not in res.output


def _fake_run(monkeypatch, cycles, predicted):
    import numpy as np

    from attenio.base import config as C
    from attenio.base.errors import ErrorCode
    from attenio.sim.schedule import schedule
    from attenio.verify import runner

    sched = schedule(C.tiny(), C.Workload.square(7, 8), keep_spans=False)

    def fake(*a, **k):
        out = np.zeros((1, 1, 7, 8), dtype=np.int64)
        ctr = dict.fromkeys(("pe_busy", "pe_wait_kv", "pe_wait_exp", "exp_busy", "fin_busy",
                             "dma_rd_busy", "dma_wr_busy", "bytes_rd", "bytes_wr"), 0)
        return runner.SimResult(
            status=2, error=ErrorCode.NONE, done=True, timed_out=False, out=out, golden=out,
            counters={**ctr, "cycles": cycles}, predicted_cycles=predicted, predicted_read=0,
            predicted_write=0, pe_busy_model=0, useful_macs=0, wall_s=1.0, sim_cycles=cycles,
            errors={"max_rel": 0.0, "mean_rel": 0.0, "max_abs": 0.0, "mean_abs": 0.0},
            schedule=sched, p_stall=k.get("p_stall", 0.0))

    monkeypatch.setattr(runner, "simulate", fake)


def test_simulate_fails_when_cycles_break_the_model(monkeypatch):
    # without stalls the prediction must hold; with them it is a lower bound
    args = ["simulate", "--preset", "tiny", "--n", "7", "--d", "8"]
    _fake_run(monkeypatch, 1100, 1000)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "must be equal: FAIL" in res.output, res.output
    res = CliRunner().invoke(main, args + ["--stall", "0.3"])
    assert res.exit_code == 0 and "a lower bound under --stall: ok" in res.output, res.output
    _fake_run(monkeypatch, 900, 1000)
    res = CliRunner().invoke(main, args + ["--stall", "0.3"])
    assert res.exit_code == 1 and "lower bound under --stall: FAIL" in res.output
    _fake_run(monkeypatch, 1000, 1000)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0 and "PASS" in res.output
    # cycle-exact means exact: one cycle off fails (the old 1% tolerance let 10 through)
    _fake_run(monkeypatch, 1001, 1000)
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1 and "1,001 cycles against 1,000 predicted" in res.output


def test_simulate_fails_on_bytes_and_pe_busy(monkeypatch):
    from attenio.verify import runner

    args = ["simulate", "--preset", "tiny", "--n", "7", "--d", "8"]
    _fake_run(monkeypatch, 1000, 1000)
    good = runner.simulate()
    for field, value, msg in (("bytes_rd", 8, "BYTES_RD = 8"), ("pe_busy", 3, "PE_BUSY = 3")):
        bad = runner.SimResult(**{**good.__dict__,
                                  "counters": {**good.counters, field: value}})
        monkeypatch.setattr(runner, "simulate", lambda *a, bad=bad, **k: bad)
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 1 and msg in res.output and "FAIL" in res.output, res.output


def test_rough_inputs_are_one_line_before_any_work(tmp_path):
    binary = tmp_path / "bin.toml"
    binary.write_bytes(bytes(range(256)))
    with_wl = tmp_path / "wl.toml"
    with_wl.write_text('[hardware]\npreset = "tiny"\n[workload]\nseq_q = 64\nseq_k = 64\n'
                       'head_dim = 16\n')
    gpu = "data/gpu/h200-sdpa-2026-11-29.csv"
    cases = [
        (["config", "save", "-o", str(tmp_path / "no" / "x.toml")], "does not exist"),
        (["schedule", "--n", "64", "--trace", str(tmp_path / "no" / "t.json")], "does not exist"),
        (["schedule", "--n", "64", "--plot", str(tmp_path / "t.xyz")], "a plot is written as"),
        (["registers", "--header", str(tmp_path / "no" / "r.h")], "does not exist"),
        (["dataflows", "--csv", str(tmp_path / "no" / "d.csv")], "does not exist"),
        (["schedule", "--n", "64", "--config", str(tmp_path)], "a directory"),
        (["schedule", "--n", "64", "--config", str(binary)], "not a readable text file"),
        (["schedule", "--n", "64", "--config", str(with_wl)], "[workload] table"),
        (["schedule", "--preset", "tiny", "--n", "131072"], "max_seq_len"),
        (["schedule", "--n", "1024", "--dataflow", "fa2", "--program", str(tmp_path / "p")],
         "only attenio's program"),
        (["compare", "--gpu", gpu, "--gpu-peak-tflops", "-1"], "gpu_peak_tflops=-1.0"),
        (["compare", "--gpu", gpu, "--gpu-bandwidth-tbs", "0"], "gpu_bandwidth_tbs=0.0"),
    ]
    for args, msg in cases:
        res = run(*args)
        assert res.exit_code == 2, (args, res.output)
        assert msg in res.output and "Traceback" not in res.output, (args, res.output)
        assert len(res.output.strip().splitlines()) == 1, (args, res.output)


def test_help_shows_each_commands_own_preset():
    for cmd, preset in (("schedule", "asplos26"), ("simulate", "tiny"), ("board", "tiny"),
                        ("golden", "fpga"), ("dataflows", "asplos26")):
        out = " ".join(run(cmd, "--help").output.split())     # click wraps long lines
        assert f"--preset NAME Hardware preset: tiny, fpga, asplos26. [default: {preset}]" \
            in out, (cmd, out)


def test_register_field_overflow_is_refused():
    import dataclasses

    from attenio.base import config as C
    from attenio.hw import csr

    with pytest.raises(C.ConfigError, match=r"mac_lines=256 .*CFG_ARRAY.MAC_LINES"):
        csr.python_map(dataclasses.replace(C.tiny(), mac_lines=256))


def test_json_results(tmp_path):
    import json

    s = tmp_path / "s.json"
    assert run("schedule", "--preset", "tiny", "--n", "64", "--d", "16", "--json",
               str(s)).exit_code == 0
    d = json.loads(s.read_text())
    assert d["workload"]["seq_q"] == 64 and d["total_cycles"] > 0
    assert d["read_bytes"] == d["closed_form"]["read_bytes"]
    g = tmp_path / "g.json"
    assert run("golden", "--preset", "tiny", "--n", "32", "--d", "8", "--json",
               str(g)).exit_code == 0
    assert json.loads(g.read_text())["ok"] is True
    f = tmp_path / "f.json"
    assert run("dataflows", "--preset", "tiny", "--ns", "256", "--ds", "16", "--bandwidth-sweep",
               "--json", str(f)).exit_code == 0
    d = json.loads(f.read_text())
    assert {r["dataflow"] for r in d["rows"]} >= {"attenio", "fa2"}
    assert all(r["preset"] == "tiny" and r["causal"] is False for r in d["rows"])
    assert d["bandwidth_sweep"] and "cycles_attenio" in d["bandwidth_sweep"][0]


def test_accuracy_table_and_json(tmp_path):
    out = tmp_path / "acc.json"
    r = run("accuracy", "--preset", "tiny", "--n", "64", "--d", "16", "--dist", "gaussian",
            "--dist", "llm-outliers", "--json", str(out))
    assert r.exit_code == 0, r.output
    assert "int8 (tiny)" in r.output and "bf16" in r.output and "rotate" in r.output
    import json

    rows = json.loads(out.read_text())["rows"]
    # 2 inputs × (3 schemes × Q per tensor and per row × K per tensor and per block + fp16
    # + bf16)
    assert len(rows) == 28 and {r_["scheme"] for r_ in rows} >= {
        "rotate", "rotate+rows", "rotate+kblk", "rotate+rows+kblk"}
    assert {r_["k_block"] for r_ in rows if r_["k_scales"] == "block"} == {16}
    assert {r_["inputs"] for r_ in rows} == {"gaussian", "llm-outliers"}
    assert all(r_["rel_frobenius"] > 0 for r_ in rows)


def test_accuracy_on_own_files(tmp_path):
    import numpy as np

    rng = np.random.default_rng(0)
    f = tmp_path / "qkv.npz"
    np.savez(f, q=rng.standard_normal((2, 32, 16)), k=rng.standard_normal((1, 48, 16)),
             v=rng.standard_normal((1, 48, 16)))
    r = run("accuracy", "--preset", "tiny", "--inputs", str(f), "--scheme", "tensor")
    assert r.exit_code == 0, r.output
    assert "heads=2/1" in r.output and "N=32x48" in r.output


def test_accuracy_k_block_option(tmp_path):
    r, got = run_json(tmp_path, "accuracy", "--preset", "tiny", "--n", "48", "--d", "8",
                      "--dist", "peaky", "--scheme", "rotate", "--q-scales", "row",
                      "--k-scales", "block", "--k-block", "4")
    rows = got["rows"]
    assert [r_["scheme"] for r_ in rows if r_["kind"] == "int"] == ["rotate+rows+kblk"]
    assert rows[0]["k_block"] == 4
    for bad_block in ("0", "-3"):
        r = run("accuracy", "--preset", "tiny", "--n", "16", "--d", "8", "--k-block", bad_block)
        assert r.exit_code == 2 and r.output.startswith("error: k_block="), r.output


def test_accuracy_seeds_give_median_and_worst(tmp_path):
    """--seeds N: one row per datapath and scheme with the median and the worst ratio over bf16
    of the N draws (the JSON keeps every draw with its seed)."""
    import numpy as np

    r, got = run_json(tmp_path, "accuracy", "--preset", "tiny", "--n", "32", "--d", "8",
                      "--dist", "llm-outliers", "--scheme", "rotate", "--q-scales", "row",
                      "--k-scales", "block", "--seeds", "3")
    assert "seeds=0..2 (median and worst)" in r.output and "/ bf16 median" in r.output
    rows = got["rows"]
    ints = [x for x in rows if x["kind"] == "int"]
    assert sorted(x["seed"] for x in ints) == [0, 1, 2]
    ratios = [x["over_bf16"] for x in ints]
    line = next(ln for ln in r.output.splitlines() if "rotate+rows+kblk" in ln).split()
    assert line[-2] == f"{float(np.median(ratios)):.2f}x" and line[-1] == f"{max(ratios):.2f}x"
    f = tmp_path / "qkv.npz"
    rng = np.random.default_rng(0)
    np.savez(f, q=rng.standard_normal((8, 8)), k=rng.standard_normal((8, 8)),
             v=rng.standard_normal((8, 8)))
    r = run("accuracy", "--preset", "tiny", "--inputs", str(f), "--seeds", "2")
    assert r.exit_code == 2 and r.output.startswith("error: seeds=2"), r.output


def test_golden_runs_the_host_schemes_at_a_logit_spread(tmp_path):
    """golden takes the accuracy command's classes, schemes and scales (issue #33)."""
    r, got = run_json(tmp_path, "golden", "--preset", "tiny", "--n", "64", "--d", "16",
                      "--dist", "llm-outliers", "--logit-sigma", "200", "--scheme", "rotate",
                      "--q-scales", "row", "--k-block", "4")
    assert "scheme=rotate+rows+kblk4" in r.output and "one per Q row and K row" in r.output
    assert got["k_block"] == 4 and got["ok"] and 100 < got["logit_sigma"] < 400
    r = run("golden", "--preset", "tiny", "--n", "8", "--d", "8", "--logit-sigma", "0")
    assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output


def test_accuracy_bad_files_are_one_line_and_status_2(tmp_path):
    import numpy as np

    f = tmp_path / "nan.npz"
    np.savez(f, q=np.full((8, 8), np.nan), k=np.ones((8, 8)), v=np.ones((8, 8)))
    for args in (["--inputs", str(f)], ["--inputs", str(tmp_path / "none.npz")],
                 ["--q", str(f)], ["--inputs", str(f), "--dist", "peaky"]):
        r = run("accuracy", "--preset", "tiny", *args)
        assert r.exit_code == 2, (args, r.output)
        assert r.output.count("\n") == 1 and r.output.startswith("error:"), r.output


def test_explore_small_sweep(tmp_path):
    csv, js = tmp_path / "e.csv", tmp_path / "e.json"
    r = run("explore", "--preset", "tiny", "--set", "tile_rows=16,64", "--n", "64",
            "--d", "16,100", "--workers", "1", "--csv", str(csv), "--json", str(js))
    assert r.exit_code == 0, r.output
    assert "4 points" in r.output and "2 infeasible" in r.output and "Pareto front" in r.output
    import json

    data = json.loads(js.read_text())
    assert len(data["points"]) == 4 and data["pareto_front"]
    assert csv.read_text().count("\n") == 5


def test_explore_bad_spec_is_one_line_and_status_2():
    for args in (["--set", "mac_line=8"], ["--set", "sram_kb=256:64:64"], ["--set", "n=5"],
                 ["--set", "mac_lines"], ["--causal", "maybe"]):
        r = run("explore", "--preset", "tiny", *args)
        assert r.exit_code == 2, (args, r.output)
        assert r.output.count("\n") == 1 and r.output.startswith("error:"), r.output


def test_schedule_exits_1_when_bytes_differ_from_the_closed_form(monkeypatch):
    # padded rows (d = 7 on 4-element words) agree with the padded head dim's closed form
    res = run("schedule", "--preset", "tiny", "--n", "64", "--d", "7")
    assert res.exit_code == 0 and "equal" in res.output and "move as 8 elements" in res.output
    from attenio.model import io_analysis as io

    real = io.workload_traffic

    def off_by_one(*a, **k):
        t = real(*a, **k)
        return type(t)(**{**t.__dict__, "read_bytes": t.read_bytes + 1})

    monkeypatch.setattr(io, "workload_traffic", off_by_one)
    res = run("schedule", "--preset", "tiny", "--n", "64", "--d", "8")
    assert res.exit_code == 1 and "DIFFERENT" in res.output
    assert "differ from the closed form" in res.output


def test_json_dash_is_stdout_and_the_report_goes_to_stderr():
    import json

    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--n", "64", "--d", "8",
                                    "--json", "-"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)                  # stdout is the JSON alone (| jq works)
    assert data["total_cycles"] > 0
    assert "schedule: preset=tiny" in res.stderr and not Path("-").exists()


def test_varlen_batch_from_lengths_or_a_file(tmp_path):
    r = run("schedule", "--preset", "tiny", "--seqlens", "5,37,1,20", "--seqlens-k",
            "9,37,30,64", "--d", "16", "--heads", "2", "--causal")
    assert r.exit_code == 0, r.output
    assert "sequences=4 (63 tokens, 140 keys; lengths 1-37, median 20)" in r.output
    assert "closed form          equal" in r.output
    lens = tmp_path / "lens.txt"
    lens.write_text("# a serving trace\n5, 37\n1 20  # last two\n")
    r2 = run("schedule", "--preset", "tiny", "--seqlens", f"@{lens}", "--seqlens-k",
             "9,37,30,64", "--d", "16", "--heads", "2", "--causal")
    assert r2.exit_code == 0 and r2.output.splitlines()[2:4] == r.output.splitlines()[2:4]
    g = run("golden", "--preset", "tiny", "--seqlens", "5,37,1,20", "--d", "16", "--causal",
            "--window", "8,-1")
    assert g.exit_code == 0 and "PASS" in g.output, g.output


@pytest.mark.parametrize("args, says", [
    (["--seqlens", "5,37", "--n", "4"], "--n=4 is invalid: leave it out with --seqlens"),
    (["--seqlens", "5,37", "--batch", "2"], "--batch=2 is invalid: leave it out with --seqlens"),
    (["--seqlens-k", "5,37", "--n", "4"], "--seqlens-k=[5, 37] is invalid: give it with"),
    (["--d", "16"], "--n=None is invalid: give --n"),
    (["--cache-lens", "5,37"], "--decode=False is invalid: give --decode with --cache-lens"),
    (["--decode", "--cache-lens", "5,37", "--seqlens", "3"], "--seqlens=[3] is invalid: leave"),
    (["--n", "64", "--page-size", "3"], "page_size=3 is invalid: must be 0"),
    (["--seqlens", "5,-1"], r"seqlens_q[1]=-1 is invalid"),
    (["--seqlens", "0,0"], r"seqlens_q=[0, 0] is invalid: every sequence is empty"),
    (["--seqlens", "5,37", "--seqlens-k", "5"], "one per sequence"),
    (["--seqlens", "5,9000", "--preset", "tiny"], r"seqlens_q[1]=9000 is invalid"),
])
def test_varlen_bad_options_are_one_line(args, says):
    r = run("schedule", *args)
    assert r.exit_code == 2, r.output
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], r.output


def test_decode_batch_on_a_paged_cache():
    r = run("schedule", "--preset", "tiny", "--decode", "--cache-lens", "37,100,5", "--d", "8",
            "--heads", "4", "--kv-heads", "2", "--page-size", "4")
    assert r.exit_code == 0, r.output
    assert "sequences=3 (3 tokens, 142 keys" in r.output and "page_size=4" in r.output
    spec = run("schedule", "--preset", "tiny", "--decode", "--n", "2", "--cache-lens",
               "37,100", "--d", "8", "--json", "-")
    assert spec.exit_code == 0, spec.output


def test_varlen_bad_lengths_are_usage_errors(tmp_path):
    for value, says in (("5,x", "'x' is not a length"), ("@" + str(tmp_path / "none"),
                                                         "cannot read it"), (" ", "no lengths")):
        r = run("schedule", "--seqlens", value)
        assert r.exit_code == 2 and says in r.output, r.output


def _serving_json(tmp_path):
    import json

    def m(workload, backend, heads, ms, flops, status="ok"):
        return {"workload": workload, "backend": backend, "heads": heads, "status": status,
                "time_ms": ms, "flops": flops}

    data = {"provenance": {"gpu": "test GPU", "date": "2026-12-02"}, "d": 8, "dtype": "bf16",
            "traces": {"prefill_lengths": [5, 37], "decode_cache_lengths": [17, 40],
                       "decode": {"heads": 4, "kv_heads": 2, "page_size": 4},
                       "window": {"n": 64, "window": 8}},
            "measurements": [
                m("prefill", "a", 1, 0.5, 1e6), m("prefill", "b", 4, 0.8, 4e6),
                m("window", "a", 4, 0.4, 4e6), m("window", "c", 4, 0.1, 4e6, "error-x"),
                m("decode", "sdpa-gathered-attention-only", 4, 0.01, 1e5),
                m("decode", "sdpa-gathered-pages", 4, 0.03, 1e5),
                m("decode-fp8", "flashinfer-decode-tc", 4, 0.02, 1e5)]}
    p = tmp_path / "serving.json"
    p.write_text(json.dumps(data))
    return p


def test_compare_on_the_serving_workloads(tmp_path):
    import json

    p = _serving_json(tmp_path)
    r = run("compare", "--preset", "tiny", "--gpu", str(p), "--json", str(tmp_path / "o.json"))
    assert r.exit_code == 0, r.output
    rows = {x["workload"]: x for x in json.loads((tmp_path / "o.json").read_text())["rows"]}
    # prefill and window per head, from the shape that fills the GPU; decode from the fastest
    # path that reads pages, the batch whole; failed rows never chosen
    assert rows["prefill"]["gpu_backend"] == "b" and rows["prefill"]["gpu_ms"] == 0.2
    assert rows["window"]["gpu_backend"] == "a"
    assert rows["decode"]["gpu_backend"] == "sdpa-gathered-pages"
    assert rows["decode"]["gpu_contiguous_ms"] == 0.01
    for x in rows.values():
        assert x["proj_equal_peak_speedup"] == pytest.approx(x["gpu_ms"] / x["proj_equal_peak_ms"])
    assert "sdpa-gathered-pages" in r.output
    # the 8-bit K/V row: the FP8 kernel, each key's K factor read with the 8-bit cache
    assert rows["decode-fp8"]["gpu_backend"] == "flashinfer-decode-tc"
    assert rows["decode-fp8"]["acc_data_bits"] == 8
    assert rows["decode-fp8"]["acc_read_bytes"] > rows["decode"]["acc_read_bytes"]   # tiny: 8 bits
    assert "decode-fp8: the decode trace from an 8-bit K/V cache" in r.output


def test_compare_reads_several_serving_jsons_and_names_the_fastest(tmp_path):
    """Issue #46: every kernel measured competes (files read together), the row names the
    fastest, --baseline picks another, and a baseline not measured lists those that were."""
    import json

    p = _serving_json(tmp_path)
    data = json.loads(p.read_text())
    data["provenance"]["hbm_read_tbs"] = 4.0
    data["measurements"] = [
        {"workload": "decode", "backend": "flashinfer-decode-tc", "heads": 4, "status": "ok",
         "time_ms": 0.02, "flops": 1e5, "kv_bytes_touched": 4e7},
        {"workload": "prefill", "backend": "z", "heads": 1, "status": "ok", "time_ms": 0.1,
         "flops": 1e6}]
    q = tmp_path / "fi.json"
    q.write_text(json.dumps(data))
    both = f"{p},{q}"
    r = run("compare", "--preset", "tiny", "--gpu", both, "--json", str(tmp_path / "o.json"))
    assert r.exit_code == 0, r.output
    rows = {x["workload"]: x for x in json.loads((tmp_path / "o.json").read_text())["rows"]}
    assert rows["decode"]["gpu_backend"] == "flashinfer-decode-tc"
    assert rows["decode"]["gpu_source"] == "fi.json"
    assert rows["decode"]["gpu_pct_read_ceiling"] == pytest.approx(100 * 4e7 / 0.02e-3 / 4e12)
    assert rows["prefill"]["gpu_backend"] == "z" and rows["prefill"]["gpu_ms"] == 0.1
    assert set(rows["decode"]["gpu_candidates"]) == {"flashinfer-decode-tc",
                                                     "sdpa-gathered-pages"}
    r = run("compare", "--preset", "tiny", "--gpu", both, "--baseline",
            "decode=sdpa-gathered-pages", "--json", str(tmp_path / "o.json"))
    assert r.exit_code == 0, r.output
    rows = {x["workload"]: x for x in json.loads((tmp_path / "o.json").read_text())["rows"]}
    assert rows["decode"]["gpu_backend"] == "sdpa-gathered-pages"
    assert rows["decode"]["gpu_chosen"] == "named" and rows["prefill"]["gpu_backend"] == "z"
    r = run("compare", "--preset", "tiny", "--gpu", both, "--baseline", "decode=cudnn")
    says = ("baseline='cudnn' is invalid: was not measured for decode; measured: "
            "flashinfer-decode-tc, sdpa-gathered-pages")
    assert r.exit_code == 2 and says in r.output, r.output
    data["traces"]["decode_cache_lengths"] = [3, 4]
    q.write_text(json.dumps(data))
    r = run("compare", "--preset", "tiny", "--gpu", both)
    assert r.exit_code == 2 and "decode_cache_lengths differ" in r.output, r.output


def test_the_bundled_serving_baseline_is_the_fastest_measured():
    """The bundled decode comparison is against FlashInfer's fastest paged kernel, not SDPA
    over gathered pages (which stays in the candidates, slower)."""
    from attenio.sim import gpu as G
    from attenio.sim import serving as SV

    data = SV.load_serving_jsons(G.resolve_gpu_files("h200-serving"))
    cands = SV.candidates(data, "decode")
    assert cands[0]["backend"].startswith("flashinfer-")
    assert "sdpa-gathered-pages" in [c["backend"] for c in cands[1:]]
    assert cands[0]["unit_ms"] < 0.5 * next(c["unit_ms"] for c in cands
                                            if c["backend"] == "sdpa-gathered-pages")
    assert SV._best(data, "decode")["backend"] == cands[0]["backend"]


def test_variant_rows_against_the_bundled_flashinfer_runs():
    """The variant layers (issue #46): soft cap on and off against the fastest FlashInfer
    kernel for each, the whole layer on both sides, the accelerator with the soft-capping unit
    for the capped one. The traces here are shortened (the GPU's times stay: only the
    ratios' structure is checked): the cap costs the accelerator nothing, the GPU 17%."""
    from attenio.base import config as C
    from attenio.sim import gpu as G
    from attenio.sim import serving as SV

    data = SV.load_serving_jsons(G.resolve_gpu_files("h200-serving"))
    data["traces"]["softcap"] = {**data["traces"]["softcap"], "n": 4096}
    on, off = SV.compare_serving(C.asplos26(), data, variants=True,
                                 only=("softcap", "softcap-off"))
    assert (on["workload"], off["workload"]) == ("softcap", "softcap-off")
    assert on["gpu_backend"] == off["gpu_backend"] == "flashinfer-single-fa3"
    assert on["acc_units"] == ["softcap_unit"] and off["acc_units"] == []
    assert on["gpu_ms"] > 1.1 * off["gpu_ms"]
    assert on["acc_cycles"] <= 1.02 * off["acc_cycles"]
    assert on["compared"] == "the layer"


def test_schedule_reports_shared_prefixes_read_once(tmp_path):
    table = tmp_path / "t.json"
    table.write_text("[[0, 1, 2, 3], [0, 1, 4], [0, 1, 5]]")
    r = run("schedule", "--preset", "tiny", "--decode", "--cache-lens", "13,9,11", "--d", "8",
            "--heads", "4", "--kv-heads", "2", "--page-size", "4", "--block-table", str(table))
    assert r.exit_code == 0, r.output
    assert "shared prefixes      3 sequences in 1 run(s) read their first 2 page(s)" in r.output
    assert "2 tiles" in r.output          # one a K/V head, whatever its parts


def test_shared_prefix_rows_read_the_prefix_once():
    """The shared-prefix decode rows (issue #46) on a shortened 32K trace (8 sequences, the
    GPU's times stay): the accelerator's table starts with the prefix's pages in every
    sequence, it reads them once a K/V head (at the projected bandwidth), so its bytes are the
    distinct pages', far below the same batch unshared; the baseline is the fastest of the
    trace's kernels (FlashInfer's cascade among them)."""
    from attenio.base import config as C
    from attenio.sim import gpu as G
    from attenio.sim import serving as SV

    data = SV.load_serving_jsons(G.resolve_gpu_files("h200-serving"))
    data["traces"]["shared"] = [{**t, "sequences": 8} if t["name"] == "shared-32k" else t
                                for t in data["traces"]["shared"]]
    (row,) = SV.compare_serving(C.asplos26(), data, only=("shared-32k",))
    assert row["gpu_backend"] == min(row["gpu_candidates"], key=row["gpu_candidates"].get)
    assert "flashinfer-cascade" in row["gpu_candidates"]
    assert row["acc_bw_shared_seqs"] == 8
    kv_row = 2 * 128 * 2 * 8                  # K and V of a token, 8 K/V heads, bf16
    own = sum(SV._uniform({**data["traces"]["shared"][1], "sequences": 8}))
    assert row["acc_read_bytes"] <= 1.05 * (32768 + own) * kv_row + 1e6   # + Q, O, tables
    assert row["acc_read_bytes"] < 0.3 * (8 * 32768 + own) * kv_row


def test_compare_variants_needs_a_serving_json():
    r = CliRunner().invoke(main, ["compare", "--gpu", "h200", "--variants"])
    assert r.exit_code == 2 and "variants" in r.output and "serving" in r.output


def test_compare_on_a_bad_serving_json_is_one_line(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    r = run("compare", "--gpu", str(bad))
    assert r.exit_code == 2 and "has no 'provenance'" in r.output, r.output
    r = run("compare", "--gpu", str(tmp_path / "missing.json"))
    assert r.exit_code == 2 and "file not found" in r.output, r.output


@pytest.mark.parametrize("args, says", [
    (["golden", "--seed", "-1", "--n", "16", "--d", "8"], "-1 is not in the range x>=0"),
    (["schedule", "--bogus"], "error: No such option '--bogus'. (see "),
    (["nothing"], "error: No such command 'nothing'."),
    (["explore", "--workers", "0", "--n", "1024"], "0 is not in the range x>=1"),
    (["explore", "--set", "mac_lines=0", "--n", "1024"], "mac_lines=0 is invalid: out of its"),
    (["explore", "--set", "sram_kb=1:100000000:1", "--n", "1024"], "at most 10,000"),
    (["schedule", "--n", "64", "--json", "/proc/attenio-x/y.json"], "does not exist"),
])
def test_bad_values_are_refused_before_any_work(args, says):
    r = run(*args)
    assert r.exit_code == 2, r.output
    assert says in r.output, r.output
    assert "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1, r.output       # one line, not click's 4


def test_an_unwritable_output_is_refused_before_any_work(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "taken.json").mkdir()          # a name that cannot be opened as a file
    r = run("schedule", "--n", "64", "--json", str(ro / "taken.json"))
    assert r.exit_code == 2 and "a folder" in r.output, r.output
    r = run("schedule", "--n", "64", "--json", "/proc/version")   # exists, not writable
    assert r.exit_code == 2 and "cannot write it" in r.output, r.output
    ok = tmp_path / "fresh.json"
    r = run("schedule", "--preset", "tiny", "--n", "64", "--d", "8", "--json", str(ok))
    assert r.exit_code == 0 and ok.exists(), r.output


def test_json_reports_carry_the_version(tmp_path):
    import json

    import attenio

    out = tmp_path / "s.json"
    r = run("schedule", "--preset", "tiny", "--n", "16", "--d", "8", "--json", str(out))
    assert r.exit_code == 0, r.output
    assert json.loads(out.read_text())["attenio_version"] == attenio.__version__


def test_progress_off_a_terminal_is_a_line_every_few_seconds(capsys):
    """Not on a terminal (a log, CI), a long run prints '<label>: N% (T s)' lines instead of
    staying silent (issue #32: accuracy ran 21 s without a word when piped)."""
    from attenio.app.cli.app import _Bar

    with _Bar("integer model", after=0.0, every=0.0) as bar:
        for f in (0.25, 0.5, 1.0):
            bar(f)
    err = capsys.readouterr().err.splitlines()
    assert [ln.split("(")[0].strip() for ln in err] == [
        "integer model: 25%", "integer model: 50%", "integer model: 100%"]


def test_preset_defaults_follow_one_rule():
    """README, "Command line": the paper's performance models default to asplos26, what builds
    the design or checks its numerics to fpga, what runs the RTL to tiny; the API likewise."""
    import inspect

    import attenio

    rule = {"asplos26": {"schedule", "dataflows", "compare", "explore", "model run"},
            "fpga": {"config show", "config save", "registers", "golden", "verilog", "synth"},
            "tiny": {"simulate", "board"}}
    got = {}
    for name, cmd in main.commands.items():
        subs = cmd.commands.items() if hasattr(cmd, "commands") else [(None, cmd)]
        for sub, c in subs:
            for p in c.params:
                if p.name == "preset":
                    got[f"{name} {sub}" if sub else name] = p.default
    assert got == {cmd: preset for preset, cmds in rule.items() for cmd in cmds}
    api = {f: inspect.signature(getattr(attenio, f)).parameters["preset"].default
           for f in ("schedule", "attention", "simulate")}
    assert api == {"schedule": "asplos26", "attention": "fpga", "simulate": "tiny"}


def test_softcap_on_golden_schedule_and_refused_without_the_unit(tmp_path):
    """--softcap C: golden PASSes against float64 attention of c·tanh(s/c) and reports the
    cap, schedule's program carries it in every COMPUTE, and a config without the
    soft-capping unit or a bad cap is one line."""
    import json

    from attenio.contract import program as prog

    r = run("golden", "--preset", "fpga+softcap", "--n", "96", "--d", "64", "--causal",
            "--softcap", "5", "--logit-sigma", "8", "--json", str(tmp_path / "g.json"))
    assert r.exit_code == 0 and "PASS" in r.output and "cap T=" in r.output, r.output
    g = json.loads((tmp_path / "g.json").read_text())
    assert g["softcap"] == 5.0 and g["ok"]
    r = run("schedule", "--preset", "tiny+softcap", "--n", "40", "--d", "8", "--softcap",
            "50", "--program", str(tmp_path / "p.bin"))
    assert r.exit_code == 0 and "softcap=50" in r.output, r.output
    comp = [i for i in prog.decode((tmp_path / "p.bin").read_bytes()) if i.op == prog.Op.COMPUTE]
    assert comp and all(i.args["softcap"] == 1 and i.args["cap"] > 0 for i in comp)
    for args, words in ((["--preset", "fpga", "--softcap", "50"], "no soft-capping unit"),
                        (["--preset", "fpga+softcap", "--softcap", "0"], "positive finite"),
                        (["--preset", "fpga+softcap", "--softcap", "1e9"], "must lie in")):
        r = run("golden", "--n", "16", "--d", "8", *args)
        assert r.exit_code != 0 and words in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1


def test_softmax_scale_on_golden_and_on_the_rtl(tmp_path):
    """--softmax-scale (FlashAttention's softmax_scale): golden and simulate take it, the
    multiplier carries it (c_m changes, PASS against float64 attention with that scale),
    the RTL runs it bit-exact and cycle-exact, and a bad value is one line."""
    import json

    args = ["--preset", "fpga", "--n", "64", "--d", "128", "--causal"]
    r0 = run("golden", *args, "--json", str(tmp_path / "a.json"))
    r1 = run("golden", *args, "--softmax-scale", "0.0833333", "--json", str(tmp_path / "b.json"))
    assert r0.exit_code == 0 and r1.exit_code == 0, r1.output
    a, b = (json.loads((tmp_path / f).read_text()) for f in ("a.json", "b.json"))
    assert b["softmax_scale"] == 0.0833333 and b["c_m"] != a["c_m"]
    ratio = b["c_m"] * 2.0 ** -b["c_sh"] / (a["c_m"] * 2.0 ** -a["c_sh"])
    assert ratio == pytest.approx(0.0833333 * 128 ** 0.5, rel=1e-3)   # s against 1/√d
    r = run("simulate", "--preset", "tiny", "--n", "20", "--nk", "33", "--d", "8",
            "--softmax-scale", "0.6", "--json", str(tmp_path / "s.json"))
    assert r.exit_code == 0 and "PASS" in r.output, r.output
    assert json.loads((tmp_path / "s.json").read_text())["softmax_scale"] == 0.6
    for bad in ("0", "-1", "nan", "inf"):
        r = run("golden", "--n", "16", "--d", "8", "--softmax-scale", bad)
        assert r.exit_code == 2 and "a positive finite number" in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1


def test_sinks_on_golden_and_refused_by_name(tmp_path):
    """--sinks S[,S…]: golden PASSes against float64 attention with the sinks in the softmax
    denominator (lse included) and records them; a preset without sinks, a count that is
    neither 1 nor the heads, a value that is not a number: one line, exit 2."""
    import json

    r = run("golden", "--preset", "fpga+sinks", "--n", "96", "--d", "64", "--causal",
            "--heads", "2", "--sinks", "1.5,-2", "--lse", "--json", str(tmp_path / "g.json"))
    assert r.exit_code == 0 and "PASS" in r.output and "sinks=1.5,-2" in r.output, r.output
    g = json.loads((tmp_path / "g.json").read_text())
    assert g["sinks"] == [1.5, -2.0] and g["ok"]
    for args, words in ((["--preset", "fpga", "--sinks", "1"], "NAME+sinks"),
                        (["--preset", "fpga+sinks", "--heads", "2", "--sinks", "1,2,3"],
                         "one per query head (2)"),
                        (["--preset", "fpga+sinks", "--sinks", "a,b"], "numbers separated"),
                        (["--preset", "fpga+sinks", "--sinks", "500"], "|sink| <")):
        r = run("golden", "--n", "16", "--d", "8", *args)
        assert r.exit_code == 2 and words in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1


def test_alibi_on_golden_and_schedule_and_refused_by_name(tmp_path):
    """--alibi (the standard slopes) and --alibi-slopes: golden PASSes against float64
    attention with the bias and records the slopes; schedule runs them; a preset without the
    unit, both flags, a count that is neither 1 nor the heads, a negative slope: one line,
    exit 2."""
    import json

    r = run("golden", "--preset", "fpga+alibi", "--n", "96", "--d", "64", "--causal",
            "--heads", "2", "--alibi", "--lse", "--json", str(tmp_path / "g.json"))
    assert r.exit_code == 0 and "PASS" in r.output and "alibi=0.0625,0.00390625" in r.output, \
        r.output
    assert json.loads((tmp_path / "g.json").read_text())["alibi_slopes"] == [0.0625, 0.00390625]
    r = run("schedule", "--preset", "tiny+alibi", "--n", "64", "--d", "16", "--causal",
            "--alibi-slopes", "0.5")
    assert r.exit_code == 0 and "alibi=0.5" in r.output, r.output
    for args, words in ((["--preset", "fpga", "--alibi"], "NAME+alibi"),
                        (["--preset", "fpga+alibi", "--alibi", "--alibi-slopes", "1"],
                         "give one of them"),
                        (["--preset", "fpga+alibi", "--heads", "2", "--alibi-slopes", "1,2,3"],
                         "one per query head (2)"),
                        (["--preset", "fpga+alibi", "--alibi-slopes", "-1"], "≥ 0")):
        r = run("golden", "--n", "16", "--d", "8", *args)
        assert r.exit_code == 2 and words in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1



def test_v_head_dim_on_schedule_golden_and_refused_by_name(tmp_path):
    """--d-v: schedule emits the program with V's head dim (COMPUTE.dv, STORE_O rows of d_v),
    golden PASSes against float64 attention of V's own width; V wider than the preset's
    max_head_dim, or not positive: one line, exit 2."""
    from attenio.contract import isa

    prog = tmp_path / "p.bin"
    r = run("schedule", "--preset", "tiny", "--n", "40", "--d", "16", "--d-v", "8", "--causal",
            "--heads", "2", "--program", str(prog))
    assert r.exit_code == 0 and "d=16 d_v=8" in r.output, r.output
    ins = isa.decode(prog.read_bytes())
    assert {i.dv for i in ins if i.op == isa.Op.COMPUTE} == {8}
    assert {i.d for i in ins if i.op == isa.Op.STORE_O} == {8}
    r, out = run_json(tmp_path, "golden", "--preset", "fpga", "--n", "64", "--d", "96",
                      "--d-v", "64", "--causal")
    assert "PASS" in r.output and out["workload"]["head_dim_v"] == 64, r.output
    for dv, words in (("80", "head_dim_v=80"), ("0", "head_dim_v=0")):
        r = run("schedule", "--preset", "tiny", "--n", "16", "--d", "8", "--d-v", dv)
        assert r.exit_code == 2 and words in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1


def test_v_in_k_on_schedule_and_golden():
    """--v-in-k: LOAD_KV reads K's rows alone (the closed form agrees: schedule exits 0) and
    golden PASSes with V the first --d-v columns of K; V wider than K: one line, exit 2."""
    args = ("--preset", "tiny", "--decode", "--cache-lens", "40,9", "--d", "24", "--d-v", "16",
            "--heads", "4", "--kv-heads", "1", "--page-size", "4")
    r = run("schedule", *args, "--v-in-k")
    assert r.exit_code == 0 and "closed form          equal" in r.output, r.output
    apart = run("schedule", *args)
    read = [int(x.split("(")[1].split(" B")[0].replace(",", ""))
            for x in (r.output, apart.output) for x in x.splitlines() if "DRAM read" in x]
    assert read[0] < read[1]
    r = run("golden", *args, "--v-in-k")
    assert r.exit_code == 0 and "PASS" in r.output, r.output
    r = run("schedule", "--preset", "tiny", "--n", "16", "--d", "8", "--d-v", "16", "--v-in-k")
    assert r.exit_code == 2 and "head_dim_v=16" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_decode_fp8_row_reads_about_half_the_bytes():
    """The 8-bit K/V decode row (issue #46 item 4) on a shortened trace (the GPU's times stay):
    against the GPU's FP8-K/V kernels, the accelerator at 8 bits with each key's factor in its
    page, 16 to a 32-byte word: its bytes are the 16-bit row's half plus 2 bytes a key."""
    from attenio.base import config as C
    from attenio.sim import gpu as G
    from attenio.sim import serving as SV

    data = SV.load_serving_jsons(G.resolve_gpu_files("h200-serving"))
    lens = [min(n, 3000) for n in data["traces"]["decode_cache_lengths"][:8]]
    data["traces"]["decode_cache_lengths"] = lens
    bf, f8 = SV.compare_serving(C.asplos26(), data, only=("decode", "decode-fp8"))
    assert f8["workload"] == "decode-fp8" and f8["acc_data_bits"] == 8
    assert f8["gpu_backend"] in ("flashinfer-decode-tc", "flashinfer-decode")
    assert all(c.startswith("flashinfer") for c in f8["gpu_candidates"])
    kv = 8 * sum(lens) * 2 * 128             # 8 K/V heads, K and V rows at d = 128, bytes
    factors = 2 * 8 * sum(-(-n // 16) for n in lens) * 32     # K's and V's factor words
    assert kv + factors < f8["acc_read_bytes"] < kv + factors + 2e5     # + Q, O rows, tables
    assert bf["acc_read_bytes"] > 1.9 * f8["acc_read_bytes"]


def test_schedule_counts_the_k_and_v_factors_of_a_paged_cache():
    r = run("schedule", "--config", "configs/asplos26-kv8.toml", "--decode", "--cache-lens",
            "100,37", "--page-size", "16", "--d", "128", "--heads", "8", "--kv-heads", "2",
            "--q-scales", "row", "--k-block", "1", "--v-scales", "key")
    assert r.exit_code == 0, r.output
    # 7 + 3 pages of 16 keys, one group a page: a factor word a page and K/V head, K's and V's
    words = 2 * (-(-100 // 16) + -(-37 // 16))
    line = next(x for x in r.output.splitlines() if x.startswith("  K factors"))
    assert "one a key, 16 a word before each group of rows in a page" in line
    assert line.endswith(f"({words * 32:,} B)")
    line = next(x for x in r.output.splitlines() if x.startswith("  V factors"))
    assert line.endswith(f"({words * 32:,} B)")
    assert "closed form          equal" in r.output
    unpaged = run("schedule", "--preset", "tiny+vscales", "--n", "64", "--d", "16",
                  "--v-scales", "key")
    assert unpaged.exit_code == 2
    assert unpaged.output.splitlines()[-1].startswith("error: v_scales='key' is invalid without")
    no_unit = run("schedule", "--preset", "tiny", "--decode", "--cache-lens", "9",
                  "--page-size", "4", "--d", "8", "--v-scales", "key")
    assert no_unit.exit_code == 2 and "NAME+vscales" in no_unit.output.splitlines()[-1]
    bad = run("schedule", "--preset", "tiny", "--decode", "--cache-lens", "9", "--d", "8",
              "--k-block", "0")
    assert bad.exit_code == 2 and "--k-block" in bad.output.splitlines()[-1]
