"""The cocotb host flow: load DRAM, program the registers, start, wait for done, read back.

Run by :mod:`attenio.verify.runner` with ``ATTENIO_CASE`` naming a JSON case file (the memory
image, register values, DRAM timing, faults to inject); writes ``result.json`` and the output
bytes next to it. Checking against the golden model happens in the runner, outside the
simulator.
"""

from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import (
    ClockCycles,
    FallingEdge,
    First,
    ReadOnly,
    RisingEdge,
    Timer,
    with_timeout,
)

from attenio.contract.registers import pack_fields, python_map
from attenio.verify.axi_monitor import LITE_CHANNELS, AxiMonitor, sample
from attenio.verify.dram import Dram

warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"cocotbext\.axi")
PERIOD_NS = 10
# the run's 64-bit counters the host reads back (docs/registers.md)
COUNTERS = ("CYCLES", "PE_BUSY", "PE_WAIT_KV", "PE_WAIT_EXP", "EXP_BUSY", "FIN_BUSY",
            "DMA_RD_BUSY", "DMA_WR_BUSY", "BYTES_RD", "BYTES_WR")


class DirectLite:
    """An AXI4-Lite master that wakes only while it has a transfer: it drives at the falling
    edge and samples handshakes before the rising one, one transfer at a time. cocotbext's
    master keeps value-change callbacks on every channel for the whole run, which costs the
    fast path a third of its speed (measured, scripts/bench_sim.py)."""

    def __init__(self, dut):
        self.dut = dut
        self.fe, self.ro = FallingEdge(dut.clk), ReadOnly()

    def _set(self, **values):
        for name, value in values.items():
            getattr(self.dut, f"s_axil_{name}").value = value

    async def _until(self, *handshakes):
        """Hold the named channels' VALIDs (or READYs) until each has handshaken; return
        the cycle's values of the last handshake's signals."""
        d, pending = self.dut, set(handshakes)
        seen = {}
        while pending:
            await self.ro
            done = [c for c in pending if int(getattr(d, f"s_axil_{c}valid").value)
                    and int(getattr(d, f"s_axil_{c}ready").value)]
            if "r" in done:
                seen = {"rdata": int(d.s_axil_rdata.value), "rresp": int(d.s_axil_rresp.value)}
            if "b" in done:
                seen = {"bresp": int(d.s_axil_bresp.value)}
            await self.fe
            for c in done:
                pending.discard(c)
                self._set(**{f"{c}{'ready' if c in 'rb' else 'valid'}": 0})
        return seen

    async def write_dword(self, addr, value):
        await self.fe
        self._set(awaddr=addr, awvalid=1, wdata=value, wstrb=0xF, wvalid=1)
        await self._until("aw", "w")
        self._set(bready=1)
        await self._until("b")

    async def read_dword(self, addr):
        await self.fe
        self._set(araddr=addr, arvalid=1)
        await self._until("ar")
        self._set(rready=1)
        return (await self._until("r"))["rdata"]


class Host:
    def __init__(self, dut, regs, direct: bool = False):
        self.dut = dut
        self.regs = regs
        if direct:
            self.axil = DirectLite(dut)
        else:
            from cocotbext.axi import AxiLiteBus, AxiLiteMaster

            self.axil = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axil"), dut.clk, dut.rst)

    async def write(self, name, value):
        await self.axil.write_dword(self.regs[name]["offset"], value & 0xFFFFFFFF)

    async def read(self, name):
        return await self.axil.read_dword(self.regs[name]["offset"])

    async def read64(self, name):
        lo = await self.read(f"{name}_LO")
        hi = await self.read(f"{name}_HI")
        return lo | hi << 32

    async def setup(self, case):
        for name, value in setup_writes(case, self.regs):
            await self.write(name, value)

    async def write_fields(self, name, **fields):
        await self.write(name, pack_fields(self.regs[name], **fields))

    async def start(self):
        await self.write_fields("CTRL", START=1)


