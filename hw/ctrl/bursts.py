"""BurstSplitter: a transfer cut into AXI4 INCR bursts of at most 256 beats that never cross a
4 KB line, each checked against the address window before any of its bursts goes out."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.contract.timing import TIMING
from attenio.hw.ctrl.axi import ADDR_BITS, kept_offered, log2
from attenio.hw.ctrl.decode import kps_log2_of

__all__ = ["BurstSplitter", "BurstRegs", "drive_address", "prepared_blocks", "prepared_transfer"]


class BurstSplitter(wiring.Component):
    """Address generator of the load and store engines.

    The engine holds the transfer's state (``base``, ``beats`` and ``off``, the beats already
    requested) and sets ``moved`` in a cycle whose edge changes it. ``addr``, ``len`` and
    ``last`` (the next burst, ``last``: it ends the transfer) are registers computed in two
    stages from the state of two cycles before; ``ready`` is low in the two cycles after
    ``moved``, while these and the engine's own look-ahead registers catch up. So a burst can
    follow the previous one (or the instruction's start) three cycles later
    (``Timing.request_gap``). ``ready_next`` is ``ready``'s value in the next cycle (for an
    engine that registers its request: it is high only when the state did not move in this
    cycle or the one before).

    Window: with ``win_size`` ≠ 0, a transfer whose bytes leave ``[win_base, win_base +
    win_size)`` sets ``bad`` (a register, two stages from the state and the window, as the
    burst's) and is never requested: ``valid`` is
    ``want & ~bad`` and ``window_fail`` is ``want & bad``.

    Parameters
    ----------
    beat_bytes : int
        Bytes per AXI beat (a power of two).
    """

    def __init__(self, beat_bytes: int):
        self.beat_bytes = beat_bytes
        super().__init__({
            "base": In(ADDR_BITS), "beats": In(24), "off": In(24), "moved": In(1),
            "addr": Out(ADDR_BITS), "len": Out(9), "last": Out(1), "ready": Out(1),
            "ready_next": Out(1),
            "win_base": In(64), "win_size": In(64), "want": In(1),
            "bad": Out(1), "valid": Out(1), "window_fail": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        lab = log2(self.beat_bytes)
        max_beats = TIMING.max_burst_beats
        # stage 1: address and beats left; stage 2: the burst's length and whether it is last.
        # The stages' words are data, written every cycle from the transfer's registers and
        # read two cycles after they last moved (``ready``): off START's reset (issue #47: the
        # engines' reset nets, scripts/fanout.py)
        data = {"reset_less": True}
        addr = Signal(ADDR_BITS, **data)
        left = Signal(24, **data)
        m.d.sync += [addr.eq(self.base + (self.off << lab)), left.eq(self.beats - self.off)]
        # the beats to the 4 KB line's end, W − the burst's beat in its line (W = 4096 / beat
        # bytes), in stage 1 beside the address: a narrow add and subtract, off the length's
        # compares (the address's low bits, then the subtract, then two compares and their
        # muxes in a row were the load block's speed-8 path in session 16)
        wl = 12 - lab
        to4k = Signal(13, **data)
        x = Signal(wl)
        m.d.comb += x.eq((self.base[lab:12] + self.off[:wl])[:wl])
        m.d.sync += to4k.eq((1 << wl) - x)
        # the length, min(left, max_beats, to4k): three compares side by side, then a select
        c_left, c_to_left, c_to_max = left < max_beats, to4k < left, to4k < max_beats
        length = Mux(c_left, Mux(c_to_left, to4k, left), Mux(c_to_max, to4k, max_beats))
        moved1 = Signal()
        m.d.comb += self.ready_next.eq(~self.moved & ~moved1)
        # (the burst ends the transfer when the beats left fit both limits: two compares side
        # by side, not the length's muxes and a compare after them)
        addr2, len2 = Signal(ADDR_BITS, **data), Signal(9, **data)
        m.d.comb += [self.addr.eq(addr2), self.len.eq(len2)]
        m.d.sync += [addr2.eq(addr), len2.eq(length),
                     self.last.eq((left <= max_beats) & (left <= to4k)),
                     moved1.eq(self.moved), self.ready.eq(self.ready_next)]
        # the window, per transfer, in two stages like the burst (the transfer's end and the
        # window's registered, then compared): ``bad`` is read with ``ready``, two cycles after
        # the state last moved, so both stages then hold the transfer's own values
        win_on, below = Signal(), Signal()
        win_end, t_end = Signal(65, **data), Signal(65, **data)
        m.d.sync += [win_on.eq(self.win_size != 0), win_end.eq(self.win_base + self.win_size),
                     below.eq(self.base < self.win_base),
                     t_end.eq(self.base + (self.beats << lab))]
        m.d.sync += self.bad.eq(win_on & (below | (t_end > win_end)))
        m.d.comb += [self.valid.eq(self.want & ~self.bad),
                     self.window_fail.eq(self.want & self.bad)]
        return m


class BurstRegs:
    """The transfer state an engine keeps for its :class:`BurstSplitter` (``base``, ``beats``,
    ``off``: registers the engine writes), wired to it; ``addr``, ``len``, ``last``, ``ready``,
    ``ready_next`` and ``moved`` are the splitter's ports."""

    def __init__(self, m: Module, splitter: BurstSplitter, name: str):
        self.base = Signal(ADDR_BITS, name=f"{name}_base")
        self.beats = Signal(24, name=f"{name}_beats")      # beats of the transfer
        self.off = Signal(24, name=f"{name}_off")          # beats already requested
        m.d.comb += [splitter.base.eq(self.base), splitter.beats.eq(self.beats),
                     splitter.off.eq(self.off)]
        self.addr, self.len, self.last = splitter.addr, splitter.len, splitter.last
        self.ready, self.moved = splitter.ready, splitter.moved
        self.ready_next = splitter.ready_next


def drive_address(m: Module, splitter: BurstSplitter, chan: dict, want) -> object:
    """Drive an AXI address channel (``chan``: ``valid``, ``ready``, ``addr``, ``len``, ``size``,
    ``burst``) with the splitter's next burst when ``want``; a transfer outside the window is
    never requested (the splitter's ``window_fail``). A request once offered stays offered,
    unchanged, until it is taken, even when ``want`` falls (an error or ABORT stops the run):
    AXI4 A3.2.1. The burst's state only moves with the handshake, so its payload is stable.
    Returns the handshake."""
    valid = kept_offered(m, splitter.valid, chan["ready"])
    m.d.comb += [
        splitter.want.eq(want),
        chan["valid"].eq(valid), chan["addr"].eq(splitter.addr),
        chan["len"].eq(splitter.len - 1), chan["size"].eq(log2(splitter.beat_bytes)),
        chan["burst"].eq(1),
    ]
    return chan["valid"] & chan["ready"]


def prepared_transfer(m: Module, words, rows, stride, lab: int, name: str):
    """A queue head's first transfer, from its fields in the two stages of
    ``hw.ctrl.dispatch.prepared_head``: ``rows`` rows of ``words`` beats, whole when the rows
    are contiguous (``stride`` = the row's bytes), else a row. Returns (beats, contiguous,
    rows), registers that hold the head's values once it is prepared."""
    # (registers of the head's fields every cycle: data, off START's reset)
    w1 = Signal(words.shape(), name=f"{name}_w1", reset_less=True)
    r1 = Signal(rows.shape(), name=f"{name}_r1", reset_less=True)
    c1 = Signal(name=f"{name}_c1")
    m.d.sync += [w1.eq(words), r1.eq(rows), c1.eq(stride == (words << lab))]
    beats, contig = Signal(24, name=f"{name}_beats2", reset_less=True), Signal(name=f"{name}_c2")
    m.d.sync += [beats.eq(Mux(c1, r1 * w1, w1)), contig.eq(c1)]
    return beats, contig, r1


def prepared_blocks(m: Module, kv, wk, wv, lab: int, kps_max: int) -> dict:
    """A ``LOAD_KV`` head's block sizes, registered in the two stages of
    ``hw.ctrl.dispatch.prepared_head`` (V's block step in a third, with the data registers;
    so no product lies on the look-ahead's paths: the load block's worst paths at both
    grades in session 10): V's row stride (K's less the words a V row lacks: the key
    factor's word, d − dv's), a K and a V block's bytes (``keys_per_step``, a power of two,
    times the rows' strides), the last block's rows (``keys − (steps − 1)·keys_per_step``)
    and the beats of a whole and of the last block of contiguous K (``wk`` words a row) and
    V (``wv``) rows. Returns ``LoadRegs`` attribute → value, loaded with the instruction's
    other data registers (while the engine is idle)."""
    kps = kv.keys_per_step
    data = {"reset_less": True}               # (registers of the head's fields every cycle)
    kl1 = Signal(range(log2(kps_max) + 1), **data)
    wk1, wv1 = Signal.like(wk, **data), Signal.like(wv, **data)
    lr1 = Signal(range(kps_max + 1), **data)
    stride1 = Signal(32, **data)
    vless1 = Signal(signed(len(wk) + 1), **data)      # wk − wv (a V row may be the wider)
    m.d.sync += [kl1.eq(kps_log2_of(kps, kps_max)), wk1.eq(wk), wv1.eq(wv),
                 lr1.eq(((kv.keys - 1) & (kps - 1)) + 1), stride1.eq(kv.row_stride),
                 vless1.eq(wk - wv)]
    # V's stride in the second stage (the words' difference, then the stride's 32-bit
    # subtract, were one path from the head: the load block's speed-8 path in session 14),
    # its block step with the engine's data registers (the third stage: they load while the
    # engine is idle, so at the latest with the start, and a V block is not the first unit)
    vstride2, kl2 = Signal(32, **data), Signal.like(kl1, **data)
    out = {k: Signal(shape, name=f"ld_prep_{k}", **data) for k, shape in (
        ("kstep", 32), ("last_rows", lr1.shape()),
        ("kfull", 24), ("klast", 24), ("vfull", 24), ("vlast", 24))}
    m.d.sync += [vstride2.eq(stride1 - (vless1 << lab)), kl2.eq(kl1),
                 out["kstep"].eq(stride1 << kl1),
                 out["last_rows"].eq(lr1), out["kfull"].eq(wk1 << kl1),
                 out["klast"].eq(lr1 * wk1), out["vfull"].eq(wv1 << kl1),
                 out["vlast"].eq(lr1 * wv1)]
    return {**out, "vstride": vstride2, "vstep": vstride2 << kl2}
