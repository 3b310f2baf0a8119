"""attenio explore: sweep parsing, infeasible points, resume, worker death, the Pareto front,
the cost models, and the same sweep on a local Dask cluster."""

import json
import os

import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.sim import cost
from attenio.sim import explore as E


def test_parse_values_lists_ranges_and_errors():
    assert E.parse_values("sram_kb", "64:256:64") == [64, 128, 192, 256]
    assert E.parse_values("mac_lines", "32, 64") == [32, 64]
    assert E.parse_values("clock_mhz", "500,1000") == [500.0, 1000.0]
    assert E.parse_values("causal", "both") == [False, True]
    for field, text, match in (("sram_kb", "256:64:64", "inverted range"),
                               ("sram_kb", "", "empty"), ("sram_kb", "64:128:0", "positive"),
                               ("mac_line", "8", "sweepable fields"),
                               ("d", "sixty", "numbers"), ("causal", "maybe", "true, false")):
        with pytest.raises(ConfigError, match=match):
            E.parse_values(field, text)


def test_grid_and_infeasible_points_are_recorded():
    pts = E.grid("tiny", {"tile_rows": [8, 64]}, {"n": [64], "d": [16, 100]})
    assert len(pts) == 4
    rows = E.run_sweep(pts, workers=1)
    by = {(r["hw.tile_rows"], r["wl.d"]): r for r in rows}
    assert by[(64, 16)]["feasible"] and by[(8, 16)]["feasible"]
    assert not by[(64, 100)]["feasible"] and "head_dim=100" in by[(64, 100)]["reason"]
    assert by[(64, 16)]["cycles"] > 0 and by[(64, 16)]["area_mm2"] > 0


def test_resume_skips_finished_points_and_tolerates_a_cut_line(tmp_path):
    res = tmp_path / "r.jsonl"
    pts = E.grid("tiny", {"tile_rows": [16, 32, 64]}, {"n": [64], "d": [16]})
    first = E.run_sweep(pts[:2], workers=1, results=str(res))
    # a finished point marked so a recomputation would show; a cut line at the end
    lines = res.read_text().splitlines()
    marked = json.loads(lines[0])
    marked["cycles"] = -1
    res.write_text(json.dumps(marked) + "\n" + lines[1] + "\n" + lines[1][:20])
    rows = E.run_sweep(pts, workers=1, results=str(res))
    assert rows[0]["cycles"] == -1            # taken from the file, not recomputed
    assert rows[1] == first[1] and rows[2]["feasible"]
    assert len(res.read_text().splitlines()) == 4


def _dies_on_32(chunk, vs_fa2):
    if any(p["hw"].get("tile_rows") == 32 for p in chunk):
        os._exit(3)
    return [E.evaluate(p, vs_fa2) for p in chunk]


def test_a_dying_worker_loses_only_its_points(monkeypatch):
    monkeypatch.setattr(E, "_eval_many", _dies_on_32)
    pts = E.grid("tiny", {"tile_rows": [16, 32, 64]}, {"n": [64], "d": [16]})
    rows = E.run_sweep(pts, workers=2, chunk=1)
    assert [r["feasible"] for r in rows] == [True, False, True]
    assert "worker died" in rows[1]["reason"]


def test_pareto_front():
    wl = {"n": 1, "d": 1}
    rows = [{"key": json.dumps({"base": "b", "hw": {"x": i}, "wl": wl}), "feasible": True,
             "time_us": c, "area_mm2": a, "energy_uj": e}
            for i, (c, a, e) in enumerate([(1, 5, 5), (5, 1, 5), (5, 5, 1), (6, 6, 6), (1, 5, 6)])]
    front = E.pareto_front(rows)
    assert sorted(json.loads(r["key"])["hw"]["x"] for r in front) == [0, 1, 2]


def test_asic_model_reproduces_table_3_and_scales():
    a = cost.asic_area(C.asplos26())
    assert a["total"] == pytest.approx(3.72)
    assert a["pe"] == pytest.approx(2.44) and a["cache"] == pytest.approx(0.79)
    half = cost.asic_area(C.replace(C.asplos26(), mac_lines=32, exp_lanes=64))
    assert half["pe"] == pytest.approx(1.22) and half["exp"] == pytest.approx(0.24)


def test_bram_model_matches_synthesis_reports():
    # the DP16KD count is structural: it must equal yosys's on the synthesized presets
    assert cost.fpga_area(C.tiny())["DP16KD"] == 32
    # the preset's P buffer in block RAM: 100 synthesized 2026-12-06, 96 with LUT RAM tables
    # (routed 4 × 8, 2026-12-03)
    assert cost.fpga_area(C.fpga())["DP16KD"] == 100
    lut = C.replace(C.fpga(), table_ram="lut")
    assert cost.fpga_area(lut)["DP16KD"] == 96
    eight = C.replace(lut, mac_lines=8, exp_lanes=8)         # the 8 × 8 array's syntheses
    assert cost.fpga_area(eight)["DP16KD"] == 100
    assert cost.fpga_area(C.replace(eight, tile_rows=512))["DP16KD"] == 188
    if cost.SWEEP_FILE.exists():
        for pt in json.loads(cost.SWEEP_FILE.read_text())["points"]:
            hw = C.HardwareConfig.from_dict(pt["hardware"])
            assert cost.fpga_area(hw)["DP16KD"] == pt["report"]["cells"]["DP16KD"], pt["name"]