def setup_writes(case: dict, regs: dict) -> list[tuple[str, int]]:
    """The register writes that set a run up (program, read, write and K/V windows, interrupt on
    done), in order: the host flow here and the plain C++ loop of scripts/bench_sim.py."""
    writes = [("PROG_BASE_LO", case["prog_base"] & 0xFFFFFFFF),
              ("PROG_BASE_HI", case["prog_base"] >> 32), ("PROG_LEN", case["prog_len"])]
    for reg, key in (("WIN", "window"), ("WWIN", "write_window"), ("KVWIN", "kv_window")):
        base, size = case.get(key) or (0, 0)
        writes += [(f"{reg}_BASE_LO", base & 0xFFFFFFFF), (f"{reg}_BASE_HI", base >> 32),
                   (f"{reg}_SIZE_LO", size & 0xFFFFFFFF), (f"{reg}_SIZE_HI", size >> 32)]
    writes.append(("IRQ_ENABLE", pack_fields(regs["IRQ_ENABLE"], DONE=1)))
    return writes


def _idle_register_port(dut):
    """Drive the register port's inputs to 0 until a master drives them: an X there would
    reach registers on the Icarus model, whose multiplexers (unlike an `if`) pass X on."""
    for s in ("awvalid", "awaddr", "wvalid", "wdata", "wstrb", "bready", "arvalid", "araddr",
              "rready"):
        getattr(dut, f"s_axil_{s}").value = 0


async def _read_counters(host, result: dict) -> None:
    """The run's counters, the interrupt status, then the interrupt cleared, into ``result``."""
    for name in COUNTERS:
        result[name.lower()] = await host.read64(name)
    result["irq_status"] = await host.read("IRQ_STATUS")
    await host.write_fields("IRQ_STATUS", DONE=1)
    result["irq_after_clear"] = int(host.dut.irq.value)


async def _reset(dut, cycles=4):
    dut.rst.value = 1
    await ClockCycles(dut.clk, cycles)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


