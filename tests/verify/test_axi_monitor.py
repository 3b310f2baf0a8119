"""The AXI4 protocol monitor (verify/axi_monitor.py): every rule fires on a trace that breaks it
and stays quiet on a clean one."""

import pytest

from attenio.verify.axi_monitor import CHANNELS, LITE_CHANNELS, AxiMonitor

AB = 4


def idle(table=CHANNELS):
    return {n: 0 for c in table.values() for n in (c[0], c[1], *c[2])}


def cyc(**kw):
    v = idle()
    v.update(arsize=2, awsize=2, arburst=1, awburst=1)
    v.update(kw)
    return v


def run(trace, lite=False, finish=True):
    mon = AxiMonitor("m", AB, lite=lite)
    for k, v in enumerate(trace):
        mon.step(k, v)
    if finish and not lite:
        mon.finish(len(trace))
    return mon


def rules(mon):
    return sorted({v.split(": ")[2] for v in mon.violations})


CLEAN = [
    cyc(arvalid=1, araddr=0x100, arlen=3),                 # waits
    cyc(arvalid=1, araddr=0x100, arlen=3, arready=1),      # taken
    cyc(awvalid=1, awaddr=0x200, awlen=1, awready=1,
        wvalid=1, wdata=5, wstrb=15, wlast=0),             # AW and first W beat (waits)
    cyc(wvalid=1, wdata=5, wstrb=15, wlast=0, wready=1),
    cyc(wvalid=1, wdata=6, wstrb=0, wlast=1, wready=1),
    cyc(rvalid=1, rdata=1, rready=0, rlast=1),
    cyc(rvalid=1, rdata=1, rready=1, rlast=1),
    cyc(bvalid=1, bready=1),
]


def test_clean_trace_passes():
    mon = run(CLEAN)
    assert mon.count == 0, mon.violations
    assert mon.handshakes == {"ar": 1, "r": 1, "aw": 1, "w": 2, "b": 1}


@pytest.mark.parametrize("trace, rule", [
    ([cyc(arvalid=1, araddr=0x100), cyc()], "valid-held"),
    ([cyc(arvalid=1, araddr=0x100), cyc(arvalid=1, araddr=0x104)], "payload-stable"),
    ([cyc(awvalid=1, awaddr=0, awlen=0, awready=1, wvalid=1, wstrb=15, wlast=1),
      cyc(wvalid=1, wstrb=0, wlast=1, wready=1)], "payload-stable"),
    ([cyc(rvalid=1, rdata=3), cyc()], "valid-held"),
    ([cyc(bvalid=1, bresp=2), cyc(bvalid=1, bresp=0, bready=1)], "payload-stable"),
    ([cyc(arvalid=1, arready=1, araddr=4096 - 8, arlen=3)], "burst-4k"),
    ([cyc(arvalid=1, arready=1, arsize=3)], "burst-size"),
    ([cyc(awvalid=1, awready=1, awburst=2), cyc(wvalid=1, wready=1, wlast=1)], "burst-type"),
    ([cyc(awvalid=1, awready=1, awlen=1), cyc(wvalid=1, wready=1, wlast=1),
      cyc(wvalid=1, wready=1, wlast=1)], "wlast"),
    ([cyc(awvalid=1, awready=1, awlen=2), cyc(wvalid=1, wready=1)], "write-open"),
])
def test_each_rule_fires(trace, rule):
    assert rule in rules(run(trace))


def test_burst_len_over_256():
    mon = AxiMonitor("m", AB)
    mon.step(0, cyc(arvalid=1, arready=1, arlen=256))
    assert "burst-len" in rules(mon)


def test_an_unobserved_wait_is_reported():
    mon = AxiMonitor("m", AB)
    mon.step(0, cyc(awvalid=1))
    mon.step(5, cyc(awvalid=1, awready=1))
    assert rules(mon) == ["valid-held"]


def test_lite_handshakes():
    v = {n: 0 for c in LITE_CHANNELS.values() for n in (c[0], c[1], *c[2])}
    ok = [dict(v, rvalid=1, rdata=7), dict(v, rvalid=1, rdata=7, rready=1)]
    assert run(ok, lite=True).count == 0
    bad = [dict(v, rvalid=1, rdata=7), dict(v, rvalid=1, rdata=8)]
    assert rules(run(bad, lite=True)) == ["payload-stable"]
