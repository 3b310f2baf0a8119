"""RTL simulation speed, side by side in one run: the fast path (the DRAM and the AXI4 checkers
in SystemVerilog, verify/fast_dram.sv, under cocotb), the Python-DRAM path (verify/dram.py) and
the plain verilated loop (the fast path's model clocked from C++ with no cocotb), on the same
workloads and images.

    python scripts/bench_sim.py [--cases tiny:64:16 fpga:1024:64 fpga:4096:64]
                                [--python-max-cycles 3000000] [--json FILE]

A case is PRESET:N:D, or CONFIG.toml:N:D for a configuration file (configs/fpga-8x8.toml:1024:64).
The Python-DRAM path is skipped (and says so) above --python-max-cycles
predicted cycles: at ~60k cycles/s it would take minutes. Rates are simulated cycles per
second of wall time from the start register write to the interrupt.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from attenio.base import config as C
from attenio.base.tomlfile import load_toml
from attenio.contract.registers import python_map
from attenio.verify import fast_dram
from attenio.verify.runner import build, simulate


def plain(wd: Path, hw, quiet) -> dict:
    """The same image and register set-up as the fast-path run kept in ``wd``, in the plain
    loop linked against that run's model."""
    case = json.loads((wd / "case.json").read_text())
    (wd / "plain.setup").write_text(fast_dram.plain_setup(case, python_map(hw)))
    exe = fast_dram.plain_loop(build(hw, fast_bytes=case["mem_size"], log=quiet))
    words = -(-case["mem_size"] // case["axi_bytes"])
    out = subprocess.run([str(exe), str(wd / "plain.setup"), f"+attenio_mem={wd / 'image.hex'}",
                          f"+attenio_out={wd / 'o_plain.hex'}", f"+attenio_words={words}"],
                         capture_output=True, text=True, check=True).stdout.split()
    got = dict(zip(out[::2], out[1::2], strict=True))
    cyc, sec = int(got["cycles"]), float(got["seconds"])
    return {"cycles": cyc, "seconds": sec, "rate": cyc / sec, "irq": int(got["irq"])}


def run_case(spec: str, python_max: int, quiet) -> dict:
    preset, n, d = spec.rsplit(":", 2)
    hw = load_toml(preset)[0] if preset.endswith(".toml") else C.preset(preset)
    wl = C.Workload.from_options(hw, n=int(n), d=int(d))
    row = {"case": spec}
    with tempfile.TemporaryDirectory(prefix="attenio-bench-") as tmp:
        wd = Path(tmp)
        t0 = time.perf_counter()
        r = simulate(hw, wl, seed=1, dram="hdl", workdir=wd, check=False, log=quiet)
        row["fast"] = {"cycles": r.cycles, "seconds": r.wall_s, "rate": r.sim_rate,
                       "total_s": time.perf_counter() - t0, "predicted": r.predicted_cycles,
                       "verdict": [f for f in r.failures() if "integer model" not in f]}
        row["plain"] = plain(wd, hw, quiet)
    if r.predicted_cycles <= python_max:
        t0 = time.perf_counter()
        p = simulate(hw, wl, seed=1, dram="python", check=False, log=quiet)
        row["python"] = {"cycles": p.cycles, "seconds": p.wall_s, "rate": p.sim_rate,
                         "total_s": time.perf_counter() - t0}
    else:
        row["python"] = {"skipped": f"{r.predicted_cycles:,} cycles > --python-max-cycles"}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=["tiny:64:16", "fpga:1024:64",
                                                   "fpga:4096:64"])
    ap.add_argument("--python-max-cycles", type=float, default=3e6)
    ap.add_argument("--json", help="write the rows here as JSON")
    a = ap.parse_args()
    rows = []
    print(f"{'case':<28}{'cycles':>12}{'fast c/s':>12}{'plain c/s':>12}{'fast/plain':>11}"
          f"{'python c/s':>12}{'fast run s':>11}", flush=True)
    for spec in a.cases:
        row = run_case(spec, int(a.python_max_cycles), lambda *x: None)
        rows.append(row)
        f, p, py = row["fast"], row["plain"], row["python"]
        pyr = f"{py['rate']:>12,.0f}" if "rate" in py else f"{'skipped':>12}"
        print(f"{spec:<28}{f['cycles']:>12,}{f['rate']:>12,.0f}{p['rate']:>12,.0f}"
              f"{f['rate'] / p['rate']:>11.2f}{pyr}{f['total_s']:>11.1f}", flush=True)
        if f["verdict"]:
            print(f"  fast path verdict: {f['verdict']}", file=sys.stderr)
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "machine": platform.platform(),
                                            "command": " ".join(["python", *sys.argv])},
                                           indent=2) + "\n")


if __name__ == "__main__":
    main()