async def _progress(path: Path, expect: int, c0: int):
    """Write the simulated cycle count to ``path`` every 1/100 of the expected run (the CLI
    draws its progress bar from it)."""
    while True:
        await Timer(max(1, expect // 100) * PERIOD_NS, unit="ns")
        cyc = int(cocotb.utils.get_sim_time("ns") // PERIOD_NS) - c0
        path.write_text(f"{cyc} {expect}\n")


async def _lite_monitor(dut, mon: AxiMonitor):
    """Feed the register port's monitor every cycle one of its VALIDs is high."""
    names = [n for c in LITE_CHANNELS
             for n in (LITE_CHANNELS[c][0], LITE_CHANNELS[c][1], *LITE_CHANNELS[c][2])]
    sigs = [(n, getattr(dut, f"s_axil_{n}")) for n in names]
    valids = [getattr(dut, f"s_axil_{LITE_CHANNELS[c][0]}") for c in LITE_CHANNELS]
    fe, ro = FallingEdge(dut.clk), ReadOnly()
    active = False
    while True:
        if not active:
            await First(*[RisingEdge(v) for v in valids])
        await fe
        await ro
        values = sample(sigs)
        if int(dut.rst.value) == 1:
            mon.reset()
        else:
            mon.step(int(cocotb.utils.get_sim_time("ns") // PERIOD_NS), values)
        active = any(values[LITE_CHANNELS[c][0]] for c in LITE_CHANNELS)


@cocotb.test()
async def run_case(dut):
    case = json.loads(Path(os.environ["ATTENIO_CASE"]).read_text())
    if case.get("fast"):
        await _run_fast(dut, case)
        return
    out_dir = Path(case["out_dir"])
    Clock(dut.clk, PERIOD_NS, unit="ns").start()
    dram = Dram(dut, case["mem_size"], latency=case["latency"], rate=case["rate"],
                axi_bytes=case["axi_bytes"], period_ns=PERIOD_NS, p_stall=case["p_stall"],
                seed=case["seed"], errors=[tuple(e) for e in case.get("errors", [])])
    dram.allowed = (case["o_addr"], case["o_addr"] + case["o_region"])
    image = Path(case["image"]).read_bytes()
    dram.write(0, image)
    for s in ("m_axi_arready", "m_axi_rvalid", "m_axi_awready", "m_axi_wready",
              "m_axi_bvalid", "m_axi_insn_arready", "m_axi_insn_rvalid"):
        getattr(dut, s).value = 0
    for s in ("m_axi_rdata", "m_axi_rresp", "m_axi_rlast", "m_axi_bresp", "m_axi_insn_rdata",
              "m_axi_insn_rresp", "m_axi_insn_rlast"):
        getattr(dut, s).value = 0
    _idle_register_port(dut)
    await _reset(dut)
    cocotb.start_soon(dram.run())
    lite = AxiMonitor("s_axil", 4, lite=True)
    cocotb.start_soon(_lite_monitor(dut, lite))
    host = Host(dut, python_map_for(case))
    await host.setup(case)
    t0 = time.perf_counter()
    c0 = dram.cycle()
    if case.get("trace"):
        dram.log = []
    if case.get("progress"):
        cocotb.start_soon(_progress(out_dir / "progress", case.get("expect_cycles") or 100_000,
                                    c0))
    result = {"events": []}
    await host.start()
    if case.get("start_twice"):
        await host.start()
        result["status_after_second_start"] = await host.read("STATUS")
    if case.get("reset_at"):
        # reset in the middle of the run: everything returns to idle; then run again
        await ClockCycles(dut.clk, case["reset_at"])
        result["events"].append(["reset", dram.cycle() - c0])
        await _reset(dut)
        dram.reset()
        dram.write(case["o_addr"], bytes(case["o_bytes"]))
        result["status_after_reset"] = await host.read("STATUS")
        await host.setup(case)
        c0 = dram.cycle()
        await host.start()
    if case.get("abort_at"):
        await ClockCycles(dut.clk, case["abort_at"])
        await host.write_fields("CTRL", ABORT=1)
    limit = case["max_cycles"] * PERIOD_NS
    timed_out = await _wait_done(dut, limit)
    wall = time.perf_counter() - t0
    sim_cycles = dram.cycle() - c0
    result.update({"timed_out": timed_out, "wall_s": wall, "sim_cycles": sim_cycles,
                   "status": await host.read("STATUS")})
    await _read_counters(host, result)
    result["dram_bytes_read"] = dram.rd.bytes
    result["dram_insn_bytes"] = dram.insn.bytes
    result["dram_bytes_written"] = dram.bytes_written
    result["dram_stray_bytes"] = dram.stray_bytes
    result["dram_awake_cycles"] = dram.steps
    (out_dir / "o.bin").write_bytes(dram.read(case["o_addr"], case["o_bytes"]))
    if case.get("rerun"):
        result["rerun"] = await _rerun(dut, dram, host, case, limit)
    monitors = [mon for mon, _ in dram.monitors]
    monitors[0].finish(dram.cycle())
    result["axi"] = [mon.report() for mon in monitors + [lite]]
    if dram.log is not None:
        result["trace"] = [(k - c0, *rest) for k, *rest in dram.log]
    dram.halted = True
    (out_dir / "result.json").write_text(json.dumps(result))


async def _wait_done(dut, limit_ns) -> bool:
    """Wait for the interrupt (the run's end); True if it did not come within the limit."""
    if int(dut.irq.value):
        return False
    try:
        await with_timeout(RisingEdge(dut.irq), limit_ns, "ns")
    except cocotb.triggers.SimTimeoutError:
        return True
    return False


async def _rerun(dut, dram, host, case, limit) -> dict:
    """After the run (a fault case), the clean program on clean inputs with no faults: the
    accelerator must have recovered. Writes ``o_rerun.bin``."""
    rr = case["rerun"]
    dram.errors = []
    dram.write(0, Path(rr["image"]).read_bytes())
    dram.write(case["o_addr"], bytes(case["o_bytes"]))
    await host.setup({**case, "prog_base": rr["prog_base"], "prog_len": rr["prog_len"]})
    c0 = dram.cycle()
    await host.start()
    timed_out = await _wait_done(dut, limit)
    out = {"timed_out": timed_out, "status": await host.read("STATUS"),
           "cycles": await host.read64("CYCLES"), "sim_cycles": dram.cycle() - c0}
    await host.write_fields("IRQ_STATUS", DONE=1)
    (Path(case["out_dir"]) / "o_rerun.bin").write_bytes(dram.read(case["o_addr"], case["o_bytes"]))
    return out


def python_map_for(case):
    from attenio.base import config as C

    return python_map(C.HardwareConfig.from_dict(case["hw"]))


async def _run_fast(dut, case):
    """The fast path (verify/fast_dram.sv): the DRAM and the protocol checkers are in the
    simulated design and the clock is the simulator's, so Python wakes only to program the
    registers, to report progress and at the end. The image was loaded by ``$readmemh``;
    the output region is written out by ``$writememh`` and returned as ``o.bin``."""
    from attenio.verify import fast_dram

    out_dir = Path(case["out_dir"])
    ab = case["axi_bytes"]
    for name, value in {**fast_dram.dram_inputs(case), "dump": 0, "dump_lo": 0,
                        "dump_hi": 0}.items():
        getattr(dut, f"fd_{name}").value = value
    _idle_register_port(dut)
    await _reset(dut)
    host = Host(dut, python_map_for(case), direct=True)   # the register port checked in HDL
    await host.setup(case)
    t0 = time.perf_counter()
    c0 = int(dut.fd_cycle.value)
    if case.get("progress"):
        cocotb.start_soon(_progress(out_dir / "progress", case.get("expect_cycles") or 100_000,
                                    int(cocotb.utils.get_sim_time("ns") // PERIOD_NS)))
    await host.start()
    timed_out = await _wait_done(dut, case["max_cycles"] * PERIOD_NS)
    wall = time.perf_counter() - t0
    result = {"events": [], "timed_out": timed_out, "wall_s": wall,
              "sim_cycles": int(dut.fd_cycle.value) - c0, "status": await host.read("STATUS")}
    await _read_counters(host, result)
    for key, port in (("dram_bytes_read", "rd_bytes"), ("dram_insn_bytes", "insn_bytes"),
                      ("dram_bytes_written", "wr_bytes"), ("dram_stray_bytes", "stray_bytes"),
                      ("dram_unsupported", "unsupported")):
        result[key] = int(getattr(dut, f"fd_{port}").value)
    lo, n = case["o_addr"] // ab, -(-(case["o_addr"] % ab + case["o_bytes"]) // ab)
    dut.fd_dump_lo.value = lo
    dut.fd_dump_hi.value = lo + max(n, 1) - 1
    dut.fd_dump.value = 1
    await RisingEdge(dut.clk)
    dut.fd_dump.value = 0
    await RisingEdge(dut.clk)
    words = fast_dram.read_words(out_dir / "o.hex", ab)
    skip = case["o_addr"] % ab
    (out_dir / "o.bin").write_bytes(words[skip:skip + case["o_bytes"]])
    hs0, hs1 = int(dut.fd_handshakes_0.value), int(dut.fd_handshakes_1.value)
    reports = []
    hs2 = int(dut.fd_handshakes_2.value)
    for i, (port, chans, hs) in enumerate((("m_axi", "ar r aw w b", hs0),
                                           ("m_axi_insn", "ar r", hs1),
                                           ("s_axil", "ar r aw w b", hs2))):
        count = int(getattr(dut, f"fd_viol_{i}").value)
        first = [fast_dram.violation(port, count, int(getattr(dut, f"fd_first_{i}").value))]
        if i == 0 and int(dut.fd_write_open.value):
            count += 1
            first.append(f"cycle {int(dut.fd_cycle.value)}: {port}: write-open: a write "
                         "burst not completed")
        reports.append({"port": port, "violations": count, "cycles": result["sim_cycles"],
                        "handshakes": {c: hs >> 32 * j & 0xFFFF_FFFF
                                       for j, c in enumerate(chans.split())},
                        "first": [f for f in first if f]})
    result["axi"] = reports
    (out_dir / "result.json").write_text(json.dumps(result))
