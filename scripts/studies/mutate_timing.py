"""Timing mutations: every constant of the timing contract (contract/timing.py ``Timing``)
moved by +1 and by −1 in the schedule generator alone, the RTL untouched, and the fast RTL
subset below run against it. A mutation is caught when a test fails (the RTL's cycles, bytes
or PE-busy counters no longer equal the prediction, or a program the generator now emits is
wrong, or its AXI bursts differ); the first failing test is recorded. A mutation the schedule
generator gives the same timeline with (tests/sim/test_equivalent_mutations.py, each with its
reason) is recorded as equivalent and not run; any other that nothing catches is not pinned
by any workload: the report names it.

    python scripts/studies/mutate_timing.py [--only NAME ...] \
        [--json data/verify/timing-mutations.json]

Each mutation is one pytest process (``-x``: it stops at the first failure) with
``ATTENIO_TIMING_MUTATION=name=±1`` and the plugin :mod:`timing_mutation_plugin`
(tests/plugins/), which replaces the ``Timing`` the schedule generator builds. The Verilator
builds are the suite's own cache, so only the first run builds.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from attenio.contract.timing import EQUIVALENT_MUTATIONS as EQUIVALENT
from attenio.contract.timing import Timing

ROOT = Path(__file__).resolve().parents[2]

# The fast RTL subset: each case asserts cycles, bytes and PE busy equal to the prediction
# (SimResult.failures), across shapes that reach every engine: one row and odd lengths, the
# third overlap level over many tiles, GQA and causal packing, varlen, windows, paged caches
# (the block-table walk), several keys per step, scale words, and the fpga preset's wider bus.
SUBSET = [
    "tests/cocotb/test_top.py::test_tiny_matrix[1-8]",
    "tests/cocotb/test_top.py::test_instruction_bound_decode_batch",
    "tests/cocotb/test_top.py::test_dram_slower_than_the_bus_is_cycle_exact",
    "tests/cocotb/test_top.py::test_kv_latency_bound_fpga_decode",
    "tests/cocotb/test_top.py::test_bursts_past_256_beats",
    "tests/cocotb/test_top.py::test_tiny_matrix[64-8]",
    "tests/cocotb/test_top.py::test_tiny_matrix[256-8]",
    "tests/cocotb/test_top.py::test_tiny_shapes",
    "tests/cocotb/test_top.py::test_odd_head_dims",
    "tests/cocotb/test_top.py::test_tiny_varlen",
    "tests/cocotb/test_top.py::test_tiny_window",
    "tests/cocotb/test_top.py::test_tiny_paged",
    "tests/cocotb/test_top.py::test_fpga_preset_varlen_window_and_pages",
    "tests/cocotb/test_beyond.py::test_several_keys_per_step_for_small_tiles",
    "tests/cocotb/test_beyond.py::test_per_key_k_scales_run_bit_exact_and_cost_one_word_a_k_row",
    "tests/cocotb/test_top.py::test_fetch_stops_at_end",
    "tests/cocotb/test_shared_prefix.py::test_shared_prefix_bit_exact_and_cycle_exact",
]


def run_one(name: str | None, delta: int, extra: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tests" / "plugins") + os.pathsep
           + os.environ.get("PYTHONPATH", "")}
    if name:
        env["ATTENIO_TIMING_MUTATION"] = f"{name}={delta:+d}"
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "timing_mutation_plugin",
           "-p", "no:cacheprovider", *SUBSET, *extra]
    t0 = time.perf_counter()
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    failed = [ln.split(" ", 2)[1] for ln in res.stdout.splitlines() if ln.startswith("FAILED ")]
    errs = [ln[1:].strip() for ln in res.stdout.splitlines() if ln.startswith("E ")]
    why = next((e for e in errs if "predict" in e), errs[0] if errs else "")[:200]
    return {"constant": name, "delta": delta, "caught": res.returncode != 0,
            "caught_by": failed[0] if failed else None, "why": why,
            "returncode": res.returncode, "seconds": round(time.perf_counter() - t0, 1),
            "summary": (res.stdout.strip().splitlines() or [""])[-1]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", help="mutate only these constants")
    ap.add_argument("--json", default="data/verify/timing-mutations.json")
    a = ap.parse_args()
    base = Timing()
    names = a.only or [f.name for f in dataclasses.fields(Timing)]
    print("baseline (no mutation) …", flush=True)
    clean = run_one(None, 0, [])
    if clean["caught"]:
        sys.exit(f"the subset fails without a mutation: {clean['summary']}")
    print(f"  passes in {clean['seconds']:.0f} s", flush=True)
    rows = []
    for name in names:
        for delta in (+1, -1):
            value = getattr(base, name) + delta
            if value < 0:
                rows.append({"constant": name, "delta": delta, "caught": None,
                             "why": f"not applicable: {name} would be {value}"})
                print(f"  {name:<20} {delta:+d}  n/a ({value} < 0)", flush=True)
                continue
            if (name, delta) in EQUIVALENT:
                why = EQUIVALENT[name, delta]
                rows.append({"constant": name, "delta": delta, "caught": None,
                             "why": f"equivalent: {why} (tests/sim/test_equivalent_"
                                    "mutations.py)"})
                print(f"  {name:<20} {delta:+d}  equivalent ({why})", flush=True)
                continue
            r = run_one(name, delta, [])
            rows.append(r)
            print(f"  {name:<20} {delta:+d}  {'caught' if r['caught'] else 'MISSED':<7} "
                  f"{r['seconds']:>5.0f} s  {r['caught_by'] or ''}", flush=True)
    out = Path(a.json)
    if a.only and out.exists():
        # a rerun of some constants: the others' rows stay as the file has them
        kept = [r for r in json.loads(out.read_text())["rows"] if r["constant"] not in names]
        rows = kept + rows
    applicable = [r for r in rows if r["caught"] is not None]
    missed = [f"{r['constant']}{r['delta']:+d}" for r in applicable if not r["caught"]]
    equivalent = [f"{r['constant']}{r['delta']:+d}" for r in rows
                  if r["why"].startswith("equivalent")]
    print(f"{len(applicable)} mutations run, {len(applicable) - len(missed)} caught, "
          f"{len(equivalent)} equivalent (not run)"
          + (f"; missed: {', '.join(missed)}" if missed else ""))
    out.parent.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    out.write_text(json.dumps({
        "provenance": {"date": datetime.date.today().isoformat(),
                       "command": "python scripts/studies/mutate_timing.py", "commit": commit,
                       "python": platform.python_version(), "subset": SUBSET,
                       "baseline_seconds": clean["seconds"]},
        "mutations": len(applicable), "caught": len(applicable) - len(missed),
        "missed": missed, "equivalent": equivalent, "rows": rows}, indent=1) + "\n")
    sys.exit(1 if missed else 0)


if __name__ == "__main__":
    main()
