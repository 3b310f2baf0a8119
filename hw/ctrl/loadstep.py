"""The load engine's (hw/ctrl/load.py) request and its move to the next K/V block: the
request a register made a cycle ahead, and the block step's registers written through copies
of its enable. ``u`` is the engine's registers (``_LoadRegs``), ``lb`` its burst registers."""

from __future__ import annotations

from amaranth import Module, Signal

from attenio.contract.rules import next_is_v
from attenio.hw.arith import kept_copies
from attenio.hw.ctrl.bursts import BurstRegs

__all__ = ["block_copies", "block_step", "counts_after", "registered_want", "set_counts"]


def registered_want(m: Module, lb: BurstRegs, u, credit_next, rd_room_next, is_t, stop):
    """The request, a register set a cycle ahead from what the next cycle will hold (off the
    path from the unit's state to ARVALID and the handshake's enables: the routed preset's
    worst path in session 9). A request needs the splitter's ready, which is high only two
    cycles after the state last moved (a start, a request, a page's entry): the unit's
    registers, the table walk's ``is_t`` among them, then hold in the next cycle what they
    hold now. The ring credit and the tag FIFO's room change without a move: their next
    values are taken (``credit_next``, ``rd_room_next``). ``stop`` is not known ahead and
    gates the register's output. Returns (want, ``is_t`` a cycle old: the same value
    wherever a request is taken, for the handshake's branches)."""
    want_r = Signal(name="l_want_r")
    m.d.sync += want_r.eq(lb.ready_next & u.busy & credit_next & rd_room_next
                          & ~(u.need_entry & ~is_t))
    want = Signal(name="l_want")
    m.d.comb += want.eq(want_r & ~stop)
    is_t_r = Signal(name="l_is_t_r")
    m.d.sync += is_t_r.eq(is_t)
    return want, is_t_r


def counts_after(ks, vs, steps) -> tuple:
    """What follows from K/V block counts ``ks`` and ``vs``: ``ks + 1``, ``vs + 1`` and
    whether the block after a K (a V) block is a K block (``not next_is_v`` of the counts
    after it)."""
    return ks + 1, vs + 1, ~next_is_v(ks + 1, vs, steps), ~next_is_v(ks, vs + 1, steps)


def set_counts(m: Module, u, values) -> None:
    """The registers of what follows from the current K/V block counts (``u.counts()``) take
    ``values`` (:func:`counts_after` of the counts they hold from the next cycle)."""
    m.d.sync += [r.eq(v) for r, v in zip(u.counts(), values, strict=True)]


def block_copies(m: Module, lb: BurstRegs, d_block, salts) -> list[Signal]:
    """Registers of ``d_block`` (the current unit's last burst leads to the next K/V block),
    one per salt, for enables of their own. The state moves only in a cycle that sets
    ``lb.moved``, and ``d_block`` (of registers of the state) is final two cycles later; the
    next request comes three cycles after the move at the earliest (``lb.ready``). A copy
    loads in every cycle but the one after a move (a register of ``lb.moved``: the load is
    off the start's and the handshake's paths, where ``ready_next`` put it, the worst path of
    a seed-5 route in session 16), and whenever its salt is high: a stale value loaded in the
    move's own cycle is replaced two cycles later, before any request reads it."""
    moved_r = Signal(name="ld_moved_r")
    m.d.sync += moved_r.eq(lb.moved)
    return kept_copies(m, d_block, ~moved_r, salts, "ld_d_block")


def block_step(m: Module, u, lb: BurstRegs, steps, n_counts, nxt: dict) -> None:
    """The move to the next K/V block, its registers in five groups, group i taken when
    ``steps[i]`` is high (the same condition, each through a copy of its own): the K base,
    the V base, the beats and rows, the counts after the block's, and the block's counts and
    flags (the burst base is the engine's, with every request's). ``nxt``: the next block's
    values (``nks``, ``nvs``, ``next_v``, ``kbase``, ``vbase``, ``rows``, ``beats``, ``fw``,
    and ``page``: it is a K block that starts a page, so its table word comes first (the
    first page of a word), then its entry: hw.ctrl.pagewalk)."""
    page = nxt["page"]
    with m.If(steps[0]):
        m.d.sync += u.kbase.eq(nxt["kbase"])
    with m.If(steps[1]):
        m.d.sync += u.vbase.eq(nxt["vbase"])
    with m.If(steps[2]):
        m.d.sync += [u.rows.eq(nxt["rows"]), lb.beats.eq(nxt["beats"])]
        with m.If(page):
            m.d.sync += [lb.beats.eq(1), u.k_beats.eq(nxt["beats"])]
    with m.If(steps[3]):
        set_counts(m, u, n_counts)
    with m.If(steps[4]):
        m.d.sync += [u.ks.eq(nxt["nks"]), u.vs.eq(nxt["nvs"]), u.on_v.eq(nxt["next_v"]),
                     u.trow.eq(0), u.unit_first.eq(1)]
        with m.If(~nxt["next_v"]):
            m.d.sync += u.k_fw.eq(nxt["fw"])
        with m.Else():
            m.d.sync += u.v_fw.eq(nxt["fw"])
        with m.If(page):
            m.d.sync += [u.need_entry.eq(1), u.t_pre.eq(u.e_idx == 0)]
