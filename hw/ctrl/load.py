"""LoadEngine: the load queue's ``LOAD_Q`` and ``LOAD_KV`` as AXI4 read bursts, their beats
routed to the compute core's Q stream and K/V rings."""

from __future__ import annotations

from amaranth import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.base.errors import ErrorCode
from attenio.contract.program import Op
from attenio.contract.rules import PAGE_ALIGN_LOG2
from attenio.contract.timing import TIMING
from attenio.hw.ctrl.axi import ADDR_BITS, axi4_ports, log2
from attenio.hw.ctrl.bursts import (
    BurstRegs,
    BurstSplitter,
    drive_address,
    prepared_blocks,
    prepared_transfer,
)
from attenio.hw.ctrl.decode import kps_log2_of
from attenio.hw.ctrl.dispatch import engine_ports, prepared_head
from attenio.hw.ctrl.layouts import load_tag_layout, raise_error, view
from attenio.hw.ctrl.loadstep import (
    LoadRegs,
    block_copies,
    block_step,
    counts_after,
    idle_loads,
    registered_want,
    set_counts,
)
from attenio.hw.ctrl.pagewalk import (
    first_factor_beat,
    group_mask,
    page_start,
    page_start_data,
    page_walk,
    table_words,
)
from attenio.hw.layouts import kv_beat_layout, q_side_words, qcmd_layout, word_layout
from attenio.hw.streamfifo import StreamFIFO

__all__ = ["LoadEngine"]

MAX_OUTSTANDING = TIMING.max_outstanding
IDLE_COPIES = 4        # registers of lbusy for the data registers' enable (idle_loads)


