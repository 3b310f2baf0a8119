"""The load engine's (hw/ctrl/load.py) registers (``LoadRegs``), its data registers' loads
while idle (through copies of its busy register), its request (a register made a cycle
ahead) and its move to the next K/V block (the block step's registers written through copies
of its enable). ``u`` is the engine's registers, ``lb`` its burst registers."""

from __future__ import annotations

from amaranth import Array, Module, Signal

from attenio.base.config import HardwareConfig
from attenio.contract.program import INSTR_BITS
from attenio.contract.rules import ENTRY_BYTES, next_is_v
from attenio.hw.arith import kept_copies
from attenio.hw.ctrl.axi import ADDR_BITS, log2
from attenio.hw.ctrl.bursts import BurstRegs

__all__ = ["LoadRegs", "block_copies", "block_step", "counts_after", "idle_loads",
           "registered_want", "set_counts"]


class LoadRegs:
    """The load engine's registers: the instruction in flight and its current unit (a head of
    Q rows, a K or V block, or one row of either when rows are not contiguous). Its data
    (``data``: loaded while idle, or written before they are read) are off START's reset,
    whose net router2 fought over in session 17's routes (docs/fpga.md)."""

    def __init__(self, cfg: HardwareConfig):
        data = {"reset_less": True}
        self.raw = Signal(INSTR_BITS, name="lraw", **data)
        self.busy = Signal(name="lbusy")
        self.done = Signal(name="l_done")        # a request ends the instruction: busy falls
        self.is_kv = Signal(name="l_is_kv")
        self.rows = Signal(24, name="l_rows", **data)    # rows of the unit (Q's; a K/V block's)
        self.trow = Signal(16, name="l_trow")    # row inside the unit (row-by-row transfers)
        self.unit_first = Signal(name="l_unit_first")
        self.wd = Signal(12, name="l_wd")        # words of a row's data (Q, K)
        self.dv = Signal(12, name="l_dv")        # V's head dim (LOAD_KV.dv, or d where 0)
        self.wv = Signal(12, name="l_wv")        # words of a V row
        self.contig = Signal(name="l_contig")
        self.stride = Signal(32, name="l_stride", **data)
        # Q: heads
        self.h = Signal(8, name="l_h")
        self.hbase = Signal(ADDR_BITS, name="l_hbase", **data)
        # K/V: steps
        self.b = Signal(range(cfg.max_keys_per_step + 1), name="l_b", **data)
        self.steps = Signal(25, name="l_steps", **data)
        self.ks = Signal(25, name="l_ks")
        self.vs = Signal(25, name="l_vs")
        # ks + 1, vs + 1, and whether a K block follows when the current unit is K (k_k) or
        # V (k_v): set with ks and vs (contract.rules.next_is_v), so the next unit's choice
        # is a mux of registers, not adds and compares of the counts
        self.ks1 = Signal(25, name="l_ks1")
        self.vs1 = Signal(25, name="l_vs1")
        self.k_k = Signal(name="l_k_k")
        self.k_v = Signal(name="l_k_v")
        self.kbase = Signal(ADDR_BITS, name="l_kbase", **data)
        self.vbase = Signal(ADDR_BITS, name="l_vbase", **data)
        self.on_v = Signal(name="l_on_v")        # the current unit is a V block
        self.wk = Signal(13, name="l_wk")        # words of a K row in DRAM (key_scales: one more)
        self.k_fw = Signal(name="l_k_fw")        # the last K block starts with its factors' word
        self.k_fw_add = Signal(name="l_k_fw_add")  # the first block's count still lacks it
        self.v_fw = Signal(name="l_v_fw")        # the last V block starts with its factors' word
        # V's row stride: K's less the words a V row lacks (key_scales' word, d − dv's)
        self.vstride = Signal(32, name="l_vstride", **data)
        # a block's sizes, from the queue head (hw.ctrl.bursts.prepared_blocks): a K and a V
        # block's bytes, the last block's rows, and the beats of a whole and of the last K and
        # V block
        self.kstep = Signal(32, name="l_kstep", **data)
        self.vstep = Signal(32, name="l_vstep", **data)
        self.last_rows = Signal(range(cfg.max_keys_per_step + 1), name="l_last_rows", **data)
        self.kfull, self.klast, self.vfull, self.vlast = (
            Signal(24, name=f"l_{x}", **data) for x in ("kfull", "klast", "vfull", "vlast"))
        # a paged cache (contract.rules.PageWalk): the block table's words in two slots
        self.t_req = Signal(25, name="l_t_req")      # table words requested
        self.t_addr = Signal(ADDR_BITS, name="l_t_addr", **data)   # the next word's address
        self.t_pre = Signal(2, name="l_t_pre")       # words to request before this K block
        self.need_entry = Signal(name="l_need_entry")  # this K block waits for its page
        self.k_beats = Signal(24, name="l_k_beats", **data)  # its beats, set with its page
        ab = cfg.axi_data_bytes
        self.epb = max(1, ab // ENTRY_BYTES)
        self.t_words = Signal(25, name="l_t_words", **data)    # a paged table's words
        self.e_idx = Signal(max(1, log2(self.epb)), name="l_e_idx")  # next page's entry
        self.e_word = Signal(name="l_e_word")        # ... in the word of this slot
        self.slots = Array(Signal(ab * 8, name=f"l_slot{i}", **data) for i in range(2))
        self.slot_ok = Array(Signal(name=f"l_slot_ok{i}") for i in range(2))
        self.kpage = Array(Signal(ADDR_BITS, name=f"l_kpage{i}", **data)
                           for i in range(2))
        # each slot's entries as K addresses (entry·64 + k_addr), added as the word arrives
        self.slot_kaddr = Array(Signal(self.epb * ADDR_BITS, name=f"l_slot_kaddr{i}",
                                       **data) for i in range(2))

    def counts(self) -> tuple:
        """What follows from the K/V block counts: ``ks1``, ``vs1``, ``k_k``, ``k_v``."""
        return self.ks1, self.vs1, self.k_k, self.k_v


def idle_loads(m: Module, u: LoadRegs, start, loads: list, copies: int) -> list[Signal]:
    """The data registers' loads while the engine is idle (``loads``: assignments), split
    over ``copies`` registers of ``u.busy`` (set by ``start``, cleared by ``u.done``, as
    ``u.busy`` is), about the same number of bits each: ``u.busy`` alone was the enable of
    355 flip-flops (498 loads), a net router2 fought over in session 17's routes. Each copy's
    input holds its own output, so synthesis keeps them apart (equal inputs would be merged),
    and each equals ``u.busy`` in every cycle. Returns the copies' idle enables (``~copy``),
    the last one for loads the caller adds itself."""
    busy = [Signal(name=f"lbusy_{k}") for k in range(copies)]
    for b in busy:
        m.d.sync += b.eq((b | start) & ~u.done)
    bits = [0] * copies
    for st in sorted(loads, key=lambda s: -len(s.lhs)):
        k = bits.index(min(bits))
        bits[k] += len(st.lhs)
        with m.If(~busy[k]):
            m.d.sync += st
    return [~b for b in busy]


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
