"""The control and status registers as a table: the one definition that generates the AXI4-Lite
register bank (hw/csr.py), the C header, the Python register map, docs/registers.md, and the
host's reading of STATUS (:func:`status_fields`).

Register kinds:

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

from attenio.base.config import HardwareConfig
from attenio.base.errors import ConfigError, ErrorCode

__all__ = ["MAGIC", "VERSION", "ADDR_BITS", "Field", "Register", "COUNTERS", "registers",
           "register", "field_value", "pack_fields", "status_fields", "python_map", "c_header",
           "markdown"]

MAGIC = 0x4154494F  # "ATIO"
VERSION = (0, 4)   # 0.2: the write window (WWIN_*); 0.3: a run needs one (NO_WRITE_WINDOW);
                   # 0.4: the K/V read window (KVWIN_*), needed too (NO_KV_WINDOW)
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
        ("WIN", 0x040, "read window", "LOAD_Q",
         "0: no check"),
        ("WWIN", 0x050, "write window", "STORE_O only",
         ("0: START refuses the run, NO_WRITE_WINDOW; and one that overlaps WIN, KVWIN or "
          "the program, REGION_OVERLAP")),
        ("KVWIN", 0x060, "K/V read window", "LOAD_KV: K, V and block-table reads",
         "0: START refuses the run, NO_KV_WINDOW"),
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

def register(cfg: HardwareConfig, name: str) -> Register:
    """The register called ``name`` (KeyError for an unknown one)."""
    for r in registers(cfg):
        if r.name == name:
            return r
    raise KeyError(name)


def field_value(reg: Register, name: str, word: int) -> int:
    """Field ``name`` of register ``reg`` in the 32-bit value ``word``."""
    for f in reg.fields:
        if f.name == name:
            return (word >> f.lsb) & ((1 << f.width) - 1)
    raise KeyError(f"{reg.name}.{name}")


def pack_fields(entry: dict, **values: int) -> int:
    """The 32-bit value of a register with the named fields set (``entry``: the register's
    :func:`python_map` entry), e.g. ``pack_fields(regs["CTRL"], START=1)``."""
    word = 0
    for name, v in values.items():
        lsb, width = entry["fields"][name]
        if not 0 <= v < 1 << width:
            raise ConfigError(f"{name}={v} is invalid: the field holds [0, {(1 << width) - 1}]")
        word |= v << lsb
    return word


def status_fields(cfg: HardwareConfig, word: int) -> dict:
    """STATUS read as the host reads it: ``busy``, ``done``, ``start_refused`` (bools) and
    ``error`` (an :class:`~attenio.base.errors.ErrorCode`)."""
    reg = register(cfg, "STATUS")
    out = {f.name.lower(): bool(field_value(reg, f.name, word)) for f in reg.fields
           if f.width == 1}
    out["error"] = ErrorCode(field_value(reg, "ERROR", word))
    return out


# ---- generated views of the same table ----

def python_map(cfg: HardwareConfig) -> dict[str, dict]:
    """``{name: {offset, kind, fields: {name: (lsb, width)}}}`` for host software."""
    return {r.name: {"offset": r.offset, "kind": r.kind,
                     "fields": {f.name: (f.lsb, f.width) for f in r.fields}}
            for r in registers(cfg)}


def c_header(cfg: HardwareConfig) -> str:
    """A C header with every offset, field shift and mask, and the error codes."""
    lines = ["/* attenio register map, generated from contract/registers.py: do not edit. */",
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