class LoadEngine(wiring.Component):
    """Runs the load queue: ``LOAD_Q`` (a tile's rows, per head) and ``LOAD_KV`` (K and V blocks
    of ``keys_per_step`` rows in the order of :func:`attenio.contract.rules.kv_order`).

    A transfer is one burst sequence per unit: a head of Q rows, or a K or V block, when its
    rows are contiguous (``row_stride`` = the row's bytes), else one per row. Requests follow
    :class:`BurstSplitter` (one every ``Timing.request_gap`` cycles, at most
    ``Timing.max_outstanding`` in flight); a K/V block is requested only when the ring has
    room for it (``k_free``/``v_free`` credits), and not while the core still finishes the
    previous tile (``credits_stale``: its credits count that tile's rows). A tag FIFO tells
    the R beats where they go; rows shorter than a whole number of words have their last
    word's extra lanes zeroed.
    The instruction's push (``LOAD_Q``'s token to compute) goes out with its last beat.

    Ports
    -----
    queue : :func:`queue_signature` (``In``).
    ar*, r* : the data AXI4 read channels.
    qcmd, q, kv : the core's Q command, Q rows and K/V beats.
    k_free, v_free : the core's ring credits. credits_stale : they are the previous tile's
        (the core is past that tile's last step, before its end).
    win_base, win_size : the read window of ``LOAD_Q``'s transfers.
    kvwin_base, kvwin_size : the K/V read window: ``LOAD_KV``'s K and V blocks, pages and
        block-table words (a server's table entry pointing anywhere else is refused).
    fail, fail_code : ``TOKEN_UNDERFLOW``, ``ADDRESS_RANGE`` or ``AXI_READ``.
    idle : no read burst in flight. ended : the queue reached ``END``.
    request, beat : an AR handshake, an R handshake (counters and watchdog).
    started : an instruction started.
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        super().__init__({
            **engine_ports(),
            **axi4_ports("", cfg.axi_data_bytes * 8, write=False),
            "qcmd": Out(stream.Signature(qcmd_layout(cfg))),
            "q": Out(stream.Signature(word_layout(cfg))),
            "kv": Out(stream.Signature(kv_beat_layout(cfg))),
            "k_free": In(range(cfg.max_seq_len + 1)), "v_free": In(range(cfg.max_seq_len + 1)),
            "credits_stale": In(1),
            "win_base": In(64), "win_size": In(64),
            "kvwin_base": In(64), "kvwin_size": In(64),
            "idle": Out(1), "request": Out(1), "beat": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ab = cfg.axi_data_bytes
        lab = log2(ab)
        q = cfg.macs_per_line
        kps_max = cfg.max_keys_per_step
        ring = cfg.ring_rows

        def fail(code):
            raise_error(m, self, code)

        def words_of(d):
            return (d + (q - 1)) >> log2(q)

        load_end = Signal()
        rd_out = Signal(range(MAX_OUTSTANDING + 1))
        m.submodules.bursts = splitter = BurstSplitter(ab)
        lb = BurstRegs(m, splitter, "ld")
        u = LoadRegs(cfg)
        # the window of the instruction's transfers: K/V's for LOAD_KV (its table words too),
        # WIN for LOAD_Q. is_kv changes with the instruction's start; the splitter's window
        # registers follow one cycle later, inside the two cycles its ready stays low
        m.d.comb += [splitter.win_base.eq(Mux(u.is_kv, self.kvwin_base, self.win_base)),
                     splitter.win_size.eq(Mux(u.is_kv, self.kvwin_size, self.win_size))]
        lraw, lbusy = u.raw, u.busy
        l_is_kv, l_rows, l_trow, l_unit_first = u.is_kv, u.rows, u.trow, u.unit_first
        l_wd, l_contig, l_stride, l_h, l_hbase = u.wd, u.contig, u.stride, u.h, u.hbase
        l_b, l_steps, l_ks, l_vs, l_on_v = u.b, u.steps, u.ks, u.vs, u.on_v
        l_kbase, l_vbase, l_wk = u.kbase, u.vbase, u.wk
        kvr = view(lraw, Op.LOAD_KV)
        m.d.comb += [l_wd.eq(words_of(kvr.d)),
                     u.dv.eq(Mux(kvr.dv == 0, kvr.d, kvr.dv)), u.wv.eq(words_of(u.dv)),
                     l_wk.eq(l_wd + (kvr.key_scales & ~kvr.paged))]
        # (V's stride, K's less the words a V row lacks, comes from the head: prepared_blocks)

        lhead = self.queue.head.payload
        lop = view(lhead.insn).opcode
        l_ok, l_under = self.queue.ok, self.queue.under
        core_q = self.qcmd
        l_start = Signal()
        l_pop_end = Signal()
        l_is_q_head = lop == int(Op.LOAD_Q)
        _q_command(cfg, m, core_q.payload, lhead)
        l_prep = prepared_head(m, self.queue, "ld")
        with m.If(self.queue.head.valid & ~lbusy & ~load_end & self.go & ~self.stop):
            with m.If(lop == int(Op.END)):
                m.d.comb += l_pop_end.eq(1)
                m.d.sync += load_end.eq(1)
            # ok and underflow exclude each other; testing ok first keeps the other engines'
            # state (underflow needs "the producer has ended") off the start path
            with m.Elif(l_ok & l_prep):
                m.d.comb += core_q.valid.eq(l_is_q_head)
                m.d.comb += l_start.eq(~l_is_q_head | core_q.ready)
            with m.Elif(l_under):
                fail(ErrorCode.TOKEN_UNDERFLOW)
        m.d.comb += self.queue.start.eq(l_start)
        m.d.comb += self.queue.head.ready.eq(l_pop_end | l_start)
        wd_head = words_of(view(lhead.insn, Op.LOAD_Q).d)
        # a Q row with its own multiplier: one more word (LOAD_KV has no such field; its bit
        # is reserved there, so 0)
        wq_head = wd_head + q_side_words(cfg, view(lhead.insn, Op.LOAD_Q))
        # a K row with key_scales: one more word, its factor (V rows then lie one word closer:
        # V's stride is row_stride minus a word, so K and V are both contiguous or neither);
        # a paged cache packs them: a word of factors leads each group of rows in a page
        kv_head = view(lhead.insn, Op.LOAD_KV)
        pf_head = kv_head.key_scales & kv_head.paged
        wk_head = wd_head + (kv_head.key_scales & ~kv_head.paged)
        # keys of a K/V instruction's first block: at most keys_per_step ≤ max_keys_per_step
        # (decode refuses more), so the block's beat count is a narrow product, not a DSP
        nk0 = Signal(range(kps_max + 1))
        keys_h, kps_h = kv_head.keys, kv_head.keys_per_step
        m.d.comb += nk0.eq(Mux(keys_h < kps_h, keys_h, kps_h))
        # the head's first transfer's beats, prepared in two stages (prepared_head): a Q
        # tile's rows, or a K/V instruction's first block, whole when the rows are contiguous
        qv = view(lhead.insn, Op.LOAD_Q)
        q_beats, contig_q, _ = prepared_transfer(m, wq_head, qv.rows, qv.row_stride, lab, "ldq")
        k_beats, contig_k, nk1 = prepared_transfer(m, wk_head, nk0, kv_head.row_stride, lab,
                                                   "ldk")
        blocks = prepared_blocks(m, kv_head, wk_head, words_of(Mux(kv_head.dv == 0, kv_head.d,
                                                                    kv_head.dv)), lab, kps_max)
        steps1 = Signal.like(u.steps)
        m.d.sync += steps1.eq((keys_h + kps_h - 1) >> kps_log2_of(kps_h, kps_max))
        t_words = table_words(cfg, m, u, kv_head)
        # The instruction's data registers follow the queue's head while the engine is idle,
        # so the start only flips the control (its enable, the start's test after the head's
        # fields, was the load block's worst path at both grades): what they hold when the
        # head starts is the head's, and the engine reads none of them while idle.
        # (their enable through copies of lbusy: idle_loads)
        idle = idle_loads(m, u, l_start, [
            lraw.eq(lhead.insn), l_rows.eq(Mux(l_is_q_head, qv.rows, nk1)),
            l_contig.eq(Mux(l_is_q_head, contig_q, contig_k)),
            l_stride.eq(Mux(l_is_q_head, qv.row_stride, kv_head.row_stride)),
            l_hbase.eq(qv.addr), l_kbase.eq(kv_head.k_addr), l_vbase.eq(kv_head.v_addr),
            l_b.eq(kps_h), l_steps.eq(steps1),
            *(getattr(u, k).eq(v) for k, v in blocks.items())], IDLE_COPIES)
        with m.If(idle[-1]):
            kv_base, kv_beats = page_start_data(cfg, m, u, kv_head, k_beats, t_words)
            m.d.sync += [lb.base.eq(Mux(l_is_q_head, qv.addr, kv_base)),
                         lb.beats.eq(Mux(l_is_q_head, q_beats, kv_beats))]
        with m.If(l_start):
            m.d.sync += [lbusy.eq(1), l_trow.eq(0), l_unit_first.eq(1),
                         lb.off.eq(0), l_h.eq(0), l_ks.eq(0), l_vs.eq(0), l_on_v.eq(0),
                         l_is_kv.eq(~l_is_q_head)]
            set_counts(m, u, counts_after(0, 0, steps1))
            with m.If(~l_is_q_head):
                # (a paged first block's factor word: one more beat, added the cycle after,
                # off the start path; its page's entry comes a DRAM round trip later)
                m.d.sync += [u.k_fw.eq(pf_head), u.k_fw_add.eq(pf_head)]
                page_start(m, u, kv_head)
        first_factor_beat(m, u)
        credit_next = Signal()     # the current unit may be requested in the next cycle
        m.d.comb += credit_next.eq(~l_is_kv | ~l_unit_first
                                   | _ring_credit(self, m, Mux(l_on_v, l_vs, l_ks), l_b, l_on_v,
                                                  ring, view(lraw, Op.LOAD_KV).v_in_k))
        m.submodules.tags = tags = StreamFIFO(load_tag_layout(cfg.macs_per_line),
                                                 MAX_OUTSTANDING)
        is_t, base_set = page_walk(cfg, m, u, lb, fail, self.stop)
        rd_room_next = Signal()    # rd_out < MAX_OUTSTANDING in the next cycle (no request now)
        l_want, is_t_r = registered_want(m, lb, u, credit_next, rd_room_next, is_t, self.stop)
        with m.If(splitter.window_fail):
            fail(ErrorCode.ADDRESS_RANGE)
        ar = drive_address(m, splitter, {k: getattr(self, f"ar{k}") for k in
                                         ("valid", "ready", "addr", "len", "size", "burst")},
                           l_want)
        m.d.comb += lb.moved.eq(l_start | ar | base_set)
        instr_done = _advance(cfg, m, u, lb, ar, is_t, is_t_r)
        tag = _tag(cfg, m, u, instr_done, is_t_r, lb.off)
        m.d.comb += [tags.i.valid.eq(ar), tags.i.payload.eq(tag)]
        r, bad_beat = _read_data(self, m, tags, fail, u)
        r_burst_end = r & self.rlast
        m.d.comb += [tags.o.ready.eq(r_burst_end),
                     rd_room_next.eq(rd_out - r_burst_end < MAX_OUTSTANDING)]
        m.d.sync += rd_out.eq(rd_out + ar - r_burst_end)
        t = tags.o.payload
        with m.If(r_burst_end & t.end & t.push & ~self.stop):
            m.d.comb += self.queue.push_next.eq(1)
        m.d.comb += self.queue.quiet.eq(load_end & (rd_out == 0))
        # idle: nothing in flight, no request offered (one offered is never withdrawn) and no
        # error response waiting to be raised (a run does not end before it)
        m.d.comb += [self.idle.eq((rd_out == 0) & ~self.arvalid & ~bad_beat),
                     self.ended.eq(load_end),
                     self.request.eq(ar), self.beat.eq(r), self.started.eq(l_start)]
        return m


def _q_command(cfg: HardwareConfig, m: Module, cmd, head) -> None:
    """The Q command of the ``LOAD_Q`` at the queue's head (``head``) for the core."""
    qv = view(head.insn, Op.LOAD_Q)
    m.d.comb += [
        cmd.rows.eq(head.rh), cmd.d.eq(qv.d),
        cmd.kps_log2.eq(kps_log2_of(qv.keys_per_step, cfg.max_keys_per_step)),
        cmd.row_scales.eq(qv.row_scales),
        cmd.sinks.eq(qv.sinks if cfg.sinks_unit else 0),
        cmd.alibi.eq(qv.alibi if cfg.alibi_unit else 0),
    ]


