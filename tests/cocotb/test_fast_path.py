"""The fast simulation path (verify/fast_dram.sv): the same runs as the Python DRAM, cycle for
cycle and bit for bit, and checkers that catch each AXI4 rule a master can break."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.verify import fast_dram
from attenio.verify.runner import TOP, build_verilog, simulate

TINY = C.tiny()
CASES = [
    ("tiny causal GQA", TINY, {"n": 31, "nk": 45, "d": 16, "heads": 2, "kv_heads": 1,
                               "causal": True}),
    ("tiny 1 B/cycle, latency 20", C.replace(TINY, dram_latency=20, dram_bytes_per_cycle=1),
     {"n": 40, "d": 8}),
    ("tiny 3 B/cycle", C.replace(TINY, dram_bytes_per_cycle=3), {"n": 64, "d": 8,
                                                                 "causal": True}),
    # the fpga preset's Python-DRAM model is built for this case alone: make test-slow (the
    # two DRAMs' agreement is a property of the DRAM models, shown above on three tiny ones)
    pytest.param("fpga two tiles", C.fpga(), {"n": 300, "d": 16}, marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name, hw, shape", CASES,
                         ids=[getattr(c, "values", c)[0] for c in CASES])
def test_both_drams_agree(name, hw, shape):
    """One workload on the Python DRAM and on the SystemVerilog one: the same cycles, counters,
    output, bytes and handshakes on every port (so the same timing rules)."""
    wl = C.Workload.from_options(hw, **shape)
    py = simulate(hw, wl, seed=4, dram="python", log=lambda *a: None)
    hd = simulate(hw, wl, seed=4, dram="hdl", log=lambda *a: None)
    assert py.failures() == [] and hd.failures() == []
    assert hd.counters == py.counters
    assert np.array_equal(hd.out, py.out)
    for key in ("dram_bytes_read", "dram_insn_bytes", "dram_bytes_written"):
        assert hd.extra[key] == py.extra[key], key
    assert [p["handshakes"] for p in hd.extra["axi"]] == \
        [p["handshakes"] for p in py.extra["axi"]]
    assert hd.cycles == hd.predicted_cycles


def test_auto_takes_the_fast_path_only_when_it_can():
    wl = C.Workload.from_options(TINY, n=16, d=8)
    r = simulate(TINY, wl, seed=1, log=lambda *a: None)
    assert r.failures() == [] and r.extra["dram_unsupported"] == 0   # only the fast path has it
    r = simulate(TINY, wl, seed=1, abort_at=40, log=lambda *a: None)
    assert "dram_unsupported" not in r.extra                      # an abort: the Python DRAM
    with pytest.raises(ConfigError, match="dram.*abort_at"):
        simulate(TINY, wl, abort_at=40, dram="hdl")
    with pytest.raises(ConfigError, match="dram"):
        simulate(TINY, wl, dram="fast")


@pytest.mark.parametrize("p", [0.3, 0.9])
def test_both_drams_stall_and_agree_on_the_results(p):
    """Stalls on the fast path as on the Python DRAM (each ready and offer dropped with
    probability p, each DRAM with its own random sequence): the same output and bytes, no
    protocol violation, more cycles than the unstalled run, which the model predicts."""
    wl = C.Workload.from_options(TINY, n=31, nk=45, d=16, heads=2, kv_heads=1, causal=True)
    plain = simulate(TINY, wl, seed=4, dram="hdl", log=lambda *a: None)
    hd = simulate(TINY, wl, seed=4, dram="hdl", p_stall=p, log=lambda *a: None)
    py = simulate(TINY, wl, seed=4, dram="python", p_stall=p, log=lambda *a: None)
    assert plain.failures() == [] and hd.failures() == [] and py.failures() == []
    assert np.array_equal(hd.out, plain.out) and np.array_equal(py.out, plain.out)
    for key in ("dram_bytes_read", "dram_insn_bytes", "dram_bytes_written"):
        assert hd.extra[key] == plain.extra[key] == py.extra[key], key
    assert plain.cycles == plain.predicted_cycles
    assert hd.cycles > plain.cycles and py.cycles > plain.cycles
    # every channel stalled: each port's handshakes are the same count, reached later
    assert [p["handshakes"] for p in hd.extra["axi"]] == \
        [p["handshakes"] for p in plain.extra["axi"]]


# A master that breaks one rule after another (cycle t after reset): AR across 4 KB (t 10),
# AR of the wrong size (11) and burst type (12); a W offered before its AW, its data changed
# (21) and its VALID dropped (22) while READY was low; a WLAST on the first of two beats (31);
# two bytes written outside the allowed region (35, 36); a burst of four beats with one sent
# (40, 41: write-open); an instruction AR of type FIXED (50).
SCRIPT = """
  logic [7:0] t;
  always @(posedge clk) if (rst) t <= 0; else if (t != 8'hff) t <= t + 1;
  assign m_axi_arvalid = t == 10 || t == 11 || t == 12;
  assign m_axi_araddr = t == 10 ? 48'hffc : 48'h0;
  assign m_axi_arlen = t == 10 ? 8'd1 : 8'd0;
  assign m_axi_arsize = t == 11 ? 3'd0 : 3'd2;
  assign m_axi_arburst = t == 12 ? 2'd2 : 2'd1;
  assign m_axi_rready = 1'b1;
  assign m_axi_awvalid = t == 30 || t == 35 || t == 40;
  assign m_axi_awaddr = t == 30 ? 48'h100 : t == 35 ? 48'h400 : 48'h200;
  assign m_axi_awlen = t == 30 ? 8'd1 : t == 35 ? 8'd0 : 8'd3;
  assign m_axi_awsize = 3'd2;
  assign m_axi_awburst = 2'd1;
  assign m_axi_wvalid = t == 20 || t == 21 || t == 31 || t == 32 || t == 36 || t == 41;
  assign m_axi_wdata = t == 21 ? 32'h1 : 32'h0;
  assign m_axi_wstrb = t == 36 ? 4'h3 : 4'hf;
  assign m_axi_wlast = t == 31 || t == 32 || t == 36;
  assign m_axi_bready = 1'b1;
  assign m_axi_insn_arvalid = t == 50;
  assign m_axi_insn_araddr = 48'h0;
  assign m_axi_insn_arlen = 8'd0;
  assign m_axi_insn_arsize = 3'd2;
  assign m_axi_insn_arburst = 2'd0;
  assign m_axi_insn_rready = 1'b1;
  assign s_axil_arready = 1'b0;  assign s_axil_awready = 1'b0;  assign s_axil_wready = 1'b0;
  assign s_axil_rvalid = 1'b0;   assign s_axil_bvalid = 1'b0;
  assign s_axil_rdata = 32'h0;   assign s_axil_rresp = 2'd0;  assign s_axil_bresp = 2'd0;
  assign irq = 1'b0;
"""


def _scripted_top(real_top: str) -> str:
    decl = [f"  {fast_dram.declare(d, w, n)};" for d, w, n in fast_dram.ports(real_top)]
    names = ", ".join(n for _, _, n in fast_dram.ports(real_top))
    return f"module {TOP}({names});\n" + "\n".join(decl) + SCRIPT + "endmodule\n"


def test_the_checkers_catch_each_rule(tmp_path):
    from cocotb_tools.runner import get_runner

    from attenio.hw.build import to_verilog
    from attenio.hw.top import AttenIOTop

    real = to_verilog(AttenIOTop(TINY), TOP, sv=True)
    bad = _scripted_top(real)
    text = bad + "\n" + fast_dram.wrapper(bad, TINY.axi_data_bytes, 1 << 16)
    bdir = build_verilog(text, fast_dram.TOP, log=lambda *a: None)
    out = tmp_path / "checkers.json"
    env = {"ATTENIO_CHECKER_OUT": str(out), "COCOTB_LOG_LEVEL": "WARNING",
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    get_runner("verilator").test(hdl_toplevel=fast_dram.TOP, hdl_toplevel_lang="verilog",
                                 test_module="tests.cocotb.checker_bench", build_dir=bdir,
                                 test_dir=tmp_path, extra_env=env)
    got = json.loads(out.read_text())
    by_name = {v: k for k, v in fast_dram.RULES.items()}
    want_data = {"burst-4k", "burst-size", "burst-type", "payload-stable", "valid-held",
                 "wlast"}
    assert {r for r, bit in by_name.items() if got["rules"] >> bit & 1} == want_data
    assert got["viol_0"] == len(want_data)
    assert got["rules"] >> 8 & 0xFF == 1 << by_name["burst-type"] and got["viol_1"] == 1
    assert got["viol_2"] == 0 and got["write_open"] == 1
    assert got["first_0"] & 0xFF == by_name["burst-4k"]            # the first, at t = 10
    assert got["wr_bytes"] == 16 and got["stray_bytes"] == 2
