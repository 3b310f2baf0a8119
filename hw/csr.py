"""Control and status registers: one table generates the AXI4-Lite register bank, the C header,
the Python register map and docs/registers.md.

The controller and top level (the next hardware issue) connect to the bank's ports; this module
only defines the registers and implements the bus side. Register kinds:

========= ===========================================================================
``const`` read-only, a value of the configuration (ID, version, preset parameters)
``ro``    read-only, driven by the hardware through an input port of the same name
``rw``    read-write, held in the bank, visible to the hardware through an output port
``pulse`` write-only: each 1 written gives a one-cycle pulse on the output port; reads 0
``w1c``   sticky bits set by pulses on ``<name>_set``, cleared by writing 1; output port holds
          them
``ro64``  a 64-bit hardware value read as ``<name>_LO`` then ``<name>_HI``: reading ``_LO``
          snapshots the upper half, so the pair is consistent
========= ===========================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field

from amaranth import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.config import HardwareConfig
from attenio.errors import ConfigError, ErrorCode

MAGIC = 0x4154494F  # "ATIO"
VERSION = (0, 2)   # 0.2: the write window (WWIN_*)
ADDR_BITS = 12


@dataclass(frozen=True)
class Field:
    name: str
    lsb: int
    width: int
    doc: str


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    kind: str
    doc: str
    fields: tuple[Field, ...] = field(default_factory=tuple)
    value: int = 0  # for const registers


COUNTERS = [
    ("CYCLES", "cycles from start to done"),
    ("PE_BUSY", "cycles the PE array issued Q Kᵀ or P V work"),
    ("PE_WAIT_KV", "cycles the PE array waited for a K/V row"),
    ("PE_WAIT_EXP", "cycles the PE array waited for the softmax"),
    ("EXP_BUSY", "cycles the softmax unit took a row group"),
    ("FIN_BUSY", "cycles the finalize unit issued a word"),
    ("DMA_RD_BUSY", "cycles the AXI read data channel moved data"),
    ("DMA_WR_BUSY", "cycles the AXI write data channel moved data"),
    ("BYTES_RD", "bytes read from DRAM (program excluded)"),
    ("BYTES_WR", "bytes written to DRAM"),
]


def registers(cfg: HardwareConfig) -> list[Register]:
    """The register map of an accelerator built from ``cfg`` (byte offsets, 32-bit words)."""
    def const(name, off, doc, parts):
        value = 0
        fields = []
        for fname, lsb, width, v, fdoc in parts:
            if not 0 <= v < 1 << width:
                raise ConfigError(f"{fname.lower()}={v} is invalid: the register {name}.{fname} "
                                  f"holds [0, {(1 << width) - 1}] ({width} bits)")
            value |= v << lsb
            fields.append(Field(fname, lsb, width, fdoc))
        return Register(name, off, "const", doc, tuple(fields), value)

    n = cfg.numerics
    regs = [
        Register("ID", 0x000, "const", "magic number 'ATIO'", value=MAGIC),
        const("VERSION", 0x004, "register map version", [
            ("MINOR", 0, 16, VERSION[1], "minor version"),
            ("MAJOR", 16, 16, VERSION[0], "major version")]),
        const("CFG_ARRAY", 0x008, "PE array and data", [
            ("MAC_LINES", 0, 8, cfg.mac_lines, "MAC lines p"),
            ("MACS_PER_LINE", 8, 8, cfg.macs_per_line, "MACs per line q"),
            ("EXP_LANES", 16, 8, cfg.exp_lanes, "softmax lanes"),
            ("DATA_BITS", 24, 8, cfg.data_bits, "bits of Q, K, V elements")]),
        const("CFG_TILE", 0x00C, "buffers", [
            ("TILE_ROWS", 0, 16, cfg.tile_rows, "Q/O tile capacity in rows"),
            ("MAX_HEAD_DIM", 16, 16, cfg.max_head_dim, "largest head dimension")]),
        const("CFG_RING", 0x010, "K/V ring and bus", [
            ("KV_RING_DEPTH", 0, 16, cfg.kv_ring_depth, "K/V ring rows (K and V)"),
            ("AXI_DATA_BITS", 16, 16, cfg.axi_data_bits, "AXI4 data width")]),
        const("CFG_NUMERICS", 0x014, "numeric formats (docs/numerics.md)", [
            ("OUT_FRAC_BITS", 0, 8, n.out_frac_bits, "output fraction bits"),
            ("LOGIT_FRAC_BITS", 8, 8, n.logit_frac_bits, "logit fraction bits F"),
            ("EXP_FRAC_BITS", 16, 8, n.exp_frac_bits, "p fraction bits PF"),
            ("MAX_KEYS_PER_STEP", 24, 8, cfg.max_keys_per_step, "most keys per step")]),
        Register("CTRL", 0x020, "pulse", "control", (
            Field("START", 0, 1, "start the program at PROG_BASE (refused while busy)"),
            Field("ABORT", 1, 1, "stop issuing, drain, end with done"))),
        Register("STATUS", 0x024, "ro", "status", (
            Field("BUSY", 0, 1, "a program is running"),
            Field("DONE", 1, 1, "the last program ended (cleared by START)"),
            Field("ERROR", 8, 4, "ErrorCode of the last program (0: none)"),
            Field("START_REFUSED", 16, 1, "a START arrived while busy"))),
        Register("IRQ_ENABLE", 0x028, "rw", "interrupt enable", (
            Field("DONE", 0, 1, "raise the interrupt when a program ends"),)),
        Register("IRQ_STATUS", 0x02C, "w1c", "interrupt status (write 1 to clear)", (
            Field("DONE", 0, 1, "a program ended"),)),
        Register("PROG_BASE_LO", 0x030, "rw", "program address, bits 31:0"),
        Register("PROG_BASE_HI", 0x034, "rw", "program address, bits 63:32"),
        Register("PROG_LEN", 0x038, "rw", "program length in instructions (fetch limit)"),
    ]
    windows = [
        ("WIN", 0x040, "DRAM window", "reads; writes too when WWIN_SIZE is 0",
         "0: no check"),
        ("WWIN", 0x050, "write window", "STORE_O only",
         "0: writes use WIN; START refuses one that overlaps WIN or the program"),
    ]
    for name, off, what, base_note, size_note in windows:
        regs += [
            Register(f"{name}_BASE_LO", off, "rw", f"{what} base ({base_note}), bits 31:0"),
            Register(f"{name}_BASE_HI", off + 4, "rw", f"{what} base, bits 63:32"),
            Register(f"{name}_SIZE_LO", off + 8, "rw",
                     f"{what} size in bytes, bits 31:0 ({size_note})"),
            Register(f"{name}_SIZE_HI", off + 12, "rw", f"{what} size in bytes, bits 63:32"),
        ]
    off = 0x080
    for name, doc in COUNTERS:
        regs.append(Register(f"{name}_LO", off, "ro64", f"{doc}, bits 31:0 (snapshots _HI)"))
        regs.append(Register(f"{name}_HI", off + 4, "ro64", f"{doc}, bits 63:32"))
        off += 8
    return regs


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


# ---- generated views of the same table ----

def python_map(cfg: HardwareConfig) -> dict[str, dict]:
    """``{name: {offset, kind, fields: {name: (lsb, width)}}}`` for host software."""
    return {r.name: {"offset": r.offset, "kind": r.kind,
                     "fields": {f.name: (f.lsb, f.width) for f in r.fields}}
            for r in registers(cfg)}


def c_header(cfg: HardwareConfig) -> str:
    """A C header with every offset, field shift and mask, and the error codes."""
    lines = ["/* attenio register map, generated from hw/csr.py: do not edit. */",
             "#ifndef ATTENIO_REGS_H", "#define ATTENIO_REGS_H", ""]
    for r in registers(cfg):
        lines.append(f"#define ATTENIO_{r.name}_OFFSET 0x{r.offset:03X}u  /* {r.kind}: {r.doc} */")
        if r.kind == "const":
            lines.append(f"#define ATTENIO_{r.name}_VALUE 0x{r.value:08X}u")
        for f in r.fields:
            lines.append(f"#define ATTENIO_{r.name}_{f.name}_SHIFT {f.lsb}u")
            mask = ((1 << f.width) - 1) << f.lsb
            lines.append(f"#define ATTENIO_{r.name}_{f.name}_MASK 0x{mask:08X}u")
    lines.append("")
    for code in ErrorCode:
        lines.append(f"#define ATTENIO_ERROR_{code.name} {int(code)}u")
    lines += ["", "#endif /* ATTENIO_REGS_H */", ""]
    return "\n".join(lines)


def markdown(cfg: HardwareConfig) -> str:
    """The register table of docs/registers.md (for ``cfg``'s constant values)."""
    out = ["| offset | name | kind | description | fields |", "|---|---|---|---|---|"]
    for r in registers(cfg):
        fields = "; ".join(f"`{f.name}` [{f.lsb + f.width - 1}:{f.lsb}] {f.doc}"
                           for f in r.fields)
        out.append(f"| 0x{r.offset:03X} | `{r.name}` | {r.kind} | {r.doc} | {fields} |")
    return "\n".join(out)
