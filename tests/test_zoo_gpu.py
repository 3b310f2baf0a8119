"""The GPU column of ``attenio model run``: FlashInfer measured on the zoo's layers
(scripts/gpu/gpu_zoo.py, data/gpu/), matched to the run's layer and batch, beside the
accelerator's projections."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from attenio.app.cli import main
from attenio.base import config as C
from attenio.model import zoo
from attenio.sim.gpu import projection
from attenio.sim.zoo import compare_gpu, gpu_limits, gpu_zoo_data, run_model


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_each_measurement_is_the_zoo_layer_it_names():
    """The bundled file's rows describe the layers of model/zoo.toml they are filed under (a
    changed zoo value leaves them stale), and their FLOPs are the causal pairs' (counted here
    apart: a window of w keys, the query's own included)."""
    data = gpu_zoo_data()
    assert data["provenance"]["flashinfer"] and "H100" in data["provenance"]["gpu"]
    ok = [m for m in data["measurements"] if m["status"] == "ok"]
    assert len(ok) == len(data["measurements"]) == 48
    for m in ok:
        for tag in m["layers"]:
            key, name = tag.split("/")
            lt = next(x for x in zoo.get(key).layers if x.name == name)
            assert (m["heads"], m["kv_heads"], m["d"], m["dv"]) == (
                lt.heads, lt.kv_heads, lt.head_dim, lt.head_dim_v or lt.head_dim)
            assert (m["window"] or None, m["cap"] or None, m["scale"] or None, m["sinks"]) == (
                lt.window, lt.softcap, lt.softmax_scale, lt.sinks)
        n, w = m["n"], m["window"]
        pairs = n * (n + 1) // 2 if not w else w * (w + 1) // 2 + (n - w) * w
        assert m["flops"] == 2 * m["heads"] * pairs * (m["d"] + m["dv"])


def test_the_gpu_row_is_the_fastest_kernel_and_the_projections_scale_the_run():
    hw = C.preset("asplos26+sinks")
    m = zoo.get("gpt-oss-20b")
    runs = run_model(hw, m, "prefill", n=4096)
    data = gpu_zoo_data()
    rows = compare_gpu(hw, m, runs, data)
    assert set(rows) == {"window", "full"}
    peak, bw, _ = gpu_limits(data)
    _, scale, hw_bw, _ = projection(hw, peak, bw)
    assert hw_bw.dram_bytes_per_cycle < hw.dram_bytes_per_cycle     # the GPU's bytes per FLOP
    for r in runs:
        g = rows[r.layer.name]
        same = [x["time_ms"] for x in data["measurements"]
                if f"gpt-oss-20b/{r.layer.name}" in x["layers"] and x["n"] == 4096]
        assert len(same) == 2 and g["gpu_ms"] == min(same)
        assert g["proj_equal_peak_ms"] == pytest.approx(r.cycles / hw.clock_mhz * 1e-3 * scale)
        # less bandwidth never makes the run faster
        assert g["proj_equal_peak_bw_ms"] >= g["proj_equal_peak_ms"]
        assert g["proj_equal_peak_bw_speedup"] == pytest.approx(
            g["gpu_ms"] / g["proj_equal_peak_bw_ms"])
    # the short window moves more bytes a FLOP: bandwidth costs it more than the full layer
    win, full = rows["window"], rows["full"]
    assert (win["proj_equal_peak_bw_ms"] / win["proj_equal_peak_ms"]
            > full["proj_equal_peak_bw_ms"] / full["proj_equal_peak_ms"])
    # a batch the file did not measure has no row
    assert compare_gpu(hw, m, run_model(hw, m, "prefill", n=1000), data) == {}
    assert compare_gpu(hw, m, run_model(hw, m, "prefill", n=4096, batch=2), data) == {}


def test_cli_shows_the_gpu_block_and_its_absence(tmp_path):
    r = run("model", "run", "gemma-2-27b", "--prefill", "4096", "--json",
            str(tmp_path / "r.json"), "--csv", str(tmp_path / "r.csv"))
    assert r.exit_code == 0, r.output
    assert "H100" in r.output and "flashinfer-single-fa3" in r.output
    assert "per forward pass: GPU" in r.output and len(r.output.strip().splitlines()) <= 40
    rep = json.loads((tmp_path / "r.json").read_text())
    assert all(x["gpu"]["gpu_backend"].startswith("flashinfer") for x in rep["layers"])
    assert "proj_equal_peak_bw_speedup" in (tmp_path / "r.csv").read_text().splitlines()[0]
    r = run("model", "run", "gemma-2-27b", "--prefill", "1000")
    assert r.exit_code == 0 and "GPU: none measured for this batch" in r.output
    assert "4096, 16384" in r.output
    r = run("model", "run", "gemma-2-27b", "--prefill", "4096", "--gpu", "none")
    assert r.exit_code == 0 and "GPU" not in r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for arg in (str(bad), str(tmp_path / "missing.json")):
        r = run("model", "run", "gemma-2-27b", "--prefill", "4096", "--gpu", arg)
        assert r.exit_code == 2 and "gpu" in r.output and "gpu_zoo.py" in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1
