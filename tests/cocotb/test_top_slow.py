"""The fpga preset at N = 1024, d = 64 on the RTL (make test-rtl-slow): bit-exact output, cycles
against the schedule generator, and the PE utilization target (≥ 95%); waveforms on both DRAMs."""

import pytest

from attenio.base import config as C
from attenio.verify.runner import simulate

from .test_top import check_run, workload


@pytest.mark.slow
def test_fpga_n1024_d64():
    hw = C.fpga()
    wl = workload(hw, 1024, 64)
    r = simulate(hw, wl, seed=1, log=lambda *a: None)
    check_run(hw, wl, r)
    util = r.counters["pe_busy"] / r.cycles
    print(f"\nfpga N=1024 d=64: RTL {r.cycles:,} cycles, predicted {r.predicted_cycles:,} "
          f"({100 * r.cycle_gap:+.4f}%), PE busy {util:.2%}, simulated at "
          f"{r.sim_rate:,.0f} cycles/s")
    assert util >= 0.95


@pytest.mark.slow
def test_fpga_varlen():
    hw = C.fpga()
    wl = C.VarlenWorkload(seqlens_q=[300, 17, 64, 129], seqlens_k=[300, 40, 64, 129],
                          head_dim=64, heads=2, kv_heads=1, causal=True)
    r = simulate(hw, wl, seed=2, log=lambda *a: None)
    check_run(hw, wl, r)
    assert r.cycles == r.predicted_cycles


@pytest.mark.slow
def test_fpga_window():
    hw = C.fpga()
    wl = C.Workload(seq_q=1000, seq_k=1000, head_dim=64, causal=True, window_left=200)
    r = simulate(hw, wl, seed=4, log=lambda *a: None)
    check_run(hw, wl, r)
    assert r.cycles == r.predicted_cycles


@pytest.mark.slow
@pytest.mark.parametrize("shape, p", [
    # a GQA decode batch, 16 keys a page, two table entries a bus word
    ({"seqlens_q": [1, 1, 1], "seqlens_k": [300, 129, 64], "head_dim": 64, "heads": 4,
      "kv_heads": 2, "page_size": 16}, 0.0),
    ({"seqlens_q": [1, 1, 1], "seqlens_k": [300, 129, 64], "head_dim": 64, "heads": 4,
      "kv_heads": 2, "page_size": 16}, 0.3),
    # windowed varlen prefill over pages of 8 keys
    ({"seqlens_q": [40, 100], "seqlens_k": [40, 300], "head_dim": 32, "heads": 2,
      "kv_heads": 1, "causal": True, "window_left": 50, "page_size": 8}, 0.0),
])
def test_fpga_paged(shape, p):
    hw = C.fpga()
    wl = C.VarlenWorkload(**shape)
    r = simulate(hw, wl, seed=3, p_stall=p, log=lambda *a: None)
    assert r.failures() == []
    if p == 0:
        assert r.cycles == r.predicted_cycles


@pytest.mark.slow
@pytest.mark.parametrize("dram", ["hdl", "python"])
def test_waves_on_both_drams(tmp_path, monkeypatch, dram):
    """--waves on either path: a VCD under ./build/waves named after the top that ran (the fast
    path's top wraps the design as attenio_fast.dut), and the run still passes."""
    monkeypatch.chdir(tmp_path)
    r = simulate(C.tiny(), workload(C.tiny(), 16, 8), seed=1, waves=True, dram=dram,
                 log=lambda *a: None)
    assert r.failures() == []
    wave = tmp_path / r.extra["waves"]
    top = "attenio_fast" if dram == "hdl" else "attenio_top"
    assert wave.name.startswith(f"{top}-verilator-seed1") and wave.stat().st_size > 100_000
    if dram == "hdl":
        assert b"$scope module dut" in wave.read_bytes()[:200_000]


@pytest.mark.slow     # a model of its own (max_head_dim = 576): about 30 s to build
def test_head_dims_to_576_on_the_rtl():
    """Issue #45: DeepSeek's absorbed-MLA Q·K head dim, 576, on the tiny array with
    max_head_dim raised to 576 (the one change a preset needs: docs/architecture.md, "Head dims
    to 576"): causal with lse bit-exact and cycle-exact, and a paged decode under stalls."""
    hw = C.replace(C.tiny(), max_head_dim=576)
    wl = C.Workload(seq_q=9, seq_k=13, head_dim=576, causal=True, lse=True)
    r = simulate(hw, wl, seed=2, log=lambda *a: None)
    assert r.failures() == [] and r.cycles == r.predicted_cycles
    dec = C.VarlenWorkload(seqlens_q=[1, 1], seqlens_k=[20, 9], head_dim=576, heads=2,
                           kv_heads=1, page_size=4)
    r = simulate(hw, dec, seed=2, p_stall=0.2, log=lambda *a: None)
    assert r.failures() == []
