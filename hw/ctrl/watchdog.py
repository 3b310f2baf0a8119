"""Watchdog and the controller's performance counters."""

from __future__ import annotations

from amaranth import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.base.errors import ErrorCode
from attenio.hw.ctrl.layouts import error_ports, raise_error

__all__ = ["Watchdog", "DmaCounters", "WATCHDOG_BITS"]

WATCHDOG_BITS = 16


class Watchdog(wiring.Component):
    """``timed_out`` (and ``fail`` with ``TIMEOUT`` during a run) after ``2**bits − 1`` cycles of
    a run without ``progress``. ``progress`` is registered, so it stays off the engines' issue
    paths."""

    def __init__(self, bits: int = WATCHDOG_BITS):
        self.bits = bits
        super().__init__({"go": In(1), "progress": In(1), "timed_out": Out(1),
                          **error_ports()})

    def elaborate(self, platform):
        m = Module()
        wd = Signal(self.bits)
        progress_r = Signal()
        m.d.sync += progress_r.eq(self.progress)
        m.d.sync += wd.eq(Mux(progress_r | ~self.go, 0, wd + 1))
        m.d.comb += self.timed_out.eq(wd == (1 << self.bits) - 1)
        with m.If(self.go & self.timed_out):
            raise_error(m, self, ErrorCode.TIMEOUT)
        return m


class DmaCounters(wiring.Component):
    """64-bit counters of the data port: read and write beats (``DMA_RD_BUSY``,
    ``DMA_WR_BUSY``) and bytes (``BYTES_RD``; ``BYTES_WR`` counts only beats with strobes)."""

    NAMES = ("DMA_RD_BUSY", "DMA_WR_BUSY", "BYTES_RD", "BYTES_WR")

    def __init__(self, beat_bytes: int):
        self.beat_bytes = beat_bytes
        super().__init__({"rd_beat": In(1), "wr_beat": In(1), "wr_kept": In(1),
                          **{n.lower(): Out(64) for n in self.NAMES}})

    def elaborate(self, platform):
        m = Module()
        ab = self.beat_bytes
        # the beats registered, then counted (the read handshake → a 64-bit add was the routed
        # preset's worst path in session 16): a count lags its beat by a cycle, and a run ends
        # at least two cycles after its last beat (its last response is then in), so the
        # counts a host reads after the run are whole
        rd, wr, kept = Signal(), Signal(), Signal()
        m.d.sync += [rd.eq(self.rd_beat), wr.eq(self.wr_beat), kept.eq(self.wr_kept)]
        m.d.sync += [
            self.dma_rd_busy.eq(self.dma_rd_busy + rd),
            self.dma_wr_busy.eq(self.dma_wr_busy + wr),
            self.bytes_rd.eq(self.bytes_rd + Mux(rd, ab, 0)),
            self.bytes_wr.eq(self.bytes_wr + Mux(kept, ab, 0)),
        ]
        return m
