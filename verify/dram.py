"""A DRAM behind the accelerator's AXI4 ports, with the schedule generator's timing.

Rules (docs/architecture.md, timing model): a read request handshaken in cycle t starts its data
in cycle ``s = max(t + latency, channel free)``; beat k of the burst is valid from cycle
``s + ⌈(k+1)·axi_bytes / rate⌉ − 1`` (the bytes it carries have crossed the channel: one beat
a cycle when the rate is the bus width, fewer otherwise), and the channel is free after the
last. A write burst starts when its first beat is offered (or the channel frees), beat k is
taken from ``s + ⌈(k+1)·axi_bytes / rate⌉ − 1``, and its response is valid ``latency`` cycles
after its last beat. These are the schedule generator's ``Channel`` timings, at any rate. Reads
and writes have separate channels, and the instruction port has its own read channel. Bursts are
INCR.

Options make the bus hostile without changing results: ``p_stall`` drops each ready (AR, AW,
W) with that probability per cycle and delays each R beat and B response the same way (a beat
or response once offered stays until taken, as AXI4 requires of a subordinate); ``errors`` are
byte ranges that answer SLVERR. Every awake cycle feeds the AXI4 protocol monitors
(verify/axi_monitor.py). The storage is a bytearray; the host reads and writes it directly.

The model runs every cycle only while the bus is active; in between it sleeps until a valid
rises or its next scheduled beat, so long compute phases cost no Python time.
"""

from __future__ import annotations

import random
from collections import deque

from cocotb.triggers import FallingEdge, First, ReadOnly, RisingEdge, Timer
from cocotb.utils import get_sim_time

from attenio.verify.axi_monitor import CHANNELS, AxiMonitor, sample

SLVERR = 2
DECERR = 3


class _ReadChannel:
    def __init__(self, dram, prefix):
        d = dram.dut
        self.name = "i" if "insn" in prefix else ""
        self.dram = dram
        self.arvalid = getattr(d, f"{prefix}arvalid")
        self.arready = getattr(d, f"{prefix}arready")
        self.araddr = getattr(d, f"{prefix}araddr")
        self.arlen = getattr(d, f"{prefix}arlen")
        self.rvalid = getattr(d, f"{prefix}rvalid")
        self.rready = getattr(d, f"{prefix}rready")
        self.rdata = getattr(d, f"{prefix}rdata")
        self.rresp = getattr(d, f"{prefix}rresp")
        self.rlast = getattr(d, f"{prefix}rlast")
        self.pending = deque()     # (request cycle, addr, beats)
        self.cur = None            # [addr, beats, beat index, earliest next beat, data start]
        self.free = 0              # first cycle the data channel is free
        self.last_arvalid = 0
        self.driving = False
        self.held = False          # the beat driven was not taken: it must stay
        self.bytes = 0

    def reset(self):
        self.pending.clear()
        self.held = False
        self.cur = None
        self.free = 0
        self.last_arvalid = 0

    def next_event(self):
        if self.cur is not None:
            return self.cur[3]
        if self.pending:
            t, _, _ = self.pending[0]
            return max(t + self.dram.latency, self.free)
        return None

    def drive(self, k):
        dr = self.dram
        self.arready.value = 0 if dr.stall() else 1
        if self.cur is None and self.pending and max(self.pending[0][0] + dr.latency,
                                                     self.free) <= k:
            t, addr, beats = self.pending.popleft()
            start = max(t + dr.latency, self.free)
            self.cur = [addr, beats, 0, start + dr.beat_offset(0), start]
        cur = self.cur
        if self.driving and self.held:
            return                 # a beat offered and not taken stays, unchanged (A3.2.1)
        if cur is not None and cur[3] <= k and not dr.stall():
            addr = cur[0] + cur[2] * dr.ab
            self.rdata.value = int.from_bytes(dr.read(addr, dr.ab), "little")
            self.rresp.value = dr.resp_for(addr, 1)   # each beat answers for its own bytes
            self.rlast.value = int(cur[2] == cur[1] - 1)
            self.rvalid.value = 1
            self.driving = True
        elif self.driving:
            self.rvalid.value = 0
            self.driving = False

    def sample(self, k):
        dr = self.dram
        av = int(self.arvalid.value)
        self.last_arvalid = av
        if av and int(self.arready.value):
            self.pending.append((k, int(self.araddr.value), int(self.arlen.value) + 1))
            if dr.log is not None:
                dr.log.append((k, f"{self.name}ar", self.pending[-1][1], self.pending[-1][2]))
        self.held = self.driving and not int(self.rready.value)
        if self.driving and int(self.rready.value):
            cur = self.cur
            cur[2] += 1
            self.bytes += dr.ab
            if cur[2] == cur[1]:
                self.cur = None
                self.free = k + 1
                if dr.log is not None:
                    dr.log.append((k, f"{self.name}rlast", cur[0], cur[1]))
            else:
                cur[3] = max(k + 1, cur[4] + dr.beat_offset(cur[2]))

    def busy(self):
        return self.cur is not None or bool(self.pending) or self.last_arvalid


