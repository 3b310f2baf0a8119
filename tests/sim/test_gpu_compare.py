"""attenio compare: CSV loading and its errors, the projections' arithmetic, the CLI."""

import pytest
from click.testing import CliRunner

from attenio.app.cli import main
from attenio.base import config as C
from attenio.sim import gpu as G
from attenio.sim.schedule import schedule

HEADER = ("backend,dtype,d,n,causal,batch,heads,time_ms,time_ms_min,repeats,tflops,"
          "sm_clock_mhz,status")


def write_csv(tmp_path, rows, header=HEADER):
    p = tmp_path / "gpu.csv"
    p.write_text("# gpu: Test GPU\n# date: 2026-11-29\n" + header + "\n" + "\n".join(rows) + "\n")
    return p


ROWS = [
    "flash,bf16,64,1024,0,1,1,0.050,0.049,50,5.4,1980,ok",
    "cudnn,bf16,64,1024,0,1,1,0.040,0.039,50,6.7,1980,ok",
    "cudnn,bf16,64,1024,0,64,16,1.0,0.99,50,275.0,1900,ok",
    "flash,bf16,64,1024,0,64,16,2.0,1.9,50,137.0,1900,ok",
    "math,bf16,64,1024,0,64,16,,,0,,,error-oom",
]


def test_load_and_pick_fastest(tmp_path):
    data = G.load_gpu_csv(write_csv(tmp_path, ROWS))
    assert data.provenance["gpu"] == "Test GPU"
    assert len(data.rows) == 4  # the failed row is dropped
    one = G.best_gpu_row(data, 1024, 64, False, "bf16", filled=False)
    full = G.best_gpu_row(data, 1024, 64, False, "bf16", filled=True)
    assert one["backend"] == "cudnn" and full["time_ms"] == 1.0


def test_a_named_baseline_and_several_files(tmp_path):
    """--baseline picks a backend instead of the fastest; one not measured for the shape lists
    those that were; CSVs read together compete row by row (issue #46)."""
    data = G.load_gpu_csv(write_csv(tmp_path, ROWS))
    assert G.best_gpu_row(data, 1024, 64, False, "bf16", True, "flash")["time_ms"] == 2.0
    with pytest.raises(C.ConfigError, match=r"baseline='fa3' is invalid: was not measured for "
                       r"N=1024 .* measured: cudnn, flash"):
        G.best_gpu_row(data, 1024, 64, False, "bf16", True, "fa3")
    other = tmp_path / "other"
    other.mkdir()
    faster = write_csv(other, ["fa3,bf16,64,1024,0,64,16,0.5,0.5,50,550.0,1900,ok"])
    both = G.load_gpu_csvs(G.resolve_gpu_files(f"{tmp_path / 'gpu.csv'},{faster}"))
    assert G.best_gpu_row(both, 1024, 64, False, "bf16", True)["backend"] == "fa3"
    with pytest.raises(C.ConfigError, match="mixes CSV and JSON"):
        G.resolve_gpu_files(f"{faster},h200-serving-2026-12-02.json")


def test_projection_arithmetic(tmp_path):
    data = G.load_gpu_csv(write_csv(tmp_path, ROWS))
    hw = C.asplos26()
    (row,) = G.compare(hw, data, [1024], [64], [False], gpu_peak_tflops=1000.0,
                       gpu_bandwidth_tbs=5.0)
    acc_cycles = schedule(hw, C.Workload.square(1024, 64),
                          keep_spans=False).total_cycles
    assert row["acc_cycles"] == acc_cycles
    scale = 2 * hw.macs * 1e9 / 1e12 / 1000.0
    assert row["proj_equal_peak_us"] == pytest.approx(acc_cycles / 1e3 * scale)
    per_head_us = 1.0e3 / (64 * 16)
    assert row["gpu_filled_us_per_head"] == pytest.approx(per_head_us)
    assert row["proj_equal_peak_speedup"] == pytest.approx(per_head_us / row["proj_equal_peak_us"])
    assert row["proj_bw_bytes_per_cycle"] == round(4096 * 5.0 / 1000.0)
    assert row["gpu_one_cycles"] == round(0.040e-3 * 1980e6)


