"""cocotb side of tests/cocotb/test_fast_path.py's checker test: reset the fast path's wrapper
around a scripted master, let the script run, write what the checkers saw to
``$ATTENIO_CHECKER_OUT``."""

import json
import os

import cocotb
from cocotb.triggers import Timer


@cocotb.test()
async def run_script(dut):
    dut.rst.value = 1
    for name, value in (("latency", 3), ("rate", 4), ("mem_bytes", 1 << 16),
                        ("allowed_lo", 0), ("allowed_hi", 0x300), ("dump", 0)):
        getattr(dut, f"fd_{name}").value = value
    for s in ("awvalid", "awaddr", "wvalid", "wdata", "wstrb", "bready", "arvalid", "araddr",
              "rready"):
        getattr(dut, f"s_axil_{s}").value = 0
    await Timer(50, unit="ns")
    dut.rst.value = 0
    await Timer(2000, unit="ns")           # the script ends by cycle 100
    out = {k: int(getattr(dut, f"fd_{k}").value)
           for k in ("viol_0", "viol_1", "viol_2", "rules", "write_open", "first_0",
                     "first_1", "wr_bytes", "stray_bytes")}
    with open(os.environ["ATTENIO_CHECKER_OUT"], "w") as fh:
        json.dump(out, fh)
