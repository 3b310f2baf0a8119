"""ComputeCore: one query tile of exact attention, bit-exact with model/numerics.py.

Given a command (rows, head dim, keys, softmax multiplier, causal offsets), the Q rows of the
tile and the K/V rows in the order the schedule emits them, the core computes the tile's output
exactly as ``model.numerics.attention_head_stepwise`` does (softmax_block = 1) and streams it
out row by row. docs/architecture.md describes the datapath and its timing.

Geometry: ``p = mac_lines`` MAC lines each own one query row of a *row group*; the ``q =
macs_per_line`` MACs of a line own ``q`` consecutive columns (one memory word). A tile of r rows
is ``G = ⌈r/p⌉`` row groups; a row of d elements is ``Wd = ⌈d/q⌉`` words.

* ``Q Kᵀ`` step for key j: for each (group, word): every line multiplies its Q word by the
  broadcast K word and adds the q products (adder tree) into its score accumulator.
* softmax: the ``p`` scores of a group go through the softmax unit (m, ℓ per row;
  :class:`~attenio.hw.softmax.SoftmaxUnit`, the soft-capping unit in it where built).
* ``P V`` step: for each (group, word): every MAC read-modify-writes one O element:
  ``O = (O >> shift) + p·v``.
* order ``QK(0), QK(1), PV(0), QK(2), PV(1), …`` so each key's softmax hides behind the next
  key's ``Q Kᵀ``; every step lasts ``max(G·Wd, MIN_PHASE)`` cycles.
* finalize: one O word of one row per cycle through :class:`Finalize`, row-major, into the
  output stream (an output FIFO absorbs backpressure).
"""

from __future__ import annotations

from amaranth import Cat, Module, Mux, ResetInserter, Shape, Signal, signed
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.config import HardwareConfig
from attenio.base.ecp5 import obuf_slice_bits
from attenio.contract.rules import skips_row_groups
from attenio.contract.timing import TIMING
from attenio.hw.arith import kept_copies, memory_banks, pbuf_ram, sliced_banks, table_ram
from attenio.hw.finalize import Finalize, out_word_layout
from attenio.hw.finalize_stage import FIFO_LATENCY, FIN_READ_LATENCY, FinalizeStage
from attenio.hw.kvring import KVRing
from attenio.hw.layouts import cmd_layout, kv_beat_layout, qcmd_layout, word_layout
from attenio.hw.pe_array import PEArray
from attenio.hw.pv_stage import PVStage, acc_word_layout
from attenio.hw.qbuf import QBuffer
from attenio.hw.score import QK_LATENCY, ScoreStage
from attenio.hw.sequencer import COUNTER_BITS, StepSequencer, phase0_end
from attenio.hw.softmax import softmax_latency
from attenio.hw.softmax_stage import SoftmaxStage, ml_layout, pbuf_layout

# Shortest Q Kᵀ or P V step, in cycles: it keeps a row group's m/ℓ read-modify-write (through
# the softmax pipeline) and O read-modify-write from overlapping the next access to the same
# row group. Steps with fewer than MIN_PHASE (group, word) pairs are padded; with the
# soft-capping unit's longer softmax, ``timing_for(cfg).min_phase`` (the sequencer's).
MIN_PHASE = TIMING.min_phase
OUT_FIFO_DEPTH = TIMING.out_fifo_depth
# the core's stages (submodules), each with a reset of its own (ComputeCore._stages)
CORE_STAGES = ("qbuf", "kv_ring", "sequencer", "pe", "score", "softmax", "pv", "finalize")


def _log2(x: int) -> int:
    return x.bit_length() - 1