def test_missing_columns_and_units(tmp_path):
    with pytest.raises(C.ConfigError, match=r"missing columns time_ms; found time_us: unknown"):
        G.load_gpu_csv(write_csv(tmp_path, ["x"], HEADER.replace("time_ms,", "time_us,")))
    with pytest.raises(C.ConfigError, match=r"missing columns sm_clock_mhz, status"):
        G.load_gpu_csv(write_csv(tmp_path, [], HEADER.rsplit(",", 2)[0]))
    with pytest.raises(C.ConfigError, match="file not found"):
        G.load_gpu_csv(tmp_path / "nope.csv")
    with pytest.raises(C.ConfigError, match=r"data row 2"):
        G.load_gpu_csv(write_csv(tmp_path, ["flash,bf16,x,1024,0,1,1,1,1,1,1,1,ok"]))


def test_no_row_for_shape(tmp_path):
    data = G.load_gpu_csv(write_csv(tmp_path, ROWS))
    with pytest.raises(C.ConfigError, match=r"no measured row for N=2048 d=64 causal=False"):
        G.compare(C.asplos26(), data, [2048], [64], [False])


def test_cli_compare(tmp_path):
    path = write_csv(tmp_path, ROWS)
    r = CliRunner().invoke(main, ["compare", "--gpu", str(path), "--ns", "1024", "--ds", "64",
                                  "--causal", "no", "--plot", str(tmp_path / "r.png")])
    assert r.exit_code == 0, r.output
    assert "projections" in r.output and "paper: 2.4-3.4x" in r.output
    assert (tmp_path / "r.png").exists()
    r = CliRunner().invoke(main, ["compare", "--gpu", str(path), "--ns", "4096", "--ds", "64"])
    assert r.exit_code == 2 and r.output.startswith("error: gpu csv=")


def test_committed_h200_data_loads():
    from pathlib import Path

    csvs = sorted((Path(__file__).resolve().parents[2] / "data" / "gpu").glob("*.csv"))
    assert csvs
    data = G.load_gpu_csv(csvs[0])
    assert data.provenance["gpu"].startswith("NVIDIA")
    assert {r["n"] for r in data.rows} >= {1024, 131072}


def test_bundled_measurements_are_package_data_and_the_default(tmp_path):
    """The H200 measurements ship with the package (pip install attenio can run compare):
    pyproject maps data/gpu to attenio.gpu_data with the files as package data; --gpu names
    them, and without --gpu compare reads the attention shapes'."""
    from pathlib import Path

    try:
        import tomllib
    except ModuleNotFoundError:        # Python 3.10
        import tomli as tomllib

    from click.testing import CliRunner

    from attenio.app.cli import main

    root = Path(__file__).resolve().parents[2]
    st = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert st["package-dir"]["attenio.gpu_data"] == "data/gpu"
    assert "attenio.gpu_data" in st["packages"]
    for name, files in G.BUNDLED.items():
        paths = [Path(p) for p in G.resolve_gpu_files(name)]
        assert [p.name for p in paths] == list(files)
        for path in paths:
            assert path.is_file() and path.suffix[1:] in " ".join(
                st["package-data"]["attenio.gpu_data"])
    assert G.resolve_gpu_files(None) == G.resolve_gpu_files("h200")
    r = CliRunner().invoke(main, ["compare", "--ns", "1024", "--ds", "64", "--causal", "no"])
    assert r.exit_code == 0 and "GPU (measured): NVIDIA H200" in r.output, r.output
    r = CliRunner().invoke(main, ["compare", "--gpu", "h100"])
    assert r.exit_code == 2 and r.output.startswith("error: gpu='h100'"), r.output


def test_roofline_figure_draws_one_intensity_and_the_measured_roof(tmp_path):
    """compare --plot (issue #32): both machines' points at the same x (the workload's
    compulsory intensity), the GPU roof at the measured GEMM throughput, the points' TFLOP/s
    those of the comparison rows."""
    data = G.load_gpu_csvs(G.resolve_gpu_files("h200"))
    hw = C.asplos26()
    rows = G.compare(hw, data, [1024, 4096], [64], [False, True], "bf16")
    gemm = float(data.provenance["gemm_8192_bf16_tflops"])
    drawn = G.roofline_plot(rows, hw, tmp_path / "r.png", gpu_gemm_tflops=gemm)
    assert (tmp_path / "r.png").stat().st_size > 10_000
    assert drawn["gpu_roof_tflops"] == gemm < G.H200_PEAK_TFLOPS
    for p, r in zip(drawn["points"], rows, strict=True):
        fl = G.attention_flops(r["n"], r["d"], r["causal"])
        assert p["x"] == fl / (4 * r["n"] * r["d"] * hw.element_bytes)
        assert p["gpu_tflops"] == r["gpu_filled_tflops"]
        assert abs(p["acc_tflops"] - fl / (r["acc_us"] * 1e-6) / 1e12) < 1e-9
