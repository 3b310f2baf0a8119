"""The AXI4-Lite register bank, generated from the register table (contract/registers.py: the
table, its kinds, the C header, the Python map and docs/registers.md).
"""

from __future__ import annotations

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.registers import (  # noqa: F401  (the table's views, re-exported)
    ADDR_BITS,
    MAGIC,
    VERSION,
    c_header,
    markdown,
    python_map,
    registers,
)


def axi4lite_signature(addr_bits: int = ADDR_BITS) -> wiring.Signature:
    """AXI4-Lite, from the manager's side (the bank takes it with ``In``)."""
    return wiring.Signature({
        "awaddr": Out(addr_bits), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(32), "wstrb": Out(4), "wvalid": Out(1), "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(addr_bits), "arvalid": Out(1), "arready": In(1),
        "rdata": In(32), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })


OKAY, SLVERR = 0, 2


class CsrBank(wiring.Component):
    """The register bank on an AXI4-Lite subordinate port.

    Ports besides ``axil``: per ``ro`` register an input (32 bits), per ``rw`` an output, per
    ``pulse`` an output of pulses, per ``w1c`` an input ``<name>_set`` and an output, per 64-bit
    counter an input ``<name>`` (64 bits). Names are lower case.

    A read or write of an unmapped offset answers SLVERR; writes to read-only registers are
    ignored (OKAY). Latency: a write is accepted when both AW and W are valid and answered the
    next cycle; a read is answered the cycle after AR.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        self.regs = registers(cfg)
        ports = {"axil": In(axi4lite_signature())}
        for r in self.regs:
            key = r.name.lower()
            if r.kind == "ro":
                ports[key] = In(32)
            elif r.kind == "rw":
                ports[key] = Out(32)
            elif r.kind == "pulse":
                ports[key] = Out(32)
            elif r.kind == "w1c":
                ports[key] = Out(32)
                ports[f"{key}_set"] = In(32)
            elif r.kind == "ro64" and r.name.endswith("_LO"):
                ports[key[:-3]] = In(64)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        bus = self.axil
        stored = {r.name: getattr(self, r.name.lower()) for r in self.regs
                  if r.kind in ("rw", "w1c")}
        shadows = {r.name: Signal(32, name=f"{r.name.lower()}_shadow") for r in self.regs
                   if r.kind == "ro64" and r.name.endswith("_HI")}
        # pulses are high for one cycle only
        for r in self.regs:
            if r.kind == "pulse":
                m.d.sync += getattr(self, r.name.lower()).eq(0)
            if r.kind == "w1c":
                reg = stored[r.name]
                m.d.sync += reg.eq(reg | getattr(self, f"{r.name.lower()}_set"))

        # write channel
        take_w = Signal()
        m.d.comb += take_w.eq(bus.awvalid & bus.wvalid & ~bus.bvalid)
        m.d.comb += [bus.awready.eq(take_w), bus.wready.eq(take_w)]
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        with m.If(take_w):
            m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(SLVERR)]
            wmask = Signal(32)
            m.d.comb += wmask.eq(sum((bus.wstrb[i].replicate(8) << (8 * i)) for i in range(4)))
            with m.Switch(bus.awaddr[2:]):
                for r in self.regs:
                    with m.Case(r.offset >> 2):
                        m.d.sync += bus.bresp.eq(OKAY)
                        if r.kind == "rw":
                            reg = stored[r.name]
                            m.d.sync += reg.eq((reg & ~wmask) | (bus.wdata & wmask))
                        elif r.kind == "pulse":
                            m.d.sync += getattr(self, r.name.lower()).eq(bus.wdata & wmask)
                        elif r.kind == "w1c":
                            reg = stored[r.name]
                            m.d.sync += reg.eq((reg & ~(bus.wdata & wmask))
                                               | getattr(self, f"{r.name.lower()}_set"))

        # read channel
        m.d.comb += bus.arready.eq(~bus.rvalid)
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [bus.rvalid.eq(1), bus.rresp.eq(SLVERR), bus.rdata.eq(0)]
            with m.Switch(bus.araddr[2:]):
                for r in self.regs:
                    with m.Case(r.offset >> 2):
                        m.d.sync += bus.rresp.eq(OKAY)
                        if r.kind == "const":
                            m.d.sync += bus.rdata.eq(r.value)
                        elif r.kind in ("ro", "rw", "w1c"):
                            m.d.sync += bus.rdata.eq(getattr(self, r.name.lower()))
                        elif r.kind == "ro64" and r.name.endswith("_LO"):
                            wide = getattr(self, r.name.lower()[:-3])
                            m.d.sync += [bus.rdata.eq(wide[:32]),
                                         shadows[r.name[:-3] + "_HI"].eq(wide[32:])]
                        elif r.kind == "ro64":
                            m.d.sync += bus.rdata.eq(shadows[r.name])
        return m