class ComputeCore(wiring.Component):
    """One query tile: ``Q`` rows in, ``K``/``V`` rows in, ``O`` rows out.

    Ports
    -----
    qcmd : stream of ``qcmd_layout`` (from ``LOAD_Q``): taken when the Q buffer holds no rows
        yet to be used and the core is idle or past its tile's last step (``steps_done``: the
        next tile's rows load during this one's finalize and store); opens the ``q`` stream
        for that many rows.
    cmd : stream of ``cmd_layout`` (from ``COMPUTE``): taken when the core is idle; the tile
        starts once its Q rows are in.
    q : stream of words (``q`` elements): the tile's rows, row-major, ``⌈d/q⌉`` beats a row
        (lanes past ``d`` are ignored).
    kv : stream of ``kv_beat_layout``: K and V rows in the order ``K0, K1, V0, K2, V1, …``,
        ``⌈d/q⌉`` beats a row, each beat tagged with its ring, the last word of a row and the
        tile's last beat. Rows go into a K ring and a V ring of ``kv_ring_depth/2`` rows
        each; the stream is back-pressured when the row's ring is full, and closed from the
        tile's last beat until the tile ends.
    steps_done : high once the tile's (or its part's) last ``P V`` step has issued, until it
        ends.
    part_wait : the tile expects another part (its running or ended part has ``more``): the
        next ``COMPUTE`` must have ``cont`` (ComputeIssue refuses any other with PART_ORDER).
        A part with ``more`` ends ``pv_drain`` cycles after its last step (its rings, sequencer
        and softmax steps cleared, the rows' m, ℓ and O kept, the Q buffer not freed); the
        core then takes the ``cont`` command and starts it two cycles later.
    k_free, v_free : K and V rows of the tile the PE array is done with (the loader's ring
        credits: it requests K row j only when ``j < k_free + kv_ring_depth/2``).
    active : the PE array or the finalize unit issued work this cycle (for a watchdog).
    o : stream of output words (``q`` outputs of ``out_bits``), the tile's rows row-major.
    busy : high from the accepted command until the last output word has been taken.
    pe_busy, pe_wait_kv, pe_wait_exp, pe_pad, exp_busy, fin_busy : cycle counters
        (cumulative): PE array issuing, waiting for a K/V row, waiting for the softmax,
        padding a short step, softmax unit fed, finalize issuing.

    Throughput: one (row group, word) per cycle in each step. Latencies: ``Q Kᵀ`` score 5
    cycles after its last word; softmax ``SoftmaxUnit.latency``; ``P V`` writes 4 cycles after
    its read; finalize ``Finalize.latency``.

    Raises
    ------
    ConfigError
        Parameters this RTL does not support (:meth:`HardwareConfig.rtl_problems`):
        ``mac_lines`` or ``macs_per_line`` not a power of two, ``softmax_block`` ≠ 1,
        ``exp_lanes`` ≠ ``mac_lines``.
    """

    def __init__(self, cfg: HardwareConfig):
        cfg.check_rtl()
        self.cfg = cfg
        # a reset a stage beside the core's own (``_stages``); undriven, they stay 0
        self.stage_resets = {n: Signal(name=f"rst_{n}") for n in CORE_STAGES}
        super().__init__({
            "qcmd": In(stream.Signature(qcmd_layout(cfg))),
            "cmd": In(stream.Signature(cmd_layout(cfg))),
            "q": In(stream.Signature(word_layout(cfg))),
            "kv": In(stream.Signature(kv_beat_layout(cfg))),
            "o": Out(stream.Signature(out_word_layout(cfg))),
            "busy": Out(1),
            "steps_done": Out(1),
            "part_wait": Out(1),
            "k_free": Out(range(cfg.max_seq_len + 1)),
            "v_free": Out(range(cfg.max_seq_len + 1)),
            "active": Out(1),
            "pe_busy": Out(COUNTER_BITS),
            "pe_wait_kv": Out(COUNTER_BITS),
            "pe_wait_exp": Out(COUNTER_BITS),
            "pe_pad": Out(COUNTER_BITS),
            "exp_busy": Out(COUNTER_BITS),
            "fin_busy": Out(COUNTER_BITS),
        })

    @property
    def p_ready_latency(self) -> int:
        """Last Q Kᵀ issue of a step → the first P V issue it allows: the score pipeline, the
        softmax (with the soft-capping unit's stages where the config builds it), the
        ``exp_done`` register and the sequencer's registered start compare (contract:
        ``Timing.p_ready_latency``, ``timing_for``)."""
        return QK_LATENCY + softmax_latency(self.cfg) + 2

    @property
    def finalize_latency(self) -> int:
        """Finalize issue → the word at the output FIFO's head (``Timing.finalize_latency``)."""
        return FIN_READ_LATENCY + Finalize.LATENCY + FIFO_LATENCY

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        p, q = cfg.mac_lines, cfg.macs_per_line
        lp, lq = _log2(p), _log2(q)
        gmax, wmax = cfg.row_groups, cfg.words_per_row
        lkmax = _log2(cfg.max_keys_per_step)

        # ---- memories: O accumulators, m/ℓ, the P buffer (a bank per line) ----
        o_banks = sliced_banks(m, "obuf", Shape.cast(acc_word_layout(cfg)).width, gmax * wmax,
                               p, obuf_slice_bits(cfg))
        ml_rd, ml_wr = memory_banks(m, "ml", ml_layout(cfg), gmax, p, style=table_ram(cfg))
        pb_rd, pb_wr = memory_banks(m, "pbuf", pbuf_layout(cfg), 2 * gmax, p,
                                    style=pbuf_ram(cfg))
        qbuf, kvr, seq, pe, score, smx, pv, fin = self._stages(m)

        # ---- the command register and the tile's shape ----
        c = Signal(cmd_layout(cfg))
        groups = Signal(range(gmax + 1))
        words = Signal(range(wmax + 1))          # a Q or K row's words (Q Kᵀ steps)
        words_v = Signal(range(wmax + 1))        # a V or O row's (P V steps, finalize)
        ops = Signal(range(gmax * wmax + 1))
        ops_v = Signal(range(gmax * wmax + 1))
        held = Signal()          # a part with `more` ended: the core waits for the next part
        m.d.comb += self.cmd.ready.eq(~self.busy | held)
        # log2(keys per step); a constant 0 when the config allows one key per step, so
        # synthesis drops the chains and the routing between lines
        blog = Signal(range(lkmax + 1))
        m.d.comb += blog.eq(c.kps_log2)
        # row-group skipping (positions rising with the row, one key per step): step k's key
        # is seen by positions ≥ k + t0, t0 = −(q_pos + diag), when causal and ≤ k + tw0, tw0
        # = −(q_pos + win_diag), under a window; the sequencer skips the groups outside
        skip = Signal()
        t0 = Signal(signed(26))
        tw0 = Signal(signed(26))
        take = Signal()
        m.d.comb += take.eq(self.cmd.valid & self.cmd.ready)
        cm = self.cmd.payload
        g_new = ((cm.rows << cm.kps_log2) + (p - 1)) >> lp
        t0_new = -(cm.q_pos + cm.diag)
        skip_new = skips_row_groups(cm.causal | cm.window,
                                    (cm.head_rows == 0) | (cm.head_rows >= cm.rows),
                                    cm.kps_log2 == 0, g_new)
        # the rows a selected part computes lie in row groups [g_lo, g_hi) (every group else)
        g_lo = Signal(range(gmax + 1))
        g_hi = Signal(range(gmax + 1))
        g_hi_new = Mux(cm.select, (cm.sel_row + cm.head_rows + (p - 1)) >> lp, g_new)
        g_hi0 = Signal(range(gmax + 1))          # phase 0's (hw.sequencer.phase0_end)
        cont_go = Signal(2)      # a cont part starts two cycles after its command is taken
        m.d.sync += cont_go.eq(Cat(take & cm.cont, cont_go[0]))
        with m.If(take):
            m.d.sync += [g_lo.eq(Mux(cm.select, cm.sel_row >> lp, 0)), g_hi.eq(g_hi_new),
                         g_hi0.eq(phase0_end(m, cfg, cm, g_new, skip_new, g_hi_new)),
                         held.eq(0),
                         c.eq(cm), groups.eq(g_new), words.eq((cm.d + (q - 1)) >> lq),
                         words_v.eq((cm.dv + (q - 1)) >> lq),
                         self.busy.eq(1), t0.eq(t0_new), skip.eq(skip_new),
                         tw0.eq(-(cm.q_pos + cm.win_diag))]
        # ops follow one cycle later (the core is loading Q by then)
        m.d.sync += [ops.eq(groups * words), ops_v.eq(groups * words_v)]

        # ---- Q buffer, K/V rings, step sequencer ----
        wiring.connect(m, wiring.flipped(self.qcmd), qbuf.qcmd)
        wiring.connect(m, wiring.flipped(self.q), qbuf.q)
        wiring.connect(m, wiring.flipped(self.kv), kvr.kv)
        running = Signal()
        m.d.comb += [
            qbuf.core_busy.eq(self.busy), qbuf.q_free.eq(self.steps_done & ~c.more),
            qbuf.cmd_taken.eq(take),
            seq.g_lo.eq(g_lo), seq.g_hi.eq(g_hi), seq.g_hi0.eq(g_hi0),
            seq.running.eq(running), seq.keys.eq(c.keys), seq.blog.eq(blog), seq.ops.eq(ops),
            seq.skip.eq(skip & c.causal), seq.groups.eq(groups), seq.t0.eq(t0),
            seq.skip_hi.eq(skip & c.window), seq.tw0.eq(tw0), seq.hlog.eq(c.hlog),
            # a tile of one part: its window starts each group at its first step
            seq.win_starts.eq(~c.more & ~c.cont),
            seq.words.eq(words), seq.ops_v.eq(ops_v), seq.words_v.eq(words_v),
            seq.k_written.eq(kvr.k_written),
            seq.v_written.eq(kvr.v_written), seq.exp_done.eq(smx.exp_done),
            kvr.step_end.eq(seq.step_end), kvr.is_qk.eq(seq.is_qk), kvr.kend.eq(seq.kend),
            kvr.kbase.eq(seq.kbase), kvr.word.eq(seq.w),
            # memory read addresses (c0): ring copy c reads key kbase + c
            qbuf.rd_addr.eq(seq.g * wmax + seq.w),
        ]
        for n in ("pe_busy", "pe_wait_kv", "pe_wait_exp", "pe_pad"):
            m.d.comb += getattr(self, n).eq(getattr(seq, n))

        # ---- the stages, joined by name ----
        for st in (score, pv):
            m.d.comb += [st.issue.eq(seq.issue), st.is_qk.eq(seq.is_qk), st.g.eq(seq.g),
                         st.w.eq(seq.w), st.st.eq(seq.st), st.new.eq(seq.new),
                         st.blog.eq(blog)]
        m.d.comb += [score.last_op.eq(seq.last_op), smx.step_last.eq(score.step_last)]
        m.d.comb += [
            score.words.eq(words), score.groups.eq(groups), score.running.eq(running),
            score.cmd.eq(c), score.k_data.eq(kvr.k_data), score.k_scale.eq(kvr.k_scale),
            score.sc_data.eq(qbuf.sc_data), qbuf.sc_addr.eq(score.sc_addr),
            # the PE array: Q Kᵀ operands and control from the score stage, P V's from the
            # P V stage (one multiplier per MAC serves both)
            pe.qk.eq(score.pe_qk), pe.acc.eq(score.pe_acc), pe.acc_first.eq(score.pe_acc_first),
            pe.q.eq(qbuf.rd_data), pe.k.eq(score.pe_k),
            pe.p.eq(pv.pe_p), pe.shift.eq(pv.pe_shift), pe.v.eq(pv.pe_v),
            pe.o_old.eq(pv.pe_o_old), pe.head.eq(pv.pe_head), pe.zero.eq(pv.pe_zero),
            pv.pe_o_new.eq(pe.o_new), pv.v_data.eq(kvr.v_data),
            pv.v_scale.eq(kvr.v_scale), pv.value_scales.eq(c.value_scales),
            smx.valid.eq(score.valid), smx.group.eq(score.group), smx.step.eq(score.step),
            smx.first.eq(score.first),
            smx.visible.eq(score.visible), smx.c_m.eq(score.c_m), smx.c_sh.eq(score.c_sh),
            smx.softcap.eq(c.softcap), smx.cap.eq(c.cap), smx.cont.eq(c.cont),
            pv.cont.eq(c.cont),
            *([smx.sinks.eq(c.sinks), smx.sink.eq(score.sink)] if cfg.sinks_unit else []),
            *([smx.alibi_on.eq(c.alibi), smx.alibi.eq(score.alibi), smx.rel.eq(score.rel)]
              if cfg.alibi_unit else []),
            smx.scores.eq(pe.scores), smx.blog.eq(blog), smx.groups.eq(groups),
            fin.running.eq(running & ~c.more), fin.steps_left.eq(seq.steps_left),
            fin.words.eq(words_v),
            fin.cmd.eq(c),
            self.exp_busy.eq(smx.exp_busy), self.fin_busy.eq(fin.fin_busy),
        ]
        # the memories' ports: finalize takes the O and m/ℓ reads once the steps are done
        self._o_ports(m, o_banks, fin, pv)
        # the m/ℓ banks' read address, a register a bank loaded a cycle ahead whenever a read
        # follows (finalize's, or a group reaching the score stage's c3): one address drove
        # every bank's LUT RAM read muxes (720 and 480 LUT inputs on two of its bits, the most
        # congested nets of the session-17 routes that did not converge); a bit of the bank's
        # read word keeps the copies apart; off START's reset, as the O addresses
        ml_ra = kept_copies(m, Mux(fin.active_next, fin.ml_addr_next, score.ml_addr_next),
                            fin.active_next | score.ml_load,
                            [ml_rd[i].data.as_value()[0] for i in range(p)], "ml_ra", True)
        for i in range(p):
            m.d.comb += [
                ml_rd[i].addr.eq(ml_ra[i]),
                smx.ml_data[i].eq(ml_rd[i].data), fin.ml_data[i].eq(ml_rd[i].data),
                ml_wr[i].addr.eq(smx.ml_wr_addr[i]), ml_wr[i].en.eq(smx.ml_wr_en),
                ml_wr[i].data.eq(smx.ml_wr_data[i]),
                pb_wr[i].addr.eq(smx.pb_wr_addr[i]), pb_wr[i].en.eq(smx.pb_wr_en),
                pb_wr[i].data.eq(smx.pb_wr_data[i]),
                pb_rd[i].addr.eq(pv.pb_rd_addr), pv.pb_data[i].eq(pb_rd[i].data),
            ]
        wiring.connect(m, fin.o, wiring.flipped(self.o))
        self._tile_control(m, running, seq, kvr, qbuf, smx, fin, c, held, cont_go[1])
        # internal state, for tests and debugging
        self.dbg = {"step": seq.st, "k_wr": kvr.k_written, "v_wr": kvr.v_written,
                    "k_free": kvr.k_free, "v_free": kvr.v_free, "exp_done": smx.exp_done,
                    "running": running, "q_done": qbuf.loaded, "f_all": fin.all_issued,
                    "frow": fin.frow, "held": fin.held, "drain": fin.drain,
                    "g": seq.g, "w": seq.w, "ops": ops, "plen": seq.plen0,
                    "kv_closed": kvr.closed}
        return m

    def _stages(self, m: Module) -> tuple:
        """The core's stages as submodules, each also reset by ``stage_resets[name]``: a
        register of START's reset a stage (hw/top.py), so no one net resets the whole core
        (2,756 flip-flops on the fpga preset in session 18's netlist, 420 the sequencer's).
        Returns them in ``CORE_STAGES``' order."""
        units = tuple(cls(self.cfg) for cls in (QBuffer, KVRing, StepSequencer, PEArray,
                                                ScoreStage, SoftmaxStage, PVStage, FinalizeStage))
        for name, unit in zip(CORE_STAGES, units, strict=True):
            m.submodules[name] = ResetInserter(self.stage_resets[name])(unit)
        return units

    def _o_ports(self, m: Module, o_banks, fin, pv) -> None:
        """The O banks' ports. Their addresses are registers of their own, a copy a memory of a
        bank, loaded a cycle ahead (a bank is several block RAMs: one address drove them all,
        a route's worst net at speed 6 in session 11 and at speed 8 in session 17; with
        ``obuf_slices`` a bank is memories one block RAM wide, a copy each); a bit of the
        memory's read word keeps the copies apart (kept_copies). Each is loaded the cycle before
        any read or write that uses it, so the copies are off START's reset (1,560 of its 2,756
        flip-flops in session 18's netlist)."""
        salts = [rd.data[0] for bank in o_banks for rd, _, _ in bank]
        o_ra = iter(kept_copies(m, Mux(fin.active_next, fin.o_addr_next, pv.o_rd_next),
                                fin.active_next | pv.o_rd_load, salts, "o_ra", True))
        o_wa = iter(kept_copies(m, pv.o_wr_next, pv.o_wr_load, salts, "o_wa", True))
        for i, bank in enumerate(o_banks):
            o_word = Signal(acc_word_layout(self.cfg), name=f"o_word{i}")
            m.d.comb += [o_word.eq(Cat(rd.data for rd, _, _ in bank)),
                         pv.o_data[i].eq(o_word), fin.o_data[i].eq(o_word)]
            for rd, wr, lo in bank:
                m.d.comb += [rd.addr.eq(next(o_ra)), wr.addr.eq(next(o_wa)),
                             wr.en.eq(pv.o_wr_en[i]),
                             wr.data.eq(pv.o_wr_data[i].as_value()[lo:lo + len(wr.data)])]

    def _tile_control(self, m: Module, running, seq, kvr, qbuf, smx, fin, c, held,
                      cont_go) -> None:
        """A tile starts once its Q rows are in and ends when its last output word has left:
        every unit returns to its idle state. A part with ``more`` ends ``pv_drain`` cycles
        after its last step (its last O writes done): the rings, the sequencer and the
        softmax's step count return to idle, the rows' m, ℓ, O and the Q rows stay; the next
        part (``cont``) starts two cycles after its command is taken."""
        m.d.comb += [self.steps_done.eq(running & ~seq.steps_left), self.k_free.eq(kvr.k_free),
                     self.v_free.eq(kvr.v_free), self.active.eq(seq.issue | fin.issue)]
        start = Signal()
        m.d.comb += start.eq(Mux(c.cont, cont_go, qbuf.loaded) & ~running & self.busy
                             & ~held & ~fin.all_issued)
        with m.If(start):
            m.d.sync += running.eq(1)
        done = Signal()
        m.d.comb += done.eq(fin.all_issued & fin.drained)
        pdrain = Signal(range(TIMING.pv_drain + 1))     # a `more` part's last O writes
        part_end = Signal()
        m.d.comb += part_end.eq(self.steps_done & c.more & (pdrain == TIMING.pv_drain))
        with m.If(self.steps_done & c.more & ~part_end):
            m.d.sync += pdrain.eq(pdrain + 1)
        with m.If(part_end):
            m.d.sync += [pdrain.eq(0), running.eq(0), held.eq(1)]
        m.d.comb += self.part_wait.eq(held | (self.busy & c.more))
        # the Q buffer is free for the next tile's rows once this tile has taken them (its
        # reads end with the steps: QBuffer.q_free); the rings, the sequencer and the stages
        # at the end (of the tile, or of a part)
        m.d.comb += [qbuf.clear.eq(start), kvr.clear.eq(done | part_end),
                     seq.clear.eq(done | part_end), smx.clear.eq(done | part_end),
                     fin.clear.eq(done)]
        with m.If(done):
            m.d.sync += [self.busy.eq(0), running.eq(0)]