def _advance(cfg: HardwareConfig, m: Module, u: LoadRegs, lb: BurstRegs, ar, is_t,
             is_t_r):
    """The unit after the current one, kept as registers, and the move to it with each
    request that ends a unit (next row, next head, next K/V block, or the instruction's
    end). ``is_t``: the table walk's (current), ``is_t_r``: a cycle old (the same wherever
    a request is taken). Returns ``instr_done``: the request ends the instruction."""
    kps_max = cfg.max_keys_per_step
    ab = cfg.axi_data_bytes
    # What follows the current unit, as registers: the unit changes only with a request or
    # the instruction's start, and the next request is three cycles later (lb.ready).
    # K/V: K(ks) if ks < steps and ks ≤ vs + 1, else V(vs).
    p_row_last = Signal()       # the current row is the unit's last
    # (the wide ones are data, each written every cycle from the state: off START's reset,
    # which reached 1,489 of the engine's flip-flops in session 18's netlist; the first
    # request, which reads them, comes 3 cycles after the start)
    data = {"reset_less": True}
    p_nks, p_nvs = Signal.like(u.ks, **data), Signal.like(u.vs, **data)
    p_next_v = Signal()
    p_kv_last = Signal()        # the next unit would be past the instruction's end
    p_q_last = Signal()         # the current head is the last
    p_kbase, p_kbase2, p_vbase, p_base = (Signal(ADDR_BITS, name=f"ld_next_{x}", **data)
                                          for x in ("kbase", "kbase2", "vbase", "base"))
    p_vpg, p_vlin = (Signal(ADDR_BITS, name=f"ld_next_{x}", **data) for x in ("vpg", "vlin"))
    p_vpage = Signal()          # the next V block starts a page: it lies at p_vpg
    p_nlast = Signal()          # the next block is the instruction's last (its rows: last_rows)
    p_rows = Signal(range(kps_max + 1), **data)
    p_beats = Signal.like(lb.beats, **data)
    p_hbase = Signal(ADDR_BITS, **data)
    p_rowbase = Signal(ADDR_BITS, **data)
    # two register stages: (1) which block is next, its index and addresses; (2) its
    # size, base and whether it ends the instruction (the unit waits 3 cycles: lb.ready)
    nks, nvs = Signal.like(u.ks), Signal.like(u.vs)
    m.d.comb += [nks.eq(Mux(u.on_v, u.ks, u.ks1)), nvs.eq(Mux(u.on_v, u.vs1, u.vs))]
    next_v = Signal()          # (with V in K's rows there are K blocks only)
    m.d.comb += next_v.eq(~Mux(u.on_v, u.k_v, u.k_k) & ~view(u.raw, Op.LOAD_KV).v_in_k)
    step_bytes = Mux(u.on_v, u.vstep, u.kstep)
    kv = view(u.raw, Op.LOAD_KV)
    # a paged cache: blocks per page − 1 (a block starts a page when its index & pmask
    # is 0); a V block that starts one lies at its K block's page + v_addr
    pmask = Signal(16)
    pshift = Signal(4)             # page_log2 ≥ log2(keys_per_step): the decoder's check
    # (a register: the fields are steady; the first unit changes 3 cycles after the start)
    m.d.comb += pshift.eq(kv.page_log2 - kps_log2_of(kv.keys_per_step, kps_max))
    m.d.sync += pmask.eq((Const(1, 16) << pshift) - 1)
    gmask = group_mask(cfg, m, kv)
    v_page = kv.paged & ((nvs & pmask) == 0)
    # the next V block's address: a word further after a block that read its factors' word
    v_step = step_bytes + Mux(u.v_fw, cfg.axi_data_bytes, 0)
    m.d.sync += [
        p_row_last.eq(u.trow == u.rows - 1), p_nks.eq(nks), p_nvs.eq(nvs),
        p_next_v.eq(next_v), p_nlast.eq(Mux(next_v, nvs, nks) == u.steps - 1),
        p_q_last.eq(u.h == view(u.raw, Op.LOAD_Q).heads - 1),
        p_kv_last.eq(Mux(kv.v_in_k, nks >= u.steps, next_v & (nvs >= u.steps))),
        p_kbase.eq(u.kbase + Mux(u.on_v, 0, step_bytes)),
        # the next V block's address, both ways (its page's or the last block's plus a step),
        # and the choice: a mux after the registers, not a 44-bit enable after the compare
        p_vpage.eq(v_page), p_vpg.eq((u.kpage[nvs[0]] + kv.v_addr)[:ADDR_BITS]),
        p_vlin.eq(u.vbase + Mux(u.on_v, v_step, 0)),
        p_hbase.eq(u.hbase + view(u.raw, Op.LOAD_Q).head_stride),
        p_rowbase.eq(lb.base + Mux(u.is_kv & u.on_v, u.vstride, u.stride)),
    ]
    p_wn = Signal(13)          # words of a row of the next unit (a V row has no factor)
    m.d.comb += p_wn.eq(Mux(p_next_v, u.wv, u.wk))
    m.d.comb += p_vbase.eq(Mux(p_vpage, p_vpg, p_vlin))
    # the next K block's address: a word further after a block that read its factors' word
    k_next = p_kbase + Mux(u.k_fw & ~u.on_v, ab, 0)
    fw_next = Signal()         # the next unit is a K (V) block that starts a factor group
    p_fw = Signal()
    m.d.comb += fw_next.eq(kv.paged & Mux(p_next_v, kv.value_scales & ((p_nvs & gmask) == 0),
                                          kv.key_scales & ((p_nks & gmask) == 0)))
    p_page = Signal()          # the next unit is a K block that starts a page
    page_in = Signal()
    m.d.comb += page_in.eq(kv.paged & ~p_next_v & ((p_nks & pmask) == 0))
    m.d.sync += [
        p_page.eq(page_in),
        p_kbase2.eq(k_next),       # (its factor word's step here, off the product's path)
        p_base.eq(Mux(p_next_v, p_vbase, k_next)),
        # a block's rows and beats: per instruction, prepared at the queue head (a block of
        # keys_per_step rows, or the last block's; a row's words when rows are not contiguous)
        p_rows.eq(Mux(p_nlast, u.last_rows, u.b)),
        p_beats.eq(Mux(u.contig, Mux(p_next_v, Mux(p_nlast, u.vlast, u.vfull),
                                     Mux(p_nlast, u.klast, u.kfull)), p_wn) + fw_next),
        p_fw.eq(fw_next),
    ]
    # What a request does, decided a stage ahead (the handshake only selects: its enables
    # were the routed preset's worst path): the unit ends with its last burst, and the
    # instruction with it; and the next block's counts. Registers of registers of the state,
    # which holds for the two cycles before a request (lb.ready), so they are the state's.
    d_unit, d_instr = Signal(name="ld_d_unit"), Signal(name="ld_d_instr")
    d_block = Signal(name="ld_d_block_in")   # ... and the next K/V block follows it
    u_end = (u.contig | p_row_last) & ~is_t
    end_kv = u_end & u.is_kv
    m.d.sync += [d_unit.eq(u_end), d_instr.eq(u_end & Mux(u.is_kv, p_kv_last, p_q_last))]
    m.d.comb += d_block.eq(end_kv & ~p_kv_last)     # (registered in block_copies)
    n_counts = [Signal.like(x, name=f"ld_next_{x.name}", **data) for x in u.counts()]
    # (counts_after's compares on the counts as they are: ks + 1 < steps as ks < steps − 1,
    # ks ≤ vs + 2 against vs + 2 made with the counts; the adds, then the compares, were the
    # load block's speed-6 path in session 16)
    steps_m1 = Signal(signed(26), name="ld_steps_m1", **data)
    p_nvs2 = Signal(len(u.vs) + 1, name="ld_next_nvs2", **data)
    m.d.sync += [steps_m1.eq(u.steps - 1), p_nvs2.eq(nvs + 2)]
    m.d.sync += [r.eq(v) for r, v in zip(n_counts, (
        p_nks + 1, p_nvs + 1, (p_nks < steps_m1) & (p_nks <= p_nvs),
        (p_nks < u.steps) & (p_nks <= p_nvs2)), strict=True)]
    unit_done = Signal()
    instr_done = Signal()
    m.d.comb += [unit_done.eq(lb.last & d_unit), instr_done.eq(lb.last & d_instr)]
    with m.If(ar):
        m.d.sync += [lb.off.eq(lb.off + lb.len), u.unit_first.eq(0)]
        with m.If(is_t_r):                         # a table word: into slot t_req mod 2
            m.d.sync += [lb.off.eq(0), u.t_req.eq(u.t_req + 1), u.t_pre.eq(u.t_pre - 1),
                         u.t_addr.eq(u.t_addr + ab), u.slot_ok[u.t_req[0]].eq(0)]
        with m.Elif(lb.last):
            m.d.sync += lb.off.eq(0)
            with m.If(instr_done):
                m.d.sync += u.busy.eq(0)
                m.d.comb += u.done.eq(1)
            with m.Elif(~unit_done):            # next row of the unit
                m.d.sync += u.trow.eq(u.trow + 1)
            with m.Elif(~u.is_kv):                # next head
                m.d.sync += [u.h.eq(u.h + 1), u.hbase.eq(p_hbase),
                             u.trow.eq(0), u.unit_first.eq(1)]
    # The burst base after a request that ends a transfer (a table word, a unit's last burst),
    # whichever the case: the next table word's, row's, head's or K/V block's (its table
    # word's where it starts a page), prepared in registers a stage ahead from the values the
    # cases' registers take (d_unit's, the page's, is_t), so the handshake only enables one
    # value (its six-way select after the handshake was the load block's path at both grades,
    # session 16). After the instruction's last burst it is not read: an idle engine loads the
    # next head's.
    other_base = Signal(ADDR_BITS, name="ld_other_base", **data)
    use_pbase = Signal(name="ld_use_pbase")
    m.d.sync += [other_base.eq(Mux(is_t, u.t_addr + ab,
                                   Mux(~(u.contig | p_row_last), p_rowbase,
                                       Mux(~u.is_kv, p_hbase, u.t_addr)))),
                 use_pbase.eq(~is_t & (u.contig | p_row_last) & u.is_kv & ~page_in)]
    with m.If(ar & (is_t_r | lb.last)):
        m.d.sync += lb.base.eq(Mux(use_pbase, p_base, other_base))
    # the next K/V block (the chain's remaining case: a K/V unit's last burst, not the
    # instruction's), from d_block registered a stage ahead (its enables were a chain of the
    # handshake's conditions, the load block's speed-6 path). Its registers (about 290
    # bits) take it in five groups, each enabled through a copy of d_block of its own: one
    # enable to all of them was the routed preset's worst path (session 15: the handshake →
    # 6.7 ns of routing to the base's bit 24). ``block_step`` writes them.
    salts = [p_kbase2[0], p_vbase[0], p_beats[0], p_nks[0], p_nvs[0]]
    steps = [ar & lb.last & c for c in block_copies(m, lb, d_block, salts)]
    block_step(m, u, lb, steps, n_counts, {
        "nks": p_nks, "nvs": p_nvs, "next_v": p_next_v, "kbase": p_kbase2, "vbase": p_vbase,
        "rows": p_rows, "beats": p_beats, "fw": p_fw, "page": p_page})
    return instr_done


