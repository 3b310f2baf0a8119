"""Register bank over AXI4-Lite, and the generated header, map and doc agree with the table."""

import subprocess
from pathlib import Path

from amaranth.sim import Simulator

from attenio.base import config as C
from attenio.hw import csr

TINY = C.tiny()
REGS = {r.name: r for r in csr.registers(TINY)}


def run(actions):
    """Drive the bank with a list of ("w", name, value, strb) / ("r", name) / ("set", port,
    value) / ("tick",); return the read results (data, resp) and write responses."""
    dut = csr.CsrBank(TINY)
    results = []
    bus = dut.axil

    async def tb(ctx):
        for act in actions:
            if act[0] == "w":
                _, name, value, strb = act
                off = REGS[name].offset if isinstance(name, str) else name
                ctx.set(bus.awaddr, off)
                ctx.set(bus.wdata, value)
                ctx.set(bus.wstrb, strb)
                ctx.set(bus.awvalid, 1)
                ctx.set(bus.wvalid, 1)
                ctx.set(bus.bready, 1)
                await ctx.tick().until(bus.awready)
                ctx.set(bus.awvalid, 0)
                ctx.set(bus.wvalid, 0)
                while True:  # values sampled at the edge: what the cycle showed
                    *_, valid, resp, pulses = await ctx.tick().sample(bus.bvalid, bus.bresp,
                                                                      dut.ctrl)
                    if valid:
                        break
                results.append(("b", resp))
                results.append(("ctrl", pulses))
                ctx.set(bus.bready, 0)
            elif act[0] == "r":
                off = REGS[act[1]].offset if isinstance(act[1], str) else act[1]
                ctx.set(bus.araddr, off)
                ctx.set(bus.arvalid, 1)
                ctx.set(bus.rready, 1)
                await ctx.tick().until(bus.arready)
                ctx.set(bus.arvalid, 0)
                while True:
                    *_, valid, data, resp = await ctx.tick().sample(bus.rvalid, bus.rdata,
                                                                    bus.rresp)
                    if valid:
                        break
                results.append((data, resp))
                ctx.set(bus.rready, 0)
            elif act[0] == "set":
                ctx.set(getattr(dut, act[1]), act[2])
            else:
                await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return results


def reads(results):
    return [x for x in results if x[0] not in ("b", "ctrl")]


def test_constants_and_unmapped():
    out = reads(run([("r", "ID"), ("r", "CFG_ARRAY"), ("r", "CFG_TILE"), ("r", 0xFFC)]))
    assert out[0] == (csr.MAGIC, csr.OKAY)
    assert out[1][0] == 4 | (4 << 8) | (4 << 16) | (8 << 24)
    assert out[2][0] == 64 | (64 << 16)
    assert out[3] == (0, csr.SLVERR)


def test_rw_strobes_pulse_w1c_and_counter_snapshot():
    res = run([
        ("w", "PROG_BASE_LO", 0x11223344, 0b1111),
        ("w", "PROG_BASE_LO", 0xAABBCCDD, 0b0101),
        ("r", "PROG_BASE_LO"),
        ("w", "CTRL", 1, 0b1111),
        ("set", "irq_status_set", 1), ("tick",), ("set", "irq_status_set", 0),
        ("r", "IRQ_STATUS"),
        ("w", "IRQ_STATUS", 1, 0b1111),
        ("r", "IRQ_STATUS"),
        ("set", "status", 0x0000_0302),
        ("r", "STATUS"),
        ("set", "cycles", (7 << 32) | 5),
        ("r", "CYCLES_LO"),
        ("set", "cycles", (9 << 32) | 6),   # changes after the LO read: HI stays consistent
        ("r", "CYCLES_HI"),
        ("w", 0xFFC, 1, 0b1111),
        ("w", "ID", 1, 0b1111),
    ])
    rd = reads(res)
    assert rd[0] == (0x11BB33DD, csr.OKAY)
    assert rd[1][0] == 1 and rd[2][0] == 0
    assert rd[3][0] == 0x302
    assert rd[4][0] == 5 and rd[5][0] == 7
    writes = [x[1] for x in res if x[0] == "b"]
    assert writes[-2:] == [csr.SLVERR, csr.OKAY]  # unmapped; read-only ignored
    ctrl = [x[1] for x in res if x[0] == "ctrl"]
    assert ctrl[2] == 1 and ctrl[0] == 0  # START pulses for the CTRL write only


def test_generated_views_agree(tmp_path):
    header = csr.c_header(TINY)
    src = tmp_path / "t.c"
    (tmp_path / "attenio_regs.h").write_text(header)
    src.write_text('#include "attenio_regs.h"\n_Static_assert(ATTENIO_STATUS_OFFSET == 0x24u, "");'
                   "\nint main(void) { return (int)ATTENIO_ERROR_TIMEOUT; }\n")
    subprocess.run(["cc", "-fsyntax-only", "-Wall", "-Werror", str(src)], check=True)
    m = csr.python_map(TINY)
    assert m["STATUS"]["fields"]["ERROR"] == (8, 4)
    assert len({r["offset"] for r in m.values()}) == len(m)  # no two registers share an offset
    doc = (Path(__file__).resolve().parents[2] / "docs" / "registers.md").read_text()
    assert csr.markdown(C.fpga()) in doc
