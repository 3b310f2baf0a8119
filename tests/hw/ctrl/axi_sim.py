"""AXI4 subordinates for the controller's unit tests in Amaranth's simulator: a memory on a read
port and one on a write port, with random READY/VALID stalls, and the AXI4 rules the managers
must keep (VALID held until READY, payload stable while waiting, bursts never across 4 KB).

Each cycle a testbench calls ``drive(ctx)`` on every model (inputs for this cycle), then
``observe(ctx)`` (handshakes as the outputs settle), then ``await ctx.tick()``.
"""

from __future__ import annotations

import random


class _Channel:
    """Checks one VALID/READY channel: once offered, VALID stays up with the same payload until
    the handshake (AXI4 A3.2.1)."""

    def __init__(self, name: str):
        self.name = name
        self.waiting = None          # the payload offered without READY last cycle
        self.violations: list[str] = []

    def step(self, cycle: int, valid: bool, ready: bool, payload) -> bool:
        if self.waiting is not None and (not valid or payload != self.waiting):
            self.violations.append(f"cycle {cycle}: {self.name} changed before READY "
                                   f"({self.waiting} -> {payload if valid else 'VALID low'})")
        self.waiting = payload if valid and not ready else None
        return valid and ready


class ReadMemory:
    """A memory on an AXI4 read port (``ar*``/``r*`` of ``dut``): bursts answered in order,
    the first beat ``latency`` cycles after the request; ``errors``: byte ranges answered
    with SLVERR."""

    def __init__(self, dut, mem: bytes, beat_bytes: int, *, seed: int = 0, p_stall: float = 0.3,
                 latency: int = 2, errors=()):
        self.dut, self.mem, self.ab = dut, bytearray(mem), beat_bytes
        self.rng = random.Random(seed)
        self.p_stall, self.latency, self.errors = p_stall, latency, list(errors)
        self.cycle = 0
        self.bursts: list[tuple[int, int]] = []      # (address, beats) in request order
        self.ar_at: list[int] = []                    # the cycle of each AR handshake
        self.r_at: list[int] = []                     # ... and of each R beat
        self.pending: list[list] = []                 # [ready cycle, address, beats left]
        self.ar = _Channel("AR")
        self.beats = 0
        self._arready = self._rvalid = False

    def _beat(self):
        _, addr, left = self.pending[0]
        data = int.from_bytes(self.mem[addr:addr + self.ab].ljust(self.ab, b"\0"), "little")
        bad = any(lo <= addr < hi for lo, hi in self.errors)
        return data, 2 if bad else 0, left == 1

    def drive(self, ctx) -> None:
        d = self.dut
        self._arready = self.rng.random() >= self.p_stall
        self._rvalid = (bool(self.pending) and self.pending[0][0] <= self.cycle
                        and self.rng.random() >= self.p_stall)
        ctx.set(d.arready, self._arready)
        ctx.set(d.rvalid, self._rvalid)
        if self._rvalid:
            data, resp, last = self._beat()
            ctx.set(d.rdata, data)
            ctx.set(d.rresp, resp)
            ctx.set(d.rlast, last)
        else:
            ctx.set(d.rlast, 0)

    def observe(self, ctx) -> tuple | None:
        """Record this cycle's handshakes; returns the R beat taken (data, last) or None."""
        d = self.dut
        payload = (ctx.get(d.araddr), ctx.get(d.arlen), ctx.get(d.arsize), ctx.get(d.arburst))
        if self.ar.step(self.cycle, bool(ctx.get(d.arvalid)), self._arready, payload):
            addr, beats = payload[0], payload[1] + 1
            assert payload[2] == self.ab.bit_length() - 1 and payload[3] == 1, payload
            assert addr % 4096 + beats * self.ab <= 4096, f"burst {addr:#x}+{beats} crosses 4 KB"
            self.bursts.append((addr, beats))
            self.ar_at.append(self.cycle)
            self.pending.append([self.cycle + self.latency, addr, beats])
        taken = None
        if self._rvalid and ctx.get(d.rready):
            data, _, last = self._beat()
            taken = (data, last)
            self.r_at.append(self.cycle)
            self.beats += 1
            self.pending[0][1] += self.ab
            self.pending[0][2] -= 1
            if self.pending[0][2] == 0:
                self.pending.pop(0)
        self.cycle += 1
        return taken

    @property
    def violations(self) -> list[str]:
        return self.ar.violations