def _ring_credit(eng: LoadEngine, m: Module, cur_s, l_b, l_on_v, ring: int, v_in_k):
    """The current K/V block may be requested in the next cycle: block s of b keys waits
    until s·b + b ≤ freed + ring. The need is a register (it depends on the unit only); the
    compare against the credits is made this cycle for the next one's request (which the
    engine registers), so the credits a request sees are a cycle old (Timing.credit_latency):
    they only grow within a tile and are held stale across a tile's end, so an old compare is
    never wrongly true, and the next request comes 3 cycles after a unit changes, by which
    time the need is the new unit's."""
    need = Signal(signed(28))
    m.d.sync += need.eq(cur_s * l_b + l_b - ring)
    # with V in K's rows a K block fills V's slots too: it waits for both rings' credits
    return ((need <= Mux(l_on_v, eng.v_free, eng.k_free))
            & (~v_in_k | (need <= eng.v_free)) & ~eng.credits_stale)


def _tag(cfg: HardwareConfig, m: Module, u: LoadRegs, instr_done, is_t, lb_off):
    """A burst's tag: where its beats go and what its last beat means. Words of a row (R
    beats count rows by it): a Q row with its multiplier or a K row with key_scales has
    one more, a V row has V's head dim's; ``mask`` the lanes kept of the row's last data word. A
    block-table word (``is_t``) goes to the slot ``t_req mod 2``, one word a "row"."""
    lraw, l_is_kv, l_on_v, l_wd, slot = u.raw, u.is_kv, u.on_v, u.wd, u.t_req[0]
    kv = view(lraw, Op.LOAD_KV)
    tag_in = Signal(load_tag_layout(cfg.macs_per_line))
    lq = log2(cfg.macs_per_line)
    # A row's last word and last data word, and that word's lanes, for each kind of unit:
    # registers of the instruction's fields (steady while it runs; its first request comes
    # three cycles after its start), so a request only selects them (a K row with key_scales
    # ends with its factor's word, ``ksc``).
    ksc = kv.key_scales & ~kv.paged
    k_wd1, k_dl, v_wd1, q_wd1 = (Signal(12, name=f"ld_tag_{x}") for x in ("kwd1", "kdl", "vwd1",
                                                                         "qwd1"))
    q = cfg.macs_per_line
    k_mask, v_mask = Signal(q, name="ld_tag_kmask"), Signal(q, name="ld_tag_vmask")
    k_lanes_r, v_lanes_r = Signal(8, name="ld_tag_klanes"), Signal(8, name="ld_tag_vlanes")
    k_lanes = view(lraw, Op.LOAD_KV).d - ((l_wd - 1) << lq)
    v_lanes = u.dv - ((u.wv - 1) << lq)
    # the masks a stage after their lane counts (the instruction register → the V mask was the
    # load block's speed-8 path): the instruction register is loaded at the latest with the
    # start, the counts a cycle later, the masks the next: ready for the first request, three
    # cycles after the start
    # (the row's words likewise: registered, then less one; the words' add, then the
    # subtracts, were the load block's speed-6 path in session 14)
    wd_r, wv_r, wq_r = (Signal(13, name=f"ld_tag_{x}") for x in ("wd", "wv", "wq"))
    ksc_r = Signal(name="ld_tag_ksc")
    m.d.sync += [wd_r.eq(l_wd), wv_r.eq(u.wv), ksc_r.eq(ksc),
                 wq_r.eq(l_wd + q_side_words(cfg, view(lraw, Op.LOAD_Q)))]
    m.d.sync += [k_lanes_r.eq(k_lanes), v_lanes_r.eq(v_lanes), k_wd1.eq(wd_r + ksc_r - 1),
                 k_dl.eq(wd_r - 1), v_wd1.eq(wv_r - 1), q_wd1.eq(wq_r - 1),
                 *(k_mask[lane].eq(lane < k_lanes_r) for lane in range(q)),
                 *(v_mask[lane].eq(lane < v_lanes_r) for lane in range(q))]
    sc = Signal()
    m.d.comb += sc.eq(l_is_kv & ~l_on_v & ksc & ~is_t)
    m.d.comb += [
        tag_in.kv.eq(l_is_kv & ~is_t), tag_in.v.eq(l_on_v),
        tag_in.wd1.eq(Mux(is_t, 0, Mux(l_is_kv, Mux(l_on_v, v_wd1, k_wd1), q_wd1))),
        tag_in.dl.eq(Mux(is_t, 0, Mux(l_is_kv, Mux(l_on_v, v_wd1, k_dl), q_wd1))),
        tag_in.mask.eq(Mux(l_on_v, v_mask, k_mask)),
        tag_in.sc.eq(sc),
        # a paged cache's packed factors: the unit's first burst starts with their word
        tag_in.pf.eq(l_is_kv & Mux(l_on_v, u.v_fw, u.k_fw) & (lb_off == 0) & ~is_t),
        tag_in.pk.eq(l_is_kv & Mux(l_on_v, kv.value_scales, kv.key_scales) & kv.paged & ~is_t),
        tag_in.vk.eq(l_is_kv & ~l_on_v & view(lraw, Op.LOAD_KV).v_in_k & ~is_t),
        tag_in.wv.eq(u.wv), tag_in.vlanes.eq(v_lanes_r),
        tag_in.t.eq(is_t), tag_in.slot.eq(slot),
        tag_in.end.eq(instr_done),
        tag_in.push.eq(view(lraw).push_next),
    ]
    return tag_in


