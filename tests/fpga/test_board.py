"""The board self-test (fpga/board.py): the accelerator runs from a ROM and checks its own O.

The fast tests simulate ``SelfTest`` in Amaranth's simulator (the same design the bitstream
holds); the slow test builds the ULX3S-85F bitstream with the yowasp tools.
"""

import pytest
from amaranth.sim import Simulator

from attenio.base import config as C
from attenio.fpga import board


def _run(dut, limit=5000):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    seen = {}

    async def bench(ctx):
        for _ in range(limit):
            await ctx.tick()
            leds = ctx.get(dut.leds)
            if leds & (board.LED_PASS | board.LED_FAIL):
                seen.update(leds=leds, cycles=ctx.get(dut.cycles))
                return
        seen.update(leds=ctx.get(dut.leds), cycles=None)

    sim.add_testbench(bench)
    sim.run()
    return seen


@pytest.mark.parametrize("n,d", [(16, 8), (5, 12)])
def test_selftest_passes_on_the_golden_output(n, d):
    wl = C.Workload(seq_q=n, seq_k=n, head_dim=d)
    dut = board.SelfTest(C.tiny(), wl)
    seen = _run(dut)
    assert seen["leds"] == board.LED_PASS, seen
    # the run took about as long as the schedule says (its DRAM is slower than the ROM)
    assert 0 < seen["cycles"] <= dut.data["predicted_cycles"]


def test_selftest_fails_on_a_wrong_expected_word():
    wl = C.Workload(seq_q=16, seq_k=16, head_dim=8)
    seen = _run(board.SelfTest(C.tiny(), wl, corrupt=True))
    assert seen["leds"] & board.LED_FAIL and seen["leds"] & board.LED_MISMATCH, seen
    assert not seen["leds"] & board.LED_PASS


def test_bad_board_and_too_large_workload_are_refused(tmp_path):
    wl = C.Workload(seq_q=16, seq_k=16, head_dim=8)
    with pytest.raises(C.ConfigError, match=r"board='de10' is invalid: choose one of"):
        board.build_board(C.tiny(), wl, board="de10", out=tmp_path)
    big = C.Workload(seq_q=2048, seq_k=2048, head_dim=64)
    with pytest.raises(C.ConfigError, match=r"workload=.* is invalid: at most 65536 bytes"):
        board.SelfTest(C.tiny(), big)


@pytest.mark.slow
def test_build_ulx3s_bitstream(tmp_path):
    """Synthesis, place and route and ecppack of the self-test (tens of minutes)."""
    wl = C.Workload(seq_q=16, seq_k=16, head_dim=8)
    r = board.build_board(C.tiny(), wl, out=tmp_path, log=lambda *a: None)
    assert r["bytes"] > 100_000
    assert r["fmax_mhz"] and r["fmax_mhz"] > 0


def test_pll_dividers():
    p = board.ecp5_pll(25, 12.5)  # the board default; yowasp-ecppll picks the same
    assert (p["CLKI_DIV"], p["CLKFB_DIV"], p["CLKOP_DIV"], p["f_out"]) == (2, 1, 48, 12.5)
    for f in (12.5, 33.3, 100.0):
        p = board.ecp5_pll(25, f)
        assert 400 <= p["f_vco"] <= 800 and abs(p["f_out"] - f) / f < 0.01
        assert 3.125 <= 25 / p["CLKI_DIV"] <= 400


def _fake_build(monkeypatch) -> dict:
    """Replace the board build with a fake that records its keyword arguments (returned)."""
    seen = {}

    def fake(hw, wl, **kw):
        seen.update(kw)
        return {"bitstream": "x.bit", "bytes": 1, "fmax_mhz": 30.0, "clock_mhz": 25.0,
                "seconds": 1.0, "log": "x.tim"}

    monkeypatch.setattr(board, "build_board", fake)
    return seen


def test_board_cli_passes_nextpnr_options(monkeypatch):
    """``attenio board --nextpnr-opt`` (repeatable) reaches the build, after the project's
    own nextpnr options (a seed picks another placement of the same netlist)."""
    from click.testing import CliRunner

    from attenio.app.cli import main
    from attenio.fpga.synth import nextpnr_opts

    seen = _fake_build(monkeypatch)
    res = CliRunner().invoke(main, ["board", "--nextpnr-opt=--seed=3",
                                    "--nextpnr-opt=--router2-heatmap=heat"])
    assert res.exit_code == 0, res.output
    assert tuple(seen["nextpnr_extra"]) == ("--seed=3", "--router2-heatmap=heat")
    opts = nextpnr_opts("router1", seen["nextpnr_extra"])
    assert opts[-2:] == ["--seed=3", "--router2-heatmap=heat"] and "router1" in opts


def test_placer_is_chosen_once(monkeypatch):
    """``--placer static`` replaces the project's heap placer in nextpnr's options (nextpnr
    refuses ``--placer`` given twice, before it opens its log); a placer among the extra
    options, or an unknown one, is refused by name."""
    from click.testing import CliRunner

    from attenio.app.cli import main
    from attenio.base.errors import ConfigError
    from attenio.fpga.synth import nextpnr_opts

    opts = nextpnr_opts("router2", ["--seed=5"], "static")
    assert opts.count("--placer") == 1 and opts[opts.index("--placer") + 1] == "static"
    assert "heap" not in opts and opts[-1] == "--seed=5"
    assert nextpnr_opts()[nextpnr_opts().index("--placer") + 1] == "heap"
    for extra in (["--placer=static"], ["--placer", "sa"], ["--router=router1"]):
        with pytest.raises(ConfigError, match="extra option"):
            nextpnr_opts("router2", extra)
    with pytest.raises(ConfigError, match="placer='annealing'"):
        nextpnr_opts(placer="annealing")

    seen = _fake_build(monkeypatch)
    res = CliRunner().invoke(main, ["board", "--placer", "heap"])
    assert res.exit_code == 0, res.output
    assert seen["placer"] == "heap"
    res = CliRunner().invoke(main, ["board"])        # the board's default: static
    assert res.exit_code == 0 and seen["placer"] == "static", res.output
    res = CliRunner().invoke(main, ["board", "--placer", "annealing"])
    assert res.exit_code == 2 and "annealing" in res.output
