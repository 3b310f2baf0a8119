"""Leave-one-out error of the explore command's FPGA area model (sim/cost.py): fit on all
synthesized configurations but one, predict that one, for each in turn.

    python scripts/studies/fit_fpga_area.py

Points: data/fpga/synth-sweep.json (python scripts/studies/synth_sweep.py).
"""
import json

import numpy as np

from attenio.base import config as C
from attenio.sim import cost

allp = json.loads(cost.SWEEP_FILE.read_text())["points"]
print(len(allp), "points")
for res in ("LUT4", "TRELLIS_FF", "MULT18X18D"):
    errs = []
    for i, p in enumerate(allp):
        coef = cost.fit_fpga([q for j, q in enumerate(allp) if j != i])
        hw = C.HardwareConfig.from_dict(p["hardware"])
        pred = cost.fpga_area(hw, coef, p["report"].get("lut_mapper", "abc9"))[res]
        cells = p["report"]["cells"]
        true = cost.ecp5_lut_sites(cells) if res == "LUT4" else cells[res]
        errs.append((pred - true) / true)
        print(f"  {res:10s} {p['name']:16s} synthesized {true:7.0f} predicted {pred:8.0f} "
              f"error {100 * (pred - true) / true:+6.1f}%")
    print(f"{res}: max |error| {100 * max(abs(e) for e in errs):.1f}%, mean |error| "
          f"{100 * np.mean(np.abs(errs)):.1f}%")