def test_energy_counts_dram_bytes():
    from attenio.sim.schedule import schedule

    hw = C.asplos26()
    wl = C.Workload.square(4096, 64)
    att, fa2 = schedule(hw, wl, keep_spans=False), schedule(hw, wl, "fa2", keep_spans=False)
    ea, ef = cost.energy(hw, att), cost.energy(hw, fa2)
    assert ef["dram"] / ea["dram"] == pytest.approx(
        (fa2.read_bytes + fa2.write_bytes) / (att.read_bytes + att.write_bytes))
    assert ea["total"] == pytest.approx(sum(v for k, v in ea.items() if k != "total"))


def test_same_sweep_on_a_local_dask_cluster():
    pytest.importorskip("distributed")
    pts = E.grid("tiny", {"tile_rows": [16, 64]}, {"n": [64], "d": [16, 32]})
    local = E.run_sweep(pts, workers=1)
    dask = E.run_sweep(pts, scheduler="local:2", chunk=1)
    strip = ("eval_s",)
    assert [{k: v for k, v in r.items() if k not in strip} for r in dask] == \
        [{k: v for k, v in r.items() if k not in strip} for r in local]


def test_unreachable_scheduler_fails_at_once():
    pytest.importorskip("distributed")
    pts = E.grid("tiny", {}, {"n": [16], "d": [8]})
    with pytest.raises(ConfigError, match="cannot reach"):
        E.run_sweep(pts, scheduler="tcp://127.0.0.1:9")


def test_pareto_front_matches_the_pairwise_definition():
    import random

    rng = random.Random(1)
    rows = [{"key": json.dumps({"base": "b", "hw": {"x": i}, "wl": {"n": i % 2}}),
             "feasible": True, "time_us": rng.randint(1, 9), "area_mm2": rng.randint(1, 9),
             "energy_uj": rng.randint(1, 9)} for i in range(300)]
    axes = ("time_us", "area_mm2", "energy_uj")

    def dominated(r):
        same = [o for o in rows if json.loads(o["key"])["wl"] == json.loads(r["key"])["wl"]]
        return any(all(o[a] <= r[a] for a in axes) and any(o[a] < r[a] for a in axes)
                   for o in same)

    want = sorted(r["key"] for r in rows if not dominated(r))
    assert sorted(r["key"] for r in E.pareto_front(rows)) == want


def test_fpga_price_only_for_configs_the_rtl_builds():
    built, refused = (E.evaluate(p) for p in E.grid("tiny", {"mac_lines": [4, 3]},
                                                    {"n": [64], "d": [16]}))
    assert built["feasible"] and built["rtl"] == "buildable" and built["fpga_lut4"] > 0
    # 3 lines: the model prices it, the RTL cannot build it (not a power of two)
    assert refused["feasible"] and refused["cycles"] > 0
    assert "mac_lines=3" in refused["rtl"] and refused["fpga_lut4"] is None
    assert not refused["fpga_fits"]


def test_parse_sets():
    assert E.parse_sets(["mac_lines=32,64", "sram_kb = 64:192:64"]) == {
        "mac_lines": [32, 64], "sram_kb": [64, 128, 192]}
    for bad, msg in (("mac_lines", "FIELD=VALUES"), ("n=5", "workload field")):
        with pytest.raises(C.ConfigError, match=msg):
            E.parse_sets([bad])


def test_explore_plot_draws_each_workload_and_its_two_axis_front(tmp_path):
    """explore --plot (issue #32): one marker per workload, the ringed points exactly the
    time-area Pareto front of each workload (no point the plot shows as dominated is ringed),
    energy in a unit that fits its size."""
    import json

    from attenio.sim import explore as E

    pts = E.grid("asplos26", {"mac_lines": [16, 32, 64], "sram_kb": [128, 256]},
                 {"n": [4096, 16384], "d": [64]})
    rows = [r for r in E.run_sweep(pts, workers=1) if r["feasible"]]
    drawn = E.plot_front(rows, E.pareto_front(rows), tmp_path / "e.png")
    assert (tmp_path / "e.png").stat().st_size > 10_000
    assert len(drawn["workloads"]) == 2 and drawn["energy_unit"] in ("µJ", "mJ", "J")
    top = max(r["energy_uj"] for r in rows)
    assert drawn["energy_unit"] == ("J" if top >= 1e6 else "mJ" if top >= 1e3 else "µJ")
    ringed = set(drawn["ringed"])
    for r in rows:
        wl = json.loads(r["key"])["wl"]
        same = [o for o in rows if json.loads(o["key"])["wl"] == wl]
        dominated = any(o["time_us"] <= r["time_us"] and o["area_mm2"] <= r["area_mm2"]
                        and (o["time_us"], o["area_mm2"]) != (r["time_us"], r["area_mm2"])
                        for o in same)
        assert (r["key"] in ringed) == (not dominated), E.point_label(r)


def test_sram_bytes_is_sweepable_by_the_configs_own_name():
    """explore takes sram_bytes (the TOML's name) as well as sram_kb, not both (issue #32)."""
    a = E.grid("asplos26", {"sram_bytes": [131072]}, {"n": [4096]})
    b = E.grid("asplos26", {"sram_kb": [128]}, {"n": [4096]})
    ra, rb = E.run_sweep(a, workers=1)[0], E.run_sweep(b, workers=1)[0]
    assert ra["time_us"] == rb["time_us"] and ra["area_mm2"] == rb["area_mm2"]
    with pytest.raises(ConfigError, match="one or the other"):
        E.grid("asplos26", {"sram_bytes": [131072], "sram_kb": [128]}, {})
