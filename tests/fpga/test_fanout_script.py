"""scripts/fanout.py on a netlist small enough to count by hand: a reset net into two
flip-flops' LSR and a LUT input, named by the units of the flip-flops' outputs."""

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fanout.py"


def _script():
    spec = importlib.util.spec_from_file_location("fanout_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _ff(d, lsr, q):
    return {"type": "TRELLIS_FF", "port_directions": {"DI": "input", "LSR": "input",
                                                       "CLK": "input", "Q": "output"},
            "connections": {"DI": [d], "LSR": [lsr], "CLK": [2], "Q": [q]}}


NETLIST = {"modules": {"top": {
    "attributes": {"top": "00000000000000000000000000000001"},
    "netnames": {"clk": {"bits": [2]}, "rst_q": {"bits": [3]},
                 "engine.core.seq.a": {"bits": [10]}, "engine.load.b": {"bits": [11]},
                 "$auto$x": {"bits": [3], "hide_name": 1}, "d": {"bits": [4, 5]},
                 "y": {"bits": [12]}},
    "cells": {
        "f1": _ff(4, 3, 10), "f2": _ff(5, 3, 11),
        "l1": {"type": "LUT4", "port_directions": {"A": "input", "B": "input", "Z": "output"},
               "connections": {"A": [3], "B": [10], "Z": [12]}},
    }}}}


def test_counts_loads_by_pin_and_unit(tmp_path, capsys):
    fan = _script()
    rows = fan.fanout(NETLIST, 2, None, 2)
    by_net = {r["net"]: r for r in rows}
    assert set(by_net) == {"clk", "rst_q"}
    assert by_net["rst_q"]["loads"] == 3
    assert by_net["rst_q"]["by_pin"] == {"FF.LSR": 2, "LUT4.A": 1}
    assert by_net["rst_q"]["ff_by_unit"] == {"engine.core": 1, "engine.load": 1}
    assert [r["net"] for r in fan.fanout(NETLIST, 2, "LSR", 2)] == ["rst_q"]
    path = tmp_path / "n.json"
    path.write_text(json.dumps(NETLIST))
    assert fan.main([str(path), "--min", "3", "--by-unit"]) == 0
    out = capsys.readouterr().out
    assert "rst_q" in out and "FF.LSR 2" in out and "clk" not in out
    assert fan.main([str(tmp_path / "missing.json")]) == 2