class WriteMemory:
    """A memory on an AXI4 write port (``aw*``/``w*``/``b*``): W beats follow their AW in
    order, each B ``latency`` cycles after a burst's last beat; ``errors``: byte ranges
    answered with SLVERR."""

    def __init__(self, dut, size: int, beat_bytes: int, *, seed: int = 0, p_stall: float = 0.3,
                 latency: int = 2, errors=()):
        self.dut, self.mem, self.ab = dut, bytearray(size), beat_bytes
        self.rng = random.Random(seed)
        self.p_stall, self.latency, self.errors = p_stall, latency, list(errors)
        self.cycle = 0
        self.bursts: list[tuple[int, int]] = []
        self.open: list[list] = []        # [address, beats left] of accepted AWs
        self.resp: list[list] = []        # [ready cycle, resp]
        self.aw, self.w = _Channel("AW"), _Channel("W")
        self.written: set[int] = set()
        self.violations_extra: list[str] = []
        self._awready = self._wready = self._bvalid = False

    def drive(self, ctx) -> None:
        d = self.dut
        self._awready = self.rng.random() >= self.p_stall
        self._wready = self.rng.random() >= self.p_stall
        self._bvalid = bool(self.resp) and self.resp[0][0] <= self.cycle \
            and self.rng.random() >= self.p_stall
        ctx.set(d.awready, self._awready)
        ctx.set(d.wready, self._wready)
        ctx.set(d.bvalid, self._bvalid)
        ctx.set(d.bresp, self.resp[0][1] if self._bvalid else 0)

    def observe(self, ctx) -> None:
        d = self.dut
        aw = (ctx.get(d.awaddr), ctx.get(d.awlen), ctx.get(d.awsize), ctx.get(d.awburst))
        if self.aw.step(self.cycle, bool(ctx.get(d.awvalid)), self._awready, aw):
            addr, beats = aw[0], aw[1] + 1
            assert addr % 4096 + beats * self.ab <= 4096, f"burst {addr:#x}+{beats} crosses 4 KB"
            self.bursts.append((addr, beats))
            self.open.append([addr, beats, False])
        w = (ctx.get(d.wdata), ctx.get(d.wstrb), ctx.get(d.wlast))
        if self.w.step(self.cycle, bool(ctx.get(d.wvalid)), self._wready, w):
            if not self.open:
                self.violations_extra.append(f"cycle {self.cycle}: W before its AW")
            else:
                addr, left, bad = self.open[0]
                data, strb, last = w
                for i in range(self.ab):
                    if strb >> i & 1:
                        self.mem[addr + i] = data >> (8 * i) & 0xFF
                        self.written.add(addr + i)
                bad = bad or any(lo <= addr < hi for lo, hi in self.errors)
                if bool(last) != (left == 1):
                    self.violations_extra.append(f"cycle {self.cycle}: WLAST={last} with "
                                                 f"{left} beats left")
                self.open[0] = [addr + self.ab, left - 1, bad]
                if left == 1:
                    self.open.pop(0)
                    self.resp.append([self.cycle + self.latency, 2 if bad else 0])
        if self._bvalid and ctx.get(d.bready):
            self.resp.pop(0)
        self.cycle += 1

    @property
    def violations(self) -> list[str]:
        return self.aw.violations + self.w.violations + self.violations_extra


class QueueFeeder:
    """A program offered to an engine as its dispatcher queue would: the head entry held
    until the engine takes it, its tokens always there."""

    def __init__(self, dut, program):
        self.dut = dut
        self.entries = [(int.from_bytes(i.encode(), "little"),
                         i.args.get("rows", 0) * i.args.get("heads", 0)) for i in program]

    def drive(self, ctx) -> None:
        q = self.dut.queue
        ctx.set(q.ok, 1)
        ctx.set(q.head.valid, bool(self.entries))
        if self.entries:
            ctx.set(q.head.payload, {"insn": self.entries[0][0], "rh": self.entries[0][1]})

    def observe(self, ctx) -> None:
        if self.entries and ctx.get(self.dut.queue.head.ready):
            self.entries.pop(0)


def run_engine(dut, models, step, out: dict, *, max_cycles: int = 20_000) -> None:
    """Simulate an engine cycle by cycle: every model drives its inputs, ``step(ctx)`` sets and
    reads the test's own ports, the models record the handshakes; until the engine fails
    (``out["fail"]``, its ErrorCode) or has ended with nothing in flight."""
    from attenio.base.errors import ErrorCode

    from ..helpers import simulate

    async def tb(ctx):
        ctx.set(dut.go, 1)
        for _ in range(max_cycles):
            for model in models:
                model.drive(ctx)
            step(ctx)
            if ctx.get(dut.fail) and out.get("fail") is None:
                out["fail"] = ErrorCode(ctx.get(dut.fail_code))
            for model in models:
                model.observe(ctx)
            await ctx.tick()
            if out.get("fail") is not None or (ctx.get(dut.ended) and ctx.get(dut.idle)):
                return
        raise AssertionError(f"{type(dut).__name__} did not finish in {max_cycles} cycles")

    simulate(dut, tb)
