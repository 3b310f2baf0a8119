"""A paged ``LOAD_KV``'s walk of its block table in the load engine (hw/ctrl/load.py): the
table words it requests and the entry each page-starting K block takes as its address, in the
order ``contract.rules.PageWalk`` states for the schedule generator. ``u`` is the engine's
registers (``LoadRegs``), ``lb`` its burst registers."""

from __future__ import annotations

from amaranth import Const, Module, Mux, Signal

from attenio.base.config import HardwareConfig
from attenio.base.errors import ErrorCode
from attenio.contract.program import Op
from attenio.contract.rules import PAGE_ALIGN_LOG2
from attenio.hw.ctrl.axi import ADDR_BITS, log2
from attenio.hw.ctrl.bursts import BurstRegs
from attenio.hw.ctrl.decode import kps_log2_of
from attenio.hw.ctrl.layouts import view

__all__ = ["page_start", "page_start_data", "page_walk", "group_mask", "first_factor_beat",
           "table_words"]


def table_words(cfg: HardwareConfig, m: Module, u, kv_head) -> Signal:
    """The block-table words a paged ``LOAD_KV`` at the queue's head reads, prepared from
    its fields in two stages (``prepared_head``): its pages, then the words from the one
    holding ``table`` that hold their entries."""
    lab = log2(cfg.axi_data_bytes)
    # the keys rounded up to a page (stage 1), its pages (stage 2: the shift after the add
    # was the load block's speed-6 path in session 14), the words (with the engine's data
    # registers: they load while it is idle, so at the latest with the start, and the
    # first table word's compare reads them a cycle after it)
    keys1 = Signal(26, name="l_pkeys1")
    plog1 = Signal.like(kv_head.page_log2, name="l_plog1")
    pages2 = Signal(25, name="l_pages2")
    m.d.sync += [keys1.eq(kv_head.keys + (Const(1, 16) << kv_head.page_log2) - 1),
                 plog1.eq(kv_head.page_log2), pages2.eq(keys1 >> plog1)]
    return ((kv_head.table[2:lab] if lab > 2 else 0) + pages2 + u.epb - 1) >> log2(u.epb)


def page_start(m: Module, u, kv_head) -> None:
    """A ``LOAD_KV`` starts: a paged one first requests table words 0 and 1 (from the
    word holding ``table``), then waits for its first page (contract.rules.PageWalk). The
    walk's control, set at the start; its data, :func:`page_start_data`."""
    paged = kv_head.paged
    m.d.sync += [u.t_req.eq(0), u.t_pre.eq(Mux(paged, 2, 0)), u.need_entry.eq(paged),
                 u.e_word.eq(0), u.slot_ok[0].eq(0), u.slot_ok[1].eq(0)]


def page_start_data(cfg: HardwareConfig, m: Module, u, kv_head, k_beats, t_words):
    """The data of the ``LOAD_KV`` at the queue's head, loaded while the engine is idle
    (hw.ctrl.load): the table's address, its first entry's index and words (``t_words``,
    :func:`table_words`) and the first block's beats (``k_beats``). Returns its first
    transfer's (base, beats): a paged one's first table word, else its first K block."""
    lab = log2(cfg.axi_data_bytes)
    paged = kv_head.paged
    tbase = Signal(ADDR_BITS)
    m.d.comb += tbase.eq(kv_head.table & ~((1 << lab) - 1))
    e0 = kv_head.table[2:lab] if lab > 2 else 0
    m.d.sync += [u.t_addr.eq(tbase), u.e_idx.eq(e0), u.k_beats.eq(k_beats),
                 u.t_words.eq(t_words)]
    return Mux(paged, tbase, kv_head.k_addr), Mux(paged, 1, k_beats)


