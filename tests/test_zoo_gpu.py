"""The GPU column of ``attenio model run``: FlashInfer measured on the zoo's layers
(scripts/gpu/gpu_zoo.py, data/gpu/), matched to the run's layer and batch, beside the
accelerator's projections."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from attenio.app.cli import main
from attenio.base import config as C
from attenio.model import zoo
from attenio.sim.gpu import bundled_dir, projection
from attenio.sim.serving import _uniform, candidates
from attenio.sim.zoo import (
    GPU_ZOO_FILES,
    compare_gpu,
    decode_matches,
    gpu_data,
    gpu_limits,
    run_model,
)


def run(*args):
    return CliRunner().invoke(main, list(args))


def prefill_lengths(**kw):
    """scripts/gpu/serving_traces.py's trace (the GPU kit is scripts, not the package)."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "gpu" / "serving_traces.py"
    spec = importlib.util.spec_from_file_location("serving_traces", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.prefill_lengths(**kw)


def test_each_measurement_is_the_zoo_layer_it_names():
    """The bundled files' rows describe the layers of model/zoo.toml they are filed under (a
    changed zoo value leaves them stale), and their FLOPs are the causal pairs' (counted here
    apart: a window of w keys, the query's own included), on one prompt or on the varlen
    trace's prompts (scripts/gpu/serving_traces.py, drawn here again)."""
    data = gpu_data(None, "prefill")
    assert data["provenance"]["flashinfer"] and "H100" in data["provenance"]["gpu"]
    assert sorted(data["sources"]) == sorted(GPU_ZOO_FILES)
    by_file = {f: [m for m in data["measurements"] if m["source"] == f] for f in GPU_ZOO_FILES}
    # two runs of 1 prompt, varlen, and varlen's four fa3 kernels not compiled in its time
    assert [len(v) for v in by_file.values()] == [48, 48, 24, 4]
    ok = [m for m in data["measurements"] if m["status"] == "ok"]
    late = [m for m in data["measurements"] if m not in ok]
    assert len(ok) == 48 + 48 + 20 + 4 and all(m["status"].startswith("not-compiled")
                                               for m in late)

    def kernel(m):
        return m["layers"][0], m["n"], m["backend"]

    assert sorted(map(kernel, late)) == sorted(map(kernel, by_file[GPU_ZOO_FILES[3]]))
    trace = data["traces"]["prefill_lengths"]
    assert len(trace) == 64 and sum(trace) == 86823
    assert trace == prefill_lengths(cap=1 << 17)

    def pairs(n, w):
        return n * (n + 1) // 2 if not w or n <= w else w * (w + 1) // 2 + (n - w) * w

    for m in ok:
        for tag in m["layers"]:
            key, name = tag.split("/")
            lt = next(x for x in zoo.get(key).layers if x.name == name)
            assert (m["heads"], m["kv_heads"], m["d"], m["dv"]) == (
                lt.heads, lt.kv_heads, lt.head_dim, lt.head_dim_v or lt.head_dim)
            assert (m["window"] or None, m["cap"] or None, m["scale"] or None, m["sinks"]) == (
                lt.window, lt.softcap, lt.softmax_scale, lt.sinks)
        lens = trace if m["n"] == "prefill" else [m["n"]]
        assert m["flops"] == 2 * m["heads"] * sum(pairs(n, m["window"]) for n in lens) * (
            m["d"] + m["dv"])


def test_the_gpu_row_is_the_fastest_kernel_and_the_projections_scale_the_run():
    hw = C.preset("asplos26+sinks")
    m = zoo.get("gpt-oss-20b")
    runs = run_model(hw, m, "prefill", n=4096)
    data = gpu_data(None, "prefill")
    rows = compare_gpu(hw, m, runs, data)
    assert set(rows) == {"window", "full"}
    peak, bw, _ = gpu_limits(data)
    _, scale, hw_bw, _ = projection(hw, peak, bw)
    assert hw_bw.dram_bytes_per_cycle < hw.dram_bytes_per_cycle     # the GPU's bytes per FLOP
    for r in runs:
        g = rows[r.layer.name]
        same = [x["time_ms"] for x in data["measurements"]
                if f"gpt-oss-20b/{r.layer.name}" in x["layers"] and x["n"] == 4096]
        assert len(same) == 4 and g["gpu_ms"] == min(same)      # 2 kernels, 2 runs
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
    # two runs of two GPUs are not read as one
    other = json.loads((bundled_dir() / GPU_ZOO_FILES[0]).read_text())
    other["provenance"]["gpu"] = "NVIDIA H200"
    (tmp_path / "h200.json").write_text(json.dumps(other))
    both = f"{bundled_dir() / GPU_ZOO_FILES[1]},{tmp_path / 'h200.json'}"
    r = run("model", "run", "gemma-2-27b", "--prefill", "4096", "--gpu", both)
    assert r.exit_code == 2 and "files of one GPU" in r.output, r.output
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    for arg in (str(bad), str(tmp_path / "missing.json")):
        r = run("model", "run", "gemma-2-27b", "--prefill", "4096", "--gpu", arg)
        assert r.exit_code == 2 and "gpu" in r.output and "gpu_zoo.py" in r.output, r.output
        assert len(r.output.strip().splitlines()) == 1


def _small_serving(tmp_path, decode_lens, mla):
    """The bundled FlashInfer serving JSON with its decode and MLA traces made small (so the
    accelerator's side schedules in a moment); its GPU rows are kept as they are."""
    src = json.loads((bundled_dir() / "h200-flashinfer-serving-2026-12-06.json").read_text())
    src["traces"]["decode_cache_lengths"] = decode_lens
    src["traces"]["mla"] = {**src["traces"]["mla"], **mla}
    f = tmp_path / "serving.json"
    f.write_text(json.dumps(src))
    return f


def test_decode_batches_the_gpu_ran_are_matched_and_compared(tmp_path):
    lens = [300, 1000, 77]
    f = _small_serving(tmp_path, lens, {"sequences": 3, "low": 100, "high": 300})
    data = gpu_data(str(f), "decode")
    hw = C.preset("asplos26")
    llama = zoo.get("llama-3.1-8b")
    runs = run_model(hw, llama, "decode", decode=True, cache_lens=lens, page_size=16)
    assert decode_matches(hw, runs, data) == {"full": "decode"}
    row = compare_gpu(hw, llama, runs, data)["full"]
    assert row["acc_cycles"] == runs[0].cycles          # the same batch on both sides
    assert row["gpu"] == "NVIDIA H200" and row["gpu_bandwidth_tbs"] == 4.8
    assert row["gpu_backend"] == min(candidates(data, "decode"),
                                     key=lambda m: m["time_ms"])["backend"]
    # another page size, other lengths, a window: not the batch the GPU ran
    for m, kw in ((llama, {"cache_lens": lens, "page_size": 64}),
                  (llama, {"cache_lens": lens[:2], "page_size": 16}),
                  (zoo.get("mistral-7b"), {"cache_lens": lens, "page_size": 16})):
        other = run_model(hw, m, "decode", decode=True, **kw)
        assert decode_matches(hw, other, data) == {} and compare_gpu(hw, m, other, data) == {}
    # MLA's absorbed decode, V read from K's rows
    wide = C.replace(hw, max_head_dim=576)
    ds = zoo.get("deepseek-v3")
    mla = run_model(wide, ds, "decode", decode=True, page_size=64,
                    cache_lens=_uniform(data["traces"]["mla"]))
    row = compare_gpu(wide, ds, mla, data)["mla-decode"]
    assert row["acc_cycles"] == mla[0].cycles and row["gpu_backend"].startswith("flashinfer-mla")
    r = run("model", "run", "llama-3.1-8b", "--decode", "--cache-lens", "300,1000,77",
            "--page-size", "16", "--gpu", str(f))
    assert r.exit_code == 0 and "NVIDIA H200" in r.output and "GPU ÷ acc." in r.output


def test_a_decode_run_names_the_bundled_batch_without_scheduling_it_again():
    """The bundled decode traces are found by their lengths alone (no schedule): the CLI
    names the option that compares them, which schedules the batch twice more."""
    import attenio.sim.zoo as Z

    data = gpu_data(None, "decode")
    hw = C.replace(C.preset("asplos26"), max_head_dim=576)
    ds = zoo.get("deepseek-v3").layers[1]
    lens = _uniform(data["traces"]["mla"])
    wl = Z.layer_workload(None, ds, decode=True, cache_lens=lens, page_size=64)
    wl = C.replace(wl, head_dim_v=ds.head_dim_v, v_in_k=True)
    assert decode_matches(hw, [Z.LayerRun(ds, wl, cycles=1)], data) == {"mla-decode": "mla-decode"}
    assert decode_matches(hw, [Z.LayerRun(ds, C.replace(wl, page_size=16), cycles=1)],
                          data) == {}


def test_a_varlen_prefill_of_the_trace_is_matched_and_says_what_did_not_run(tmp_path):
    """A run on the file's varlen trace (here a small one put in its place: the matching, not
    the times, is under test) takes the trace's rows; a kernel that was not compiled there is
    named; other lengths match nothing."""
    src = json.loads((bundled_dir() / GPU_ZOO_FILES[2]).read_text())
    lens = [5, 37, 20]
    src["traces"]["prefill_lengths"] = lens
    f = tmp_path / "varlen.json"
    f.write_text(json.dumps(src))
    data = gpu_data(str(f), "prefill")
    hw = C.preset("asplos26+sinks")
    m = zoo.get("gpt-oss-20b")
    runs = run_model(hw, m, "prefill", seqlens=lens)
    rows = compare_gpu(hw, m, runs, data)
    assert set(rows) == {"window", "full"}
    assert rows["window"]["gpu_backend"] == "flashinfer-sink-fa2"
    assert rows["window"]["gpu_not_measured"] == ["flashinfer-sink-fa3"]
    assert compare_gpu(hw, m, run_model(hw, m, "prefill", seqlens=lens[:2]), data) == {}
    r = run("model", "run", "gpt-oss-20b", "--seqlens", "5,37,20", "--gpu", str(f))
    assert r.exit_code == 0, r.output
    assert "not measured for window: flashinfer-sink-fa3; full:" in r.output
