"""The timing model's parts: an AXI direction in front of the DRAM model (``Channel``), busy
and stall counts (``Stats``) and trace spans (``Span``); sim/schedule.py's docstring states
the model."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from attenio.base.config import HardwareConfig
from attenio.contract.rules import axi_bursts
from attenio.contract.timing import Timing

__all__ = ["ENGINES", "Channel", "Stats", "Span", "cdiv"]


ENGINES = ("dma_read", "dma_write", "pe", "exp", "finalize")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Channel:
    """One AXI direction in front of the DRAM model (see the module docstring)."""

    def __init__(self, hw: HardwareConfig, timing: Timing, write: bool = False, gap: int = 1):
        self.latency = hw.dram_latency
        self.rate = min(hw.dram_bytes_per_cycle, hw.axi_data_bytes)
        self.beat = hw.axi_data_bytes
        self.max_beats = timing.max_burst_beats
        self.max_out = timing.max_outstanding
        self.gap = gap
        self.write = write
        self.data_delay = timing.fifo_latency if write else 0  # W follows AW through a FIFO
        self.free = 0          # data channel busy until
        self.last_req = -1     # cycle of the last request
        self.done = deque()    # completion (response) times of the last max_out bursts
        self.busy = 0
        self.nbytes = 0
        self.requests = 0      # bursts requested (AR or AW handshakes)
        self.activity = None   # a list to record (start, end, busy) of each burst's data in

    def bursts(self, addr: int, n: int):
        return axi_bursts(addr, n, self.beat, self.max_beats)

    def transfer(self, ready: int, addr: int, n: int) -> tuple[int, int]:
        """Move ``n`` bytes at ``addr``, requesting no earlier than ``ready``.
        Returns (last request cycle, completion cycle)."""
        end = ready
        for _, chunk in self.bursts(addr, n):
            req = max(ready, self.last_req + self.gap)
            if len(self.done) == self.max_out:
                req = max(req, self.done[0])
            self.last_req = req
            self.requests += 1
            start = max(req + self.data_delay if self.write else req + self.latency, self.free)
            dur = cdiv(chunk, self.rate)
            self.free = start + dur
            end = self.free + self.latency if self.write else self.free
            self.done.append(end)
            if len(self.done) > self.max_out:
                self.done.popleft()
            self.busy += dur
            self.nbytes += chunk
            if self.activity is not None:
                self.activity.append((start, start + dur, dur))
        return self.last_req, end

    def state(self, ref: int) -> tuple:
        return (self.free - ref, self.last_req - ref, tuple(x - ref for x in self.done))

    def shift(self, dt: int) -> None:
        self.free += dt
        self.last_req += dt
        self.done = deque(x + dt for x in self.done)


@dataclass
class Stats:
    busy: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ENGINES, 0))
    stalls: dict[str, int] = field(default_factory=dict)
    useful_macs: int = 0
    # engine → [(start, end, busy cycles spread over it)], kept with the spans (for plots)
    activity: dict[str, list] | None = None
    # AXI bursts per port: "read" and "write" (the data port), "fetch" (the program port)
    requests: dict[str, int] = field(default_factory=dict)

    def active(self, engine: str, start: int, end: int, busy: int) -> None:
        if self.activity is not None and busy > 0 and end > start:
            self.activity[engine].append((start, end, busy))

    def stall(self, cause: str, cycles: int) -> None:
        if cycles > 0:
            self.stalls[cause] = self.stalls.get(cause, 0) + cycles


@dataclass
class Span:
    """One interval on one engine's track (for traces)."""

    engine: str
    name: str
    start: int
    end: int
    args: dict