class Dram:
    """Storage plus timed AXI4 subordinates on ``m_axi_`` (read and write) and
    ``m_axi_insn_`` (read)."""

    def __init__(self, dut, size: int, *, latency: int, rate: int, axi_bytes: int,
                 period_ns: float = 10.0, p_stall: float = 0.0, seed: int = 0,
                 errors: list[tuple[int, int]] | None = None):
        self.dut = dut
        self.mem = bytearray(size)
        self.latency = latency
        self.ab = axi_bytes
        self.rate = max(1, min(rate, axi_bytes))
        self.period = period_ns
        self.p_stall = p_stall
        self.rng = random.Random(seed)
        self.errors = list(errors or [])
        self.rd = _ReadChannel(self, "m_axi_")
        self.insn = _ReadChannel(self, "m_axi_insn_")
        d = dut
        self.awvalid, self.awready = d.m_axi_awvalid, d.m_axi_awready
        self.awaddr, self.awlen = d.m_axi_awaddr, d.m_axi_awlen
        self.wvalid, self.wready = d.m_axi_wvalid, d.m_axi_wready
        self.wdata, self.wstrb, self.wlast = d.m_axi_wdata, d.m_axi_wstrb, d.m_axi_wlast
        self.bvalid, self.bready, self.bresp = d.m_axi_bvalid, d.m_axi_bready, d.m_axi_bresp
        self.aw = deque()          # [addr, beats, beat index, resp]
        self.b = deque()           # (cycle valid from, resp)
        self.b_driving = False
        self.b_held = False
        self.w_free = 0            # the write data channel is free from this cycle
        self.w_start = None        # the current W burst's data start (its first offer)
        self.last_wvalid = 0
        self.last_awvalid = 0
        self.bytes_written = 0
        self.halted = False
        self.steps = 0             # cycles the model was awake (simulation speed diagnostics)
        self.log = None            # a list to record (cycle, event, address) in, if set
        self.allowed = None        # (lo, hi): bytes written with strobes outside it are stray
        self.stray_bytes = 0
        # the protocol monitors of both ports (verify/axi_monitor.py), fed every awake cycle:
        # the model stays awake while any VALID is high, so no handshake goes unseen
        self.monitors = []
        for prefix, chans in (("m_axi_", CHANNELS), ("m_axi_insn_", ("ar", "r"))):
            mon = AxiMonitor(prefix[:-1], axi_bytes, chans)
            names = [n for c in chans for n in (CHANNELS[c][0], CHANNELS[c][1], *CHANNELS[c][2])]
            self.monitors.append((mon, [(n, getattr(dut, prefix + n)) for n in names]))

    def beat_offset(self, k: int) -> int:
        """Cycles from a burst's data start to its beat k: ⌈(k+1)·axi_bytes / rate⌉ − 1."""
        return -(-(k + 1) * self.ab // self.rate) - 1

    # ---- storage ----
    def read(self, addr: int, n: int) -> bytes:
        if addr < 0 or addr + n > len(self.mem):
            return bytes(n)
        return bytes(self.mem[addr:addr + n])

    def write(self, addr: int, data: bytes) -> None:
        self.mem[addr:addr + len(data)] = data

    def resp_for(self, addr: int, beats: int) -> int:
        end = addr + beats * self.ab
        if end > len(self.mem):
            return DECERR
        for lo, hi in self.errors:
            if addr < hi and lo < end:
                return SLVERR
        return 0

    def stall(self) -> bool:
        return self.p_stall > 0 and self.rng.random() < self.p_stall

    def reset(self):
        """Forget every transaction in flight (the DUT was reset)."""
        self.rd.reset()
        self.insn.reset()
        self.aw.clear()
        self.b.clear()
        self.b_held = False
        self.w_free = 0
        self.w_start = None

    # ---- the loop ----
    def cycle(self) -> int:
        return int(get_sim_time("ns") // self.period)

    def _idle_until(self):
        """None if something may happen next cycle, else the cycle of the next event
        (or -1: nothing scheduled, wait for a valid)."""
        if self.rd.last_arvalid or self.insn.last_arvalid or self.last_awvalid \
                or self.last_wvalid or self.rd.driving or self.insn.driving \
                or self.b_driving:
            return None
        events = [e for e in (self.rd.next_event(), self.insn.next_event(),
                              self.b[0][0] if self.b else None) if e is not None]
        return min(events) if events else -1

    async def run(self):
        clk = self.dut.clk
        fe = FallingEdge(clk)
        ro = ReadOnly()
        while not self.halted:
            nxt = self._idle_until()
            if nxt is not None:
                k = self.cycle()
                trig = [RisingEdge(self.rd.arvalid), RisingEdge(self.insn.arvalid),
                        RisingEdge(self.awvalid), RisingEdge(self.wvalid)]
                if nxt < 0:
                    await First(*trig)
                elif nxt - k > 2:
                    await First(*trig, Timer((nxt - k - 1) * self.period, unit="ns"))
            await fe
            self.steps += 1
            k = self.cycle()
            self._drive(k)
            await ro
            self._sample(k)

    def _drive(self, k):
        if int(self.dut.rst.value) == 1:
            self.reset()           # the subordinate shares the reset: VALIDs low (A3.1.2)
        self.rd.drive(k)
        self.insn.drive(k)
        self.awready.value = 0 if self.stall() else 1
        w_ok = False
        if self.aw:
            start = self.w_start if self.w_start is not None else max(k, self.w_free)
            w_ok = k >= start + self.beat_offset(self.aw[0][2])
        self.wready.value = int(w_ok and not self.stall())
        if self.b_driving and self.b_held:
            pass                   # a response offered and not taken stays
        elif self.b and self.b[0][0] <= k and not self.stall():
            self.bvalid.value = 1
            self.bresp.value = self.b[0][1]
            self.b_driving = True
        elif self.b_driving:
            self.bvalid.value = 0
            self.b_driving = False

    def _sample(self, k):
        in_reset = int(self.dut.rst.value) == 1
        for mon, sigs in self.monitors:
            if in_reset:
                mon.reset()
            else:
                mon.step(k, sample(sigs))
        self.rd.sample(k)
        self.insn.sample(k)
        av = int(self.awvalid.value)
        self.last_awvalid = av
        if av and int(self.awready.value):
            addr, beats = int(self.awaddr.value), int(self.awlen.value) + 1
            self.aw.append([addr, beats, 0, self.resp_for(addr, beats)])
            if self.log is not None:
                self.log.append((k, "aw", addr, beats))
        wv = int(self.wvalid.value)
        self.last_wvalid = wv
        if wv and self.aw and self.w_start is None:
            self.w_start = max(k, self.w_free)       # the burst's data starts with its offer
        if wv and int(self.wready.value) and self.aw:
            cur = self.aw[0]
            strb = int(self.wstrb.value)
            data = int(self.wdata.value).to_bytes(self.ab, "little")
            addr = cur[0] + cur[2] * self.ab
            if strb and self.allowed and not (self.allowed[0] <= addr
                                              and addr + self.ab <= self.allowed[1]):
                self.stray_bytes += bin(strb).count("1")
            if cur[3] == 0:
                for i in range(self.ab):
                    if strb >> i & 1:
                        self.mem[addr + i] = data[i]
                self.bytes_written += self.ab
            cur[2] += 1
            if cur[2] == cur[1]:
                self.w_free = k + 1
                self.w_start = None
                self.aw.popleft()
                self.b.append((k + self.latency, cur[3]))
                if self.log is not None:
                    self.log.append((k, "wlast", cur[0], cur[1]))
        self.b_held = self.b_driving and not int(self.bready.value)
        if self.b_driving and int(self.bready.value):
            self.b.popleft()
            if self.log is not None:
                self.log.append((k, "b", 0, 0))
