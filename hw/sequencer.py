"""StepSequencer: the order and length of a tile's Q Kᵀ and P V steps and their issue."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.contract.timing import timing_for
from attenio.hw.arith import delay, shift_add_product

__all__ = ["StepSequencer", "COUNTER_BITS", "phase0_end"]

COUNTER_BITS = 40


def window_reach(u, sh, groups):
    """One past the last row group (of ``2**sh`` positions) a window's key reaches when it is
    seen up to position u (u = key − q_pos − win_diag), at least one and at most ``groups``
    (contract.rules.groups_seen_to)."""
    g_raw = (u >> sh) + 1
    return Mux(u < 0, 1, Mux(g_raw < groups, g_raw, groups))


def phase0_end(m: Module, cfg: HardwareConfig, cm, groups, skip, g_hi):
    """One past the last row group a tile's phase 0 issues, from its ``COMPUTE`` (``cm``, as
    the core takes it; the core registers it with the command, and the sequencer's phase 0
    takes its ops from it the cycle after): ``g_hi`` (every group, or a selected part's), or,
    in a tile of one part whose window starts its groups, those its key 0 reaches, seen up to
    position −(q_pos + win_diag) (contract.rules.groups_seen_to with ``starts``), at least
    one. ``groups``: the tile's row groups; ``skip``: it skips row groups at all."""
    lp = cfg.mac_lines.bit_length() - 1
    u0 = Signal(signed(27), name="seq_u0")
    sh0 = Signal(range(lp + 1), name="seq_sh0")
    m.d.comb += [u0.eq(-(cm.q_pos + cm.win_diag)), sh0.eq(lp - cm.hlog)]
    return Mux(skip & cm.window & ~cm.more & ~cm.cont, window_reach(u0, sh0, groups), g_hi)


class StepSequencer(wiring.Component):
    """Phases ``QK(0), QK(1), PV(0), QK(2), PV(1), …, PV(steps−1)`` of a tile of ``keys`` keys
    in steps of ``b = 2**blog`` keys (``steps = ⌈keys/b⌉``; step st covers keys st·b …
    ``kend``). Each phase issues ``ops`` (row group ``g``, word ``w``) pairs, one per cycle
    (``words`` a row; a P V phase ``ops_v`` and ``words_v``, V's head dim), and lasts
    ``plen = max(ops, Timing.min_phase)`` cycles; it may start the cycle after its
    keys are in the ring (``k_written``/``v_written`` ≥ ``kend``) and, for P V, step st's
    softmax is written (``exp_done`` > st): the compare is a register
    (``Timing.ring_ready_latency``). ``step_end`` pulses in a phase's last cycle.

    The phase's fields (``is_qk``, ``st``, ``kbase``, ``kend``) are registers: while not
    ``running`` they are phase 0's, from the command; at a step's end those of the next phase,
    computed in two register stages (a phase lasts ≥ ``min_phase`` cycles). ``clear`` (the
    tile's end) returns it to phase 0.

    Counters (cumulative): ``pe_busy`` (issuing), ``pe_wait_kv`` (a phase waits for its K/V
    rows), ``pe_wait_exp`` (for the softmax), ``pe_pad`` (padding a short phase).
    """

    def __init__(self, cfg: HardwareConfig):
        self.cfg = cfg
        gmax = cfg.row_groups
        wmax = cfg.words_per_row
        keys = range(cfg.max_seq_len + 1)
        lkmax = cfg.max_keys_per_step.bit_length() - 1
        # phase 0's length (a register of the sequencer's own; not a port)
        self.min_phase = min_phase = timing_for(cfg).min_phase
        self.plen0 = Signal(range(max(gmax * wmax, min_phase) + 1), name="plen0")
        super().__init__({
            "running": In(1), "clear": In(1),
            "keys": In(keys), "blog": In(range(lkmax + 1)),
            # a Q Kᵀ step's (row group, word) pairs and words a row; a P V step's (V's head dim)
            "ops": In(range(gmax * wmax + 1)), "words": In(range(wmax + 1)),
            "ops_v": In(range(gmax * wmax + 1)), "words_v": In(range(wmax + 1)),
            # causal row-group skipping: on, the tile's groups, and −(q_pos + diag) (a step's
            # first key k is seen by positions ≥ k − q_pos − diag); a window's (``skip_hi``),
            # and −(q_pos + win_diag) (key k is seen by positions ≤ k − q_pos − win_diag);
            # ``hlog``: a row group holds mac_lines >> hlog positions (COMPUTE.head_pos)
            "skip": In(1), "groups": In(range(gmax + 1)), "t0": In(signed(26)),
            "skip_hi": In(1), "tw0": In(signed(26)),
            # the window's cut applies from step 0: each row group starts (m, ℓ and O from
            # their reset) at the first step that issues it (a tile of one part), where
            # otherwise every group starts at step 0
            "win_starts": In(1),
            "hlog": In(range(max(2, cfg.mac_lines.bit_length()))),
            # a selected part's row groups [g_lo, g_hi) (COMPUTE.select; 0 and groups else):
            # every phase issues those alone (no mask skips with it)
            "g_lo": In(range(gmax + 1)), "g_hi": In(range(gmax + 1)),
            # one past phase 0's last group: ``g_hi``, or where a window that starts its groups
            # (``win_starts``) reaches with key 0 (the core's register, from the command)
            "g_hi0": In(range(gmax + 1)),
            "k_written": In(keys), "v_written": In(keys), "exp_done": In(keys),
            "is_qk": Out(1), "st": Out(keys), "kbase": Out(keys), "kend": Out(keys),
            "steps_left": Out(1), "active": Out(1), "issue": Out(1), "step_end": Out(1),
            "g": Out(range(gmax + 1)), "w": Out(range(wmax + 1)),
            # the issue's row group starts at this step (its first): groups from ``gnew`` on
            "new": Out(1),
            # the issue is the phase's last (its last group's last word)
            "last_op": Out(1),
            **{n: Out(COUNTER_BITS) for n in ("pe_busy", "pe_wait_kv", "pe_wait_exp", "pe_pad")},
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        keys, blog, ops, words = self.keys, self.blog, self.ops, self.words
        plen = self.plen0
        k_wr_n, v_wr_n, exp_done = self.k_written, self.v_written, self.exp_done
        running = self.running
        lp = cfg.mac_lines.bit_length() - 1
        gmax = cfg.row_groups
        g, w = self.g, self.w
        is_qk, st, kbase, kend = self.is_qk, self.st, self.kbase, self.kend
        steps = Signal(range(cfg.max_seq_len + 1))
        bmask = Signal(range(cfg.mac_lines + 1))
        m.d.comb += bmask.eq((1 << blog) - 1)
        m.d.comb += steps.eq((keys + bmask) >> blog)
        ph = Signal(range(2 * cfg.max_seq_len + 1))
        cnt = Signal.like(plen)
        last_ph = Signal()
        more = Signal()                                 # ph is a step of the tile
        step_end = self.step_end

        fields = (last_ph, is_qk, st, kbase, kend, more)
        nfields = [Signal.like(f_, name=f"next_{f_.name}") for f_ in fields]
        steps_r = Signal.like(steps)
        last_r = Signal(range(2 * cfg.max_seq_len + 1))
        m.d.sync += [steps_r.eq(steps), last_r.eq((steps << 1) - 1)]
        x = ph + 1
        n_last, n_qk, n_st, n_kb, n_ke, n_more = nfields
        lp_ = x == last_r
        qk_ = (x == 0) | (x[0] & ~lp_)
        m.d.sync += [n_last.eq(lp_), n_qk.eq(qk_), n_more.eq(x < (steps_r << 1)),
                     n_st.eq(Mux(lp_, steps_r - 1, Mux(qk_, (x + 1) >> 1, (x >> 1) - 1)))]

        def key_end(kb):
            """One past the last key of the step whose first key is kb."""
            return Mux(kb + (1 << blog) < keys, kb + (1 << blog), keys)

        kb_ = n_st << blog
        m.d.sync += [n_kb.eq(kb_), n_ke.eq(key_end(kb_))]

        sh = Signal(range(lp + 1))               # log2 of a row group's positions
        m.d.sync += sh.eq(lp - self.hlog)

        def step_len(ops_):
            return Mux(ops_ > self.min_phase, ops_, self.min_phase)

        # Phase 0's shape: every row group, or those a window's key 0 reaches where the window
        # starts its groups (step 0 skips none below: it starts each row's softmax,
        # contract.rules.skipped_groups), its ops and length a cycle after the command is taken
        # (the first issue can follow the next cycle: with the tile's Q rows already in, the
        # core starts as it takes the command). The product of two small counts as shift-and-
        # add rows, not a DSP and its routing (the routed preset's worst path, g_hi → the
        # product → plen, 16.2 ns, 9.5 of them the DSP and the nets to and from it).
        ops0, ops0_m1 = Signal.like(ops), Signal.like(ops)
        ops0_c = shift_add_product(self.g_hi0 - self.g_lo, words)
        m.d.sync += [ops0.eq(ops0_c), ops0_m1.eq(ops0_c - 1), plen.eq(step_len(ops0_c))]
        # The next phase's shape (registers, four stages after n_kb; a phase lasts ≥
        # min_phase cycles): the row groups it skips, its first group, its ops and length.
        gm, gt = self._span(m, n_kb, sh, "")
        n_g0 = Signal(range(gmax + 1))
        n_ops = Signal.like(ops)
        n_plen = Signal.like(plen)
        # the groups new at the phase's step: those past the previous step's last (its key
        # one less: a tile that skips takes one key a step), none but at step 0 unless the
        # window starts them (``win_starts``), every one at step 0
        gm_p, gt_p = self._span(m, n_kb - 1, sh, "_p")
        first_p = delay(m, [n_kb == 0], 2, "seq_first_p")[0]
        n_gnew, gnew = Signal(range(gmax + 2)), Signal(range(gmax + 2))
        m.d.sync += n_gnew.eq(Mux(first_p, 0, Mux(self.win_starts & self.skip_hi,
                                                  Mux(gt_p > gm_p, gt_p, gm_p + 1), gmax + 1)))
        # the groups past the window's reach (at least one group past the causal skip stays)
        g_cut = Signal(range(gmax + 1))
        m.d.comb += g_cut.eq(self.groups - Mux(gt > gm, gt, gm + 1))
        n_words = Signal.like(words)              # the next phase's words a row, its full ops
        n_full = Signal.like(ops)
        m.d.sync += [n_words.eq(Mux(n_qk, words, self.words_v)),
                     n_full.eq(Mux(n_qk, ops, self.ops_v))]
        # the groups it leaves out, registered a stage before their product with the words
        n_out = Signal(range(gmax + 1))
        m.d.sync += [n_g0.eq(gm), n_out.eq(gm + g_cut)]
        ops_c = n_full - shift_add_product(n_out, n_words)
        m.d.sync += [n_ops.eq(ops_c), n_plen.eq(step_len(ops_c))]
        cur_ops = Signal.like(ops)
        cur_plen = Signal.like(plen)
        cur_m1 = Signal.like(ops)
        with m.If(~running):
            m.d.sync += [last_ph.eq(0), is_qk.eq(1), st.eq(0), kbase.eq(0),
                         kend.eq(key_end(0)), more.eq(keys != 0), g.eq(self.g_lo), w.eq(0),
                         gnew.eq(0)]
        with m.Elif(step_end):
            for f_, v in zip(fields, nfields, strict=True):
                m.d.sync += f_.eq(v)
            m.d.sync += [cur_ops.eq(n_ops), cur_m1.eq(n_ops - 1), cur_plen.eq(n_plen),
                         gnew.eq(n_gnew)]
        m.d.comb += self.new.eq(g >= gnew)
        steps_left = self.steps_left
        m.d.comb += steps_left.eq(running & more)
        # "the phase's keys are in the ring (and its softmax written)": a register, compared a
        # cycle ahead for the fields the phase will have (phase 0's from the command while not
        # running, the next phase's in a step's last cycle), off the path from the ring's write
        # counts to the issue enables. The counts only grow within a tile, so a compare that is
        # a cycle old is never wrongly true; a phase starts the cycle after its rows are in.
        can_start = Signal()
        cur_can = Mux(is_qk, k_wr_n >= kend, (v_wr_n >= kend) & (exp_done > st))
        nxt_can = Mux(n_qk, k_wr_n >= n_ke, (v_wr_n >= n_ke) & (exp_done > n_st))
        m.d.sync += can_start.eq(Mux(~running, k_wr_n >= key_end(0),
                                     Mux(step_end, nxt_can, cur_can)))
        active = self.active
        m.d.comb += active.eq(steps_left & ((cnt != 0) | can_start))
        issue = self.issue
        # phase 0 (ph = 0) as a register of its own, and each shape's last op a register, off
        # the path from the phase counter to the issue enables
        first = Signal(init=1)
        eff_ops = Mux(first, ops0, cur_ops)
        m.d.comb += [issue.eq(active & (cnt < eff_ops)),
                     self.last_op.eq(issue & (cnt == Mux(first, ops0_m1, cur_m1)))]
        w_last = Signal.like(words)               # the phase's last word of a row
        m.d.comb += w_last.eq(Mux(is_qk, words, self.words_v) - 1)
        with m.If(issue):
            with m.If(w == w_last):
                m.d.sync += [w.eq(0), g.eq(g + 1)]
            with m.Else():
                m.d.sync += w.eq(w + 1)
        plen_m1 = Signal.like(plen)
        m.d.sync += plen_m1.eq(Mux(first, plen, cur_plen) - 1)
        m.d.comb += step_end.eq(active & (cnt == plen_m1))
        with m.If(active):  # after the issue counters: the end of a step resets them
            with m.If(step_end):
                m.d.sync += [cnt.eq(0), ph.eq(ph + 1), first.eq(0), g.eq(n_g0), w.eq(0)]
            with m.Else():
                m.d.sync += cnt.eq(cnt + 1)
        self._counters(m, steps_left & ~active, is_qk | (v_wr_n < kend))
        with m.If(self.clear):
            m.d.sync += [ph.eq(0), first.eq(1), cnt.eq(0), w.eq(0)]
        self.dbg = {"ph": ph, "cnt": cnt}
        return m

    def _skipped(self, later, t, sh):
        """Row groups (of ``2**sh`` positions) a causal step skips when its first key is seen
        from position t on (t = first key − q_pos − diag): the groups wholly below t, never
        the last, none at steps 0 and 1 (``later`` low: step 0 starts every row, step 1's
        Q Kᵀ follows it with no P V between; contract.rules.skipped_groups)."""
        g_raw, groups = t >> sh, self.groups
        return Mux(self.skip & (t > 0) & later, Mux(g_raw < groups - 1, g_raw, groups - 1), 0)

    def _seen_to(self, later, u, sh):
        """One past the last row group a window's step reaches when its key is seen up to
        position u (u = key − q_pos − win_diag): at least one, every group at steps 0 and 1
        unless the groups start where the window reaches them (``win_starts``;
        contract.rules.groups_seen_to)."""
        return Mux(self.skip_hi & (later | self.win_starts), window_reach(u, sh, self.groups),
                   self.g_hi)

    def _span(self, m: Module, kb, sh, suffix: str):
        """The row groups the step whose key is ``kb`` issues, two register stages after
        ``kb``: its first (past the causal skip, from ``g_lo``) and one past the window's
        reach (the caller keeps at least one group past the first)."""
        gmax = self.cfg.row_groups
        t = Signal(signed(27), name=f"seq_t{suffix}")
        u = Signal(signed(27), name=f"seq_u{suffix}")
        later = Signal(name=f"seq_later{suffix}")
        m.d.sync += [t.eq(kb + self.t0), u.eq(kb + self.tw0), later.eq(kb > 1)]
        gm = Signal(range(gmax + 1), name=f"seq_gm{suffix}")
        gt = Signal(range(gmax + 1), name=f"seq_gt{suffix}")
        m.d.sync += [gm.eq(self._skipped(later, t, sh) + self.g_lo),
                     gt.eq(self._seen_to(later, u, sh))]
        return gm, gt

    def _counters(self, m: Module, waiting, for_kv) -> None:
        """The PE array's performance counters: busy (an op issued), padding (a phase's cycles
        past its ops), and waiting, on the K/V ring or on the softmax."""
        with m.If(waiting):
            with m.If(for_kv):
                m.d.sync += self.pe_wait_kv.eq(self.pe_wait_kv + 1)
            with m.Else():
                m.d.sync += self.pe_wait_exp.eq(self.pe_wait_exp + 1)
        with m.If(self.active & ~self.issue):
            m.d.sync += self.pe_pad.eq(self.pe_pad + 1)
        with m.If(self.issue):
            m.d.sync += self.pe_busy.eq(self.pe_busy + 1)
