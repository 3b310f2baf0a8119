#!/usr/bin/env python3
"""The widest nets of a synthesized netlist, by pin: what drives many flip-flops' resets (LSR)
and enables (CE), or many LUT inputs, and which units those loads belong to.

Reads the JSON netlist yosys writes for nextpnr (``attenio_top.json`` in a route's synthesis
directory, scripts/route_fpga.py) and prints, widest first, each net over ``--min`` loads: its
name, its loads by pin (``FF.LSR``, ``FF.CE``, ``LUT4.A``, ...) and, with ``--by-unit``, its
flip-flop loads by the unit their output net's name starts with (``engine.core.sequencer``).

    python scripts/fanout.py build/route-x/synth/fpga-ecp5-85k/attenio_top.json --min 300
    python scripts/fanout.py NETLIST --pin LSR --by-unit --json out.json

This measures issue #47's "fan-out by design" on the netlist itself, before any route."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path


def _top(netlist: dict) -> dict:
    mods = netlist.get("modules", {})
    for mod in mods.values():
        top = str(mod.get("attributes", {}).get("top", "0"))
        if top.strip("0") == "1":        # yosys writes attributes as binary strings
            return mod
    if len(mods) == 1:
        return next(iter(mods.values()))
    raise SystemExit(f"error: no top module among {len(mods)} modules (attribute 'top')")


def _bit_names(mod: dict) -> dict[int, str]:
    """A name for each bit: the shortest visible net name holding it (hidden ones last)."""
    best: dict[int, tuple] = {}
    for name, net in mod.get("netnames", {}).items():
        hidden = bool(net.get("hide_name", 0))
        for i, b in enumerate(net.get("bits", [])):
            if not isinstance(b, int):
                continue
            label = name if len(net["bits"]) == 1 else f"{name}[{i}]"
            key = (hidden, len(label), label)
            if b not in best or key < best[b]:
                best[b] = key
    return {b: k[2] for b, k in best.items()}


def _unit(name: str, depth: int) -> str:
    parts = name.split("[")[0].split(".")
    return ".".join(parts[:depth]) if len(parts) > 1 else "(top)"


def fanout(netlist: dict, min_loads: int, pin: str | None, depth: int) -> list[dict]:
    """The nets with at least ``min_loads`` input pins (of kind ``pin`` where given), widest
    first: name, loads, loads by cell type and pin, flip-flop loads by unit."""
    mod = _top(netlist)
    names = _bit_names(mod)
    loads: dict[int, Counter] = defaultdict(Counter)
    units: dict[int, Counter] = defaultdict(Counter)
    for cell in mod.get("cells", {}).values():
        dirs = cell.get("port_directions", {})
        conns = cell.get("connections", {})
        out_bits = conns.get("Q") or conns.get("Z") or conns.get("DO") or []
        owner = names.get(out_bits[0], "?") if out_bits and isinstance(out_bits[0], int) else "?"
        for port, bits in conns.items():
            if dirs.get(port) != "input":
                continue
            tag = "FF" if cell["type"] == "TRELLIS_FF" else cell["type"]
            for b in bits:
                if not isinstance(b, int):
                    continue
                loads[b][f"{tag}.{port}"] += 1
                if tag == "FF":
                    units[b][(port, _unit(owner, depth))] += 1
    rows = []
    for b, by_pin in loads.items():
        total = sum(n for k, n in by_pin.items() if pin is None or k.endswith("." + pin))
        if total < min_loads:
            continue
        by_unit = Counter()
        for (port, u), n in units[b].items():
            if pin is None or port == pin:
                by_unit[u] += n
        rows.append({"net": names.get(b, f"bit{b}"), "loads": total,
                     "by_pin": dict(by_pin.most_common()),
                     "ff_by_unit": dict(by_unit.most_common())})
    rows.sort(key=lambda r: (-r["loads"], r["net"]))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("netlist", type=Path, help="yosys JSON netlist (attenio_top.json)")
    ap.add_argument("--min", type=int, default=300, help="report nets with at least this many "
                    "loads (default 300)")
    ap.add_argument("--pin", help="count only this pin kind, e.g. LSR, CE, A")
    ap.add_argument("--by-unit", action="store_true", help="flip-flop loads by unit")
    ap.add_argument("--depth", type=int, default=3, help="name components of a unit (default "
                    "3: engine.core.sequencer)")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON")
    a = ap.parse_args(argv)
    if a.min < 1:
        ap.error(f"--min {a.min}: must be at least 1")
    try:
        netlist = json.loads(a.netlist.read_text())
    except (OSError, ValueError) as e:
        print(f"error: {a.netlist}: {e}", file=sys.stderr)
        return 2
    rows = fanout(netlist, a.min, a.pin, a.depth)
    for r in rows:
        pins = ", ".join(f"{k} {n}" for k, n in r["by_pin"].items())
        print(f"{r['loads']:7d}  {r['net']}  ({pins})")
        if a.by_unit:
            for u, n in r["ff_by_unit"].items():
                print(f"{'':9}{n:6d}  {u}")
    if not rows:
        print(f"no net with {a.min} or more loads" + (f" on {a.pin}" if a.pin else ""))
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
