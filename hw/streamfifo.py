"""StreamFIFO: amaranth.lib.fifo's synchronous buffered FIFO behind stream ports, so the blocks
that queue words (the core's output, the fetch buffer, the dispatch queues, the engines' burst
tags) connect streams instead of spreading the FIFO's raw signals."""

from __future__ import annotations

from amaranth import Module, Shape
from amaranth.lib import fifo, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["StreamFIFO"]


class StreamFIFO(wiring.Component):
    """A FIFO of ``depth`` entries of ``shape`` (a shape or a data layout).

    Ports
    -----
    i : stream in; ``i.ready`` while there is room (a beat offered without room is dropped,
        as the FIFO's ``w_en`` without ``w_rdy``: producers that count their room rely on it).
    o : stream out: the oldest entry; taken when ``o.ready``.
    level : entries held.

    Latency: an entry written in cycle c can be read in cycle c + 2 (``SyncFIFOBuffered``:
    ``Timing.fifo_latency``).
    """

    def __init__(self, shape, depth: int):
        self.shape, self.depth = shape, depth
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape)),
                          "level": Out(range(depth + 1))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.fifo = f = fifo.SyncFIFOBuffered(width=Shape.cast(self.shape).width,
                                                      depth=self.depth)
        m.d.comb += [f.w_en.eq(self.i.valid), f.w_data.eq(self.i.payload),
                     self.i.ready.eq(f.w_rdy), self.o.valid.eq(f.r_rdy),
                     self.o.payload.eq(f.r_data), f.r_en.eq(self.o.ready),
                     self.level.eq(f.level)]
        return m