def page_walk(cfg: HardwareConfig, m: Module, u, lb: BurstRegs, fail, stop):
    """A paged ``LOAD_KV``'s block table: ``is_t``, the current request is a table word
    (before a K block that starts a page: words 0 and 1 before ``K(0)``, word j + 1
    before the first page of word j); ``base_set``, a K block that starts a page takes
    its entry (once its word is in) as its address, ``entry·64 + k_addr``, and keeps the
    page for its V block (``v_addr`` from the same entry). Returns (is_t, base_set)."""
    ab = cfg.axi_data_bytes
    lab = log2(ab)
    kv = view(u.raw, Op.LOAD_KV)
    words = u.t_words     # the table's word count, set with the start (table_words)
    # whether table words are left, a register of the cycle before (the word compare off the
    # request path): it lags the state by a cycle only after a start (the first request is 3
    # cycles later, and no entry can be taken then: the slots were emptied) or after a table
    # word's request (requests wait 2 cycles for lb.ready; an entry is taken only with t_pre
    # = 0, and t_pre stays above 0 after a table request only for the start's first word,
    # whose slots are empty)
    t_more = Signal(name="l_t_more")
    m.d.sync += t_more.eq(u.busy & u.is_kv & kv.paged & (u.t_req < words))
    is_t = Signal()
    m.d.comb += is_t.eq(t_more & ~u.on_v & (u.t_pre != 0))
    e_sel = u.e_idx if u.epb > 1 else 0
    entry = Signal(32)
    m.d.comb += entry.eq(u.slots[u.e_word].word_select(e_sel, 32))
    page = Signal(ADDR_BITS)
    m.d.comb += page.eq(entry << PAGE_ALIGN_LOG2)
    base_set = Signal()
    m.d.comb += base_set.eq(u.busy & u.need_entry & ~is_t & u.slot_ok[u.e_word] & ~stop)
    with m.If(base_set):
        # the entry's K address, added as its word arrived (``slot_kaddr``, hw.ctrl.load's
        # read side): the base's path is a select of registers (it was the entry's select,
        # then the page's adder: the load block's speed-6 path in session 12)
        kaddr = u.slot_kaddr[u.e_word].word_select(e_sel, ADDR_BITS)
        m.d.sync += [lb.base.eq(kaddr), u.kbase.eq(kaddr), u.kpage[u.ks[0]].eq(page),
                     lb.beats.eq(u.k_beats), lb.off.eq(0), u.need_entry.eq(0)]
        if u.epb > 1:
            m.d.sync += u.e_idx.eq(u.e_idx + 1)
            with m.If(u.e_idx == u.epb - 1):
                m.d.sync += u.e_word.eq(~u.e_word)
        else:
            m.d.sync += u.e_word.eq(~u.e_word)
        if lab > PAGE_ALIGN_LOG2:       # a page must start on an AXI word
            with m.If(entry[:lab - PAGE_ALIGN_LOG2] != 0):
                fail(ErrorCode.ADDRESS_RANGE)
    return is_t, base_set


def group_mask(cfg: HardwareConfig, m: Module, kv) -> Signal:
    """A paged cache's K factors (``key_scales``): K blocks per factor group − 1 (a group of
    ``min(factors_per_word, page)`` rows, led by their word, which the block that starts the
    group reads first: block s does where ``s & mask`` is 0). ``keys_per_step`` is at most the
    group (the decoder's ``page_factors``)."""
    flog = log2(cfg.factors_per_word)
    gshift = Signal(4)
    kps_log2 = kps_log2_of(kv.keys_per_step, cfg.max_keys_per_step)
    grp_log2 = Mux(kv.page_log2 < flog, kv.page_log2, flog) if flog else 0
    m.d.comb += gshift.eq(grp_log2 - kps_log2)
    gmask = Signal(16)          # a register, as the page's mask (the fields are steady)
    m.d.sync += gmask.eq((Const(1, 16) << gshift) - 1)
    return gmask


def first_factor_beat(m: Module, u) -> None:
    """A paged ``LOAD_KV``'s first block starts a factor group: its beat count, set at the
    start, takes the group's word a cycle later (off the start path; the block waits for its
    page's entry, a DRAM round trip)."""
    with m.If(u.k_fw_add):
        m.d.sync += [u.k_beats.eq(u.k_beats + 1), u.k_fw_add.eq(0)]