def _read_data(eng: LoadEngine, m: Module, tags, fail, u: LoadRegs):
    """R beats to the core: the oldest burst's tag says Q or K/V, which ring, the row's
    words and its last word's lanes (the rest zeroed). Returns the R handshake and the error
    response's register (high the cycle after a beat with one)."""
    cfg = eng.cfg
    q = cfg.macs_per_line
    t = tags.o.payload
    t_kv, t_v, t_end = t.kv, t.v, t.end
    rw = Signal(12)
    row_last = Signal()
    data_last = Signal()       # the row's last data word (before a K/V row's factor word)
    r_first = Signal(init=1)   # the next beat is its burst's first
    pw = Signal()              # a word of a paged cache's K factors (a burst's first)
    m.d.comb += [pw.eq(t.pf & r_first),
                 row_last.eq((rw == t.wd1) & ~pw), data_last.eq((rw == t.dl) & ~pw)]
    # a K beat's word is V's too (``rw < wv``, LOAD_KV.v_in_k) from registers made with the
    # beat before: a row's first word always is (wv ≥ 1), a later one if the word before it
    # was not V's last (a row split over bursts keeps its instruction's wv). The compare on
    # the tag's wv was on the path to RREADY through the ring's room (the routed preset's
    # worst path in session 16)
    v_first, v_more = Signal(init=1), Signal()
    vw = Signal()
    m.d.comb += vw.eq(t.vk & (v_first | v_more))
    beat_ok = eng.rvalid & tags.o.valid
    m.d.comb += [
        eng.q.valid.eq(beat_ok & ~eng.stop & ~t_kv & ~t.t),
        eng.kv.valid.eq(beat_ok & ~eng.stop & t_kv),
        eng.kv.payload.v.eq(t_v), eng.kv.payload.last.eq(row_last),
        eng.kv.payload.sc.eq(t.sc & row_last),
        eng.kv.payload.pw.eq(pw), eng.kv.payload.pk.eq(t.pk & row_last),
        eng.kv.payload.end.eq(t_end & eng.rlast),
        eng.kv.payload.vw.eq(vw),
        eng.kv.payload.vlast.eq(t.vk & (rw == t.wv - 1)),
        eng.kv.payload.vlanes.eq(t.vlanes),
        eng.rready.eq(tags.o.valid & (eng.stop | t.t
                                       | Mux(t_kv, eng.kv.ready, eng.q.ready))),
    ]
    for lane in range(q):
        elem = eng.rdata[lane * cfg.data_bits:(lane + 1) * cfg.data_bits]
        m.d.comb += [eng.q.payload[lane].eq(elem),
                     eng.kv.payload.data[lane].eq(
                         Mux(~data_last | t.mask[lane], elem, 0))]
    r = eng.rvalid & eng.rready
    with m.If(r & t.t):                          # a block-table word
        k_addr = view(u.raw, Op.LOAD_KV).k_addr   # (the instruction's: it waits for its words)
        m.d.sync += [u.slots[t.slot].eq(eng.rdata), u.slot_ok[t.slot].eq(1),
                     u.slot_kaddr[t.slot].eq(Cat(
                         ((eng.rdata.word_select(i, 32) << PAGE_ALIGN_LOG2) + k_addr)
                         [:ADDR_BITS] for i in range(u.epb)))]
    with m.If(r):
        m.d.sync += r_first.eq(eng.rlast)
        with m.If(~pw):
            m.d.sync += [rw.eq(Mux(row_last, 0, rw + 1)), v_first.eq(row_last),
                         v_more.eq(rw + 1 < t.wv)]
    # an error response raises AXI_READ the cycle after its beat, from a register: rready (the
    # tag's ring room) → the response → the engine's error and stop registers was the routed
    # preset's worst path (session 15); the beat was taken as any other, the engine stops a
    # cycle later, its bursts completed as on every error
    bad_beat = Signal()
    m.d.sync += bad_beat.eq(r & (eng.rresp != 0))
    with m.If(bad_beat):
        fail(ErrorCode.AXI_READ)
    return r, bad_beat
