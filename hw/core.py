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
* softmax: the ``p`` scores of a group go through :class:`SoftmaxUnit` (m, ℓ per row).
* ``P V`` step: for each (group, word): every MAC read-modify-writes one O element:
  ``O = (O >> shift) + p·v``.
* order ``QK(0), QK(1), PV(0), QK(2), PV(1), …`` so each key's softmax hides behind the next
  key's ``Q Kᵀ``; every step lasts ``max(G·Wd, MIN_PHASE)`` cycles.
* finalize: one O word of one row per cycle through :class:`Finalize`, row-major, into the
  output stream (an output FIFO absorbs backpressure).
"""

from __future__ import annotations

from types import SimpleNamespace

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.config import HardwareConfig
from attenio.contract.formats import KEY_MANT_BITS
from attenio.contract.formats import SCALE_SHIFT_MAX as MAX_SCALE_SHIFT
from attenio.contract.rules import causal_visible, window_visible
from attenio.contract.timing import TIMING
from attenio.hw.arith import memory_banks, shift_add_product
from attenio.hw.finalize import Finalize, out_word_layout
from attenio.hw.kvring import KVRing
from attenio.hw.layouts import (
    cmd_layout,
    kv_beat_layout,
    qcmd_layout,
    row_scale_layout,
    word_layout,
)
from attenio.hw.pe_array import PEArray
from attenio.hw.qbuf import QBuffer
from attenio.hw.sequencer import COUNTER_BITS, StepSequencer
from attenio.hw.softmax import SHIFT_BITS, SoftmaxUnit, m_bits
from attenio.hw.streamfifo import StreamFIFO

# Shortest Q Kᵀ or P V step, in cycles: it keeps a row group's m/ℓ read-modify-write (through
# the softmax pipeline) and O read-modify-write from overlapping the next access to the same
# row group. Steps with fewer than MIN_PHASE (group, word) pairs are padded.
MIN_PHASE = TIMING.min_phase
OUT_FIFO_DEPTH = TIMING.out_fifo_depth
# cycles from the step sequencer's end to the first finalize read of O: the last P V write
# (c4) is then done
PV_DRAIN = TIMING.pv_drain


def _log2(x: int) -> int:
    return x.bit_length() - 1


# a Q Kᵀ (group, word) issued in cycle c0 has its group's scores accumulated in c4 and enters
# the softmax in c5 (operands registered in c1 and c1b, products in c2, sums in c3)
QK_LATENCY = 5
# the finalize issue (c0) reads O and ℓ (c1) and registers the selected row's (c2)
FIN_READ_LATENCY = 2
FIFO_LATENCY = 2     # SyncFIFOBuffered: written in cycle t, readable in t + 2


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
    steps_done : high once the tile's last ``P V`` step has issued, until it ends.
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
        super().__init__({
            "qcmd": In(stream.Signature(qcmd_layout(cfg))),
            "cmd": In(stream.Signature(cmd_layout(cfg))),
            "q": In(stream.Signature(word_layout(cfg))),
            "kv": In(stream.Signature(kv_beat_layout(cfg))),
            "o": Out(stream.Signature(out_word_layout(cfg))),
            "busy": Out(1),
            "steps_done": Out(1),
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
        softmax, the ``exp_done`` register and the sequencer's registered start compare
        (contract: ``Timing.p_ready_latency``)."""
        return QK_LATENCY + SoftmaxUnit.LATENCY + 2

    @property
    def finalize_latency(self) -> int:
        """Finalize issue → the word at the output FIFO's head (``Timing.finalize_latency``)."""
        return FIN_READ_LATENCY + Finalize.LATENCY + FIFO_LATENCY

    def elaborate(self, platform):
        m = Module()
        s = self._setup(m)
        self._qk(m, s)
        self._softmax(m, s)
        self._pv(m, s)
        self._finalize(m, s)
        self._tile_control(m, s)
        return m

    def _setup(self, m: Module) -> SimpleNamespace:
        """Geometry, memories, the Q buffer, K/V rings and step sequencer, the command
        registers and the small muxes that route rows to lines; returns them by name."""
        cfg = self.cfg
        p, q = cfg.mac_lines, cfg.macs_per_line
        lp, lq = _log2(p), _log2(q)
        gmax = cfg.row_groups
        wmax = cfg.words_per_row
        mb = m_bits(cfg)
        wl = word_layout(cfg)
        ml_layout = data.StructLayout({"m": signed(mb), "l": unsigned(cfg.row_sum_bits)})
        pb_layout = data.StructLayout({"p": unsigned(cfg.exp_bits),
                                       "shift": unsigned(SHIFT_BITS)})
        acc_word = data.ArrayLayout(signed(cfg.acc_bits), q)
        lkmax = _log2(cfg.max_keys_per_step)

        # ---- memories ----
        o_rd, o_wr = memory_banks(m, "obuf", acc_word, gmax * wmax, p)
        ml_rd, ml_wr = memory_banks(m, "ml", ml_layout, gmax, p, style=cfg.table_ram)
        pb_rd, pb_wr = memory_banks(m, "pbuf", pb_layout, 2 * gmax, p, style=cfg.table_ram)
        m.submodules.qbuf = qbuf = QBuffer(cfg)
        m.submodules.kv_ring = kvr = KVRing(cfg)
        m.submodules.sequencer = seq = StepSequencer(cfg)
        m.submodules.pe = pe = PEArray(cfg)

        # ---- command registers ----
        c = Signal(cmd_layout(cfg))
        groups = Signal(range(gmax + 1))
        words = Signal(range(wmax + 1))
        ops = Signal(range(gmax * wmax + 1))
        keys = c.keys
        m.d.comb += self.cmd.ready.eq(~self.busy)
        # log2(keys per step); a constant 0 when the config allows one key per step, so
        # synthesis drops the chains and the routing between lines
        blog = Signal(range(lkmax + 1))
        m.d.comb += blog.eq(c.kps_log2)
        bmask = Signal(range(p + 1))
        m.d.comb += bmask.eq((1 << blog) - 1)
        # causal row-group skipping (one head, one key per step): step k·b's first key is seen
        # by rows ≥ k·b + t0, t0 = −(q_pos + diag); the sequencer skips the groups below
        skip = Signal()
        t0 = Signal(signed(26))
        take = Signal()
        m.d.comb += take.eq(self.cmd.valid & self.cmd.ready)
        cm = self.cmd.payload
        g_new = ((cm.rows << cm.kps_log2) + (p - 1)) >> lp
        t0_new = -(cm.q_pos + cm.diag)
        skip_new = (cm.causal & (cm.kps_log2 == 0) & (g_new > 1)
                    & ((cm.head_rows == 0) | (cm.head_rows >= cm.rows)))
        with m.If(take):
            m.d.sync += [c.eq(cm), groups.eq(g_new), words.eq((cm.d + (q - 1)) >> lq),
                         self.busy.eq(1), t0.eq(t0_new), skip.eq(skip_new)]
        # ops follow one cycle later (the core is loading Q by then)
        m.d.sync += ops.eq(groups * words)

        # ---- Q buffer, K/V rings, step sequencer ----
        wiring.connect(m, wiring.flipped(self.qcmd), qbuf.qcmd)
        wiring.connect(m, wiring.flipped(self.q), qbuf.q)
        wiring.connect(m, wiring.flipped(self.kv), kvr.kv)
        running = Signal()
        exp_done = Signal(range(cfg.max_seq_len + 1))   # steps whose softmax is written
        m.d.comb += [
            qbuf.core_busy.eq(self.busy), qbuf.q_free.eq(self.steps_done),
            seq.running.eq(running), seq.keys.eq(keys), seq.blog.eq(blog), seq.ops.eq(ops),
            seq.take.eq(take), seq.take_groups.eq(g_new), seq.take_skip.eq(skip_new),
            seq.take_t0.eq(t0_new), seq.skip.eq(skip), seq.groups.eq(groups), seq.t0.eq(t0),
            seq.words.eq(words), seq.k_written.eq(kvr.k_written),
            seq.v_written.eq(kvr.v_written), seq.exp_done.eq(exp_done),
            kvr.step_end.eq(seq.step_end), kvr.is_qk.eq(seq.is_qk), kvr.kend.eq(seq.kend),
            kvr.kbase.eq(seq.kbase), kvr.word.eq(seq.w),
            # memory read addresses (c0): ring copy c reads key kbase + c
            qbuf.rd_addr.eq(seq.g * wmax + seq.w),
        ]
        for n in ("pe_busy", "pe_wait_kv", "pe_wait_exp", "pe_pad"):
            m.d.comb += getattr(self, n).eq(getattr(seq, n))

        def pick(name, shape, sources):
            """``sources[k]`` when b = 2**k (k ≤ log2 max_keys_per_step): a small mux."""
            out = Signal(shape, name=name)
            if lkmax == 0:
                m.d.comb += out.eq(sources[0])
                return out
            with m.Switch(blog):
                for k_, src in sources.items():
                    with m.Case(k_):
                        m.d.comb += out.eq(src)
            return out

        def lane_copy(datas, i, name):
            """The ring word line i uses: copy (i mod b)."""
            return pick(f"{name}_word{i}", wl,
                        {k_: datas[i & ((1 << k_) - 1)] for k_ in range(lkmax + 1)})

        def from_row_bank(datas, shape, i, name):
            """Line i's chain starts from the state of row i >> log2(b), kept in that bank."""
            return pick(f"{name}_src{i}", shape,
                        {k_: datas[i >> k_] for k_ in range(lkmax + 1)})

        def from_chain_end(outs, shape, i, name):
            """Bank i (row i) takes the result of its chain's last line, i·b + b − 1."""
            return pick(f"{name}_res{i}", shape,
                        {k_: outs[min(p - 1, (i << k_) + (1 << k_) - 1)]
                         for k_ in range(lkmax + 1)})

        return SimpleNamespace(
            cfg=cfg, p=p, q=q, lp=lp, lq=lq, gmax=gmax, wmax=wmax, ml_layout=ml_layout,
            acc_word=acc_word, o_rd=o_rd, o_wr=o_wr, ml_rd=ml_rd, ml_wr=ml_wr, pb_rd=pb_rd,
            pb_wr=pb_wr, qbuf=qbuf, kvr=kvr, seq=seq, pe=pe, c=c, groups=groups, words=words,
            ops=ops, keys=keys, blog=blog, bmask=bmask, running=running, exp_done=exp_done,
            issue=seq.issue, is_qk=seq.is_qk, g=seq.g, w=seq.w, st=seq.st,
            lane_copy=lane_copy, from_row_bank=from_row_bank, from_chain_end=from_chain_end,
            pick=pick)

    def _qk(self, m: Module, s: SimpleNamespace) -> None:
        """The Q Kᵀ pipeline: one (row group, word) per cycle into each line's score
        accumulator; the causal and end-of-keys visibility of each line's key."""
        cfg, p, lp, gmax = s.cfg, s.p, s.lp, s.gmax
        issue, is_qk, g, w, st, words = s.issue, s.is_qk, s.g, s.w, s.st, s.words
        ml_rd, blog, bmask, keys, c = s.ml_rd, s.blog, s.bmask, s.keys, s.c
        # ---- Q Kᵀ pipeline ----
        qk_issue = issue & is_qk
        v1 = Signal()
        g1, g2, g3 = (Signal.like(g, name=f"qk_g{k}") for k in (1, 2, 3))
        k1, k2, k3 = (Signal.like(st, name=f"qk_st{k}") for k in (1, 2, 3))
        first1, first2 = Signal(), Signal()
        last1, last2 = Signal(), Signal()
        m.d.sync += [v1.eq(qk_issue), g1.eq(g), k1.eq(st), first1.eq(w == 0),
                     last1.eq(w == words - 1)]
        # c1 → c2: the MAC operands are registered (below); the products follow in c3
        v1b, first1b, last1b = Signal(), Signal(), Signal()
        g1b, k1b = Signal.like(g, name="qk_g1b"), Signal.like(st, name="qk_st1b")
        m.d.sync += [v1b.eq(v1), g1b.eq(g1), k1b.eq(k1), first1b.eq(first1), last1b.eq(last1)]
        v2 = Signal()
        m.d.sync += [v2.eq(v1b), g2.eq(g1b), k2.eq(k1b), first2.eq(first1b), last2.eq(last1b)]
        # the PE array (hw/pe_array.py) multiplies, sums and accumulates; one multiplier per
        # MAC serves both steps, its operands chosen by v1
        pe = s.pe
        m.d.comb += pe.qk.eq(v1)
        for i in range(p):
            m.d.comb += [pe.q[i].eq(s.qbuf.rd_data[i]),
                         pe.k[i].eq(s.lane_copy(s.kvr.k_data, i, "k"))]
        v3, first3, last3 = Signal(), Signal(), Signal()
        m.d.sync += [v3.eq(v2), g3.eq(g2), k3.eq(k2), first3.eq(first2), last3.eq(last2)]
        m.d.comb += [pe.acc.eq(v3), pe.acc_first.eq(first3)]
        accs = pe.scores
        sv4 = Signal()  # accs hold a finished group of scores
        g4, k4 = Signal.like(g), Signal.like(st)
        m.d.sync += [sv4.eq(v3 & last3), g4.eq(g3), k4.eq(k3)]
        # m/ℓ read for the finished group is issued with the last accumulation (c4)
        fin_mode = Signal()
        fin_ml_addr = Signal(range(gmax + 1))
        for i in range(p):
            m.d.comb += ml_rd[i].addr.eq(Mux(fin_mode, fin_ml_addr, g3))
        # the rows' multipliers are read early (c1b → c2) to meet the keys' factors in the
        # product that forms each lane's multiplier by c4 (_multipliers)
        m.d.comb += s.qbuf.sc_addr.eq(g1b)
        # visibility of key (k4·b + slot) to the row of each line: causal mask and, in the
        # last step, keys past the end
        vis = Signal(p)
        # Packed heads (GQA, head_rows < rows): line i of group g holds tile row g·p + i, at
        # position (g·p + i) mod head_rows of its head. head_rows ≥ p (the decoder's rule), so
        # each line's position is a register that steps by p and wraps once per head, moved
        # as each group's scores finish (groups finish in order within a Q Kᵀ step); lines
        # past the tile's rows (padding) see every key.
        multi = Signal()
        m.d.comb += multi.eq((c.head_rows != 0) & (c.head_rows < c.rows))
        pos = [Signal(range(cfg.tile_rows + p), name=f"qk_pos{i}") for i in range(p)]
        last_group = Signal()
        m.d.comb += last_group.eq(g4 == s.groups - 1)
        with m.If(~s.running | (sv4 & last_group)):
            m.d.sync += [pos[i].eq(i) for i in range(p)]
        with m.Elif(sv4):
            for i in range(p):
                nxt = pos[i] + p
                m.d.sync += pos[i].eq(Mux(nxt >= c.head_rows, nxt - c.head_rows, nxt))
        for i in range(p):
            tile_row = (g4 << lp) + i
            row = Mux(blog == 0, Mux(multi, pos[i], tile_row), i >> blog)
            key_i = (k4 << blog) + (i & bmask)
            seen = causal_visible(key_i, row + c.q_pos, c.diag)
            inside = window_visible(key_i, row + c.q_pos, c.win_diag)
            pad = multi & (tile_row >= c.rows)
            m.d.comb += vis[i].eq((key_i < keys) & (((~c.causal | seen) & (~c.window | inside))
                                                    | pad))
        # each line's key factor (key_scales), taken with the step's issue (c0: the ring reads
        # key kbase + c) and carried to c2, where the rows' multipliers arrive
        kf = [s.pick(f"kf_c0_{i}", row_scale_layout(cfg),
                     {k_: s.kvr.k_scale[i & ((1 << k_) - 1)]
                      for k_ in range(_log2(cfg.max_keys_per_step) + 1)}) for i in range(p)]
        for stage in ("c1", "c1b", "c2"):
            nxt = [Signal(row_scale_layout(cfg), name=f"kf_{stage}_{i}") for i in range(p)]
            m.d.sync += [nxt[i].eq(kf[i]) for i in range(p)]
            kf = nxt
        s.__dict__.update(fin_mode=fin_mode, kf2=kf,
                          fin_ml_addr=fin_ml_addr,
                          accs=accs, sv4=sv4, g4=g4, k4=k4, vis=vis)

    def _softmax(self, m: Module, s: SimpleNamespace) -> None:
        """Scores through the softmax unit; m, ℓ and p/shift written back per row group."""
        cfg, p, gmax, blog = s.cfg, s.p, s.gmax, s.blog
        ml_rd, ml_wr, pb_wr, ml_layout = s.ml_rd, s.ml_wr, s.pb_wr, s.ml_layout
        sv4, vis, k4, g4, accs = s.sv4, s.vis, s.k4, s.g4, s.accs
        groups, exp_done = s.groups, s.exp_done
        # ---- softmax ----
        m.submodules.softmax = sm = SoftmaxUnit(cfg)
        m.d.comb += [sm.chain_log2.eq(blog), sm.i.valid.eq(sv4)]
        c_m, c_sh = self._multipliers(m, s)
        for i in range(p):
            m.d.comb += [sm.c_m[i].eq(c_m[i]), sm.c_sh[i].eq(c_sh[i])]
        m.d.comb += [sm.i.payload.visible.eq(vis), sm.i.payload.first.eq(k4 == 0)]
        ml_data = [ml_rd[i].data for i in range(p)]
        for i in range(p):
            src = s.from_row_bank(ml_data, ml_layout, i, "ml")
            m.d.comb += [sm.i.payload.s[i].eq(accs[i]), sm.i.payload.m[i].eq(src.m),
                         sm.i.payload.l[i].eq(src.l)]
        # tags through the softmax pipeline
        tg, tk = g4, k4
        for stage in range(sm.latency):
            ng, nk = Signal.like(g4, name=f"sm_g{stage}"), Signal.like(k4, name=f"sm_k{stage}")
            m.d.sync += [ng.eq(tg), nk.eq(tk)]
            pg, pk, tg, tk = tg, tk, ng, nk
        with m.If(sm.i.valid):
            m.d.sync += self.exp_busy.eq(self.exp_busy + 1)
        sm_ml = []
        for j in range(p):
            v = Signal(ml_layout, name=f"sm_ml{j}")
            m.d.comb += [v.m.eq(sm.o.payload.m[j]), v.l.eq(sm.o.payload.l[j])]
            sm_ml.append(v)
        for i in range(p):
            # row ρ's new m, ℓ come from the last line of its chain: ρ·b + b − 1
            res = s.from_chain_end(sm_ml, ml_layout, i, "ml")
            # the P buffer's write address (half by the step's parity, then the group), added
            # from the tags a stage early and registered per bank: no adder before the write
            # and each register fans out to one bank's LUT RAMs, not every bank's (the routed
            # fpga preset's speed-6 critical path, issue #31); distinct initial values keep
            # synthesis from merging the copies (they are written before any write uses them)
            pa = Signal(range(2 * gmax), name=f"pb_wa{i}", init=i % (2 * gmax))
            m.d.sync += pa.eq(Mux(pk[0], gmax, 0) + pg)
            m.d.comb += [
                ml_wr[i].addr.eq(tg), ml_wr[i].en.eq(sm.o.valid),
                ml_wr[i].data.eq(res),
                pb_wr[i].addr.eq(pa), pb_wr[i].en.eq(sm.o.valid),
                pb_wr[i].data.p.eq(sm.o.payload.p[i]),
                pb_wr[i].data.shift.eq(sm.o.payload.shift[i]),
            ]
        with m.If(sm.o.valid & (tg == groups - 1)):
            m.d.sync += exp_done.eq(tk + 1)


    def _multipliers(self, m: Module, s: SimpleNamespace):
        """Each lane's softmax multiplier, with its scores in c4: the tile's (``c_m``,
        ``c_sh``) or the row's own (``row_scales``: the Q buffer's table, read in c1b), and
        with ``key_scales`` times the lane's key factor: ``c_m·k_hi`` exactly (``k_hi``: the
        top ``KEY_MANT_BITS`` bits of ``k_m``; shift-and-add rows, no DSP) and the shift
        ``min(c_sh + k_e + KEY_MANT_BITS, SCALE_SHIFT_MAX)`` (model.numerics.scale). Two
        register stages: c2 → c3 the product and the shift, c3 → c4 the choice and the cap."""
        cfg, p, c = s.cfg, s.p, s.c
        cmb = cfg.numerics.scale_mult_bits
        sc = s.qbuf.sc_data
        c_m4 = [Signal(unsigned(cfg.scale_factor_bits), name=f"cm4_{i}") for i in range(p)]
        c_sh4 = [Signal(unsigned(6), name=f"csh4_{i}") for i in range(p)]
        for i in range(p):
            cm2 = Mux(c.row_scales, sc[i].c_m, c.c_m)
            sh2 = Mux(c.row_scales, sc[i].c_sh, c.c_sh)
            cm3 = Signal(unsigned(cmb), name=f"cm3_{i}")
            sh3 = Signal(unsigned(8), name=f"csh3_{i}")
            m.d.sync += cm3.eq(cm2)
            if not cfg.key_scales_supported:
                m.d.sync += [sh3.eq(sh2), c_m4[i].eq(cm3), c_sh4[i].eq(sh3)]
                continue
            kf = s.kf2[i]
            k_hi = kf.c_m[cmb - KEY_MANT_BITS:]
            prod3 = Signal(unsigned(cfg.scale_factor_bits), name=f"cmk3_{i}")
            m.d.sync += [prod3.eq(shift_add_product(cm2, k_hi)),
                         sh3.eq(sh2 + Mux(c.key_scales, kf.c_sh + KEY_MANT_BITS, 0))]
            m.d.sync += [c_m4[i].eq(Mux(c.key_scales, prod3, cm3)),
                         c_sh4[i].eq(Mux(sh3 > MAX_SCALE_SHIFT, MAX_SCALE_SHIFT, sh3))]
        return c_m4, c_sh4

    def _pv(self, m: Module, s: SimpleNamespace) -> None:
        """The P V pipeline: O = (O >> shift) + p·v per MAC, chained over a row's lines."""
        p, gmax, wmax = s.p, s.gmax, s.wmax
        issue, is_qk, g, w, st = s.issue, s.is_qk, s.g, s.w, s.st
        pb_rd, o_rd, o_wr, acc_word = s.pb_rd, s.o_rd, s.o_wr, s.acc_word
        blog, bmask = s.blog, s.bmask
        pe = s.pe
        # ---- P V pipeline ----
        # c0: read V and p/shift; c1: the MAC operands (registered); c1 also reads O; c2: the
        # products and the routed O words; c3: a chain head's O >> shift; c4: O = (O >> shift)
        # + p·v over each row's lines, written back from its last line.
        pv_issue = issue & ~is_qk
        for i in range(p):
            m.d.comb += pb_rd[i].addr.eq(Mux(st[0], gmax, 0) + g)
        pv_addr = Signal(range(gmax * wmax + 1))
        m.d.comb += pv_addr.eq(g * wmax + w)
        pvs = [Signal(name=f"pv_v{k}") for k in range(5)]
        addrs = [Signal.like(pv_addr, name=f"pv_addr{k}") for k in range(5)]
        zeros = [Signal(name=f"pv_zero{k}") for k in range(5)]
        m.d.comb += [pvs[0].eq(pv_issue), addrs[0].eq(pv_addr), zeros[0].eq(st == 0)]
        for k in range(1, 5):
            m.d.sync += [pvs[k].eq(pvs[k - 1]), addrs[k].eq(addrs[k - 1]),
                         zeros[k].eq(zeros[k - 1])]
        for i in range(p):
            pbv = pb_rd[i].data
            # combinational from the command (constant during a tile): with one key per step
            # it is a constant and synthesis drops the chain
            m.d.comb += [pe.p[i].eq(pbv.p), pe.shift[i].eq(pbv.shift),
                         pe.v[i].eq(s.lane_copy(s.kvr.v_data, i, "v")),
                         pe.o_old[i].eq(s.from_row_bank([o_rd[j].data for j in range(p)],
                                                        acc_word, i, "o")),
                         pe.head[i].eq((i & bmask) == 0)]
        m.d.comb += pe.zero.eq(zeros[3])
        chain = pe.o_new
        for i in range(p):
            m.d.comb += o_wr[i].data.eq(s.from_chain_end(chain, acc_word, i, "o"))
            # with b > 1 only the banks of real rows (ρ < p/b) take the result
            m.d.comb += [o_wr[i].addr.eq(addrs[4]),
                         o_wr[i].en.eq(pvs[4] & ((blog == 0) | ((i << blog) < p)))]
        s.addrs = addrs

    def _finalize(self, m: Module, s: SimpleNamespace) -> None:
        """Finalize: O words read row by row through the Finalize unit into the output
        FIFO."""
        cfg, p, lp, gmax, wmax = s.cfg, s.p, s.lp, s.gmax, s.wmax
        running, keys, words, c = s.running, s.keys, s.words, s.c
        o_rd, ml_rd, acc_word = s.o_rd, s.ml_rd, s.acc_word
        fin_mode, fin_ml_addr, addrs = s.fin_mode, s.fin_ml_addr, s.addrs
        steps_left = s.seq.steps_left
        # ---- finalize ----
        m.submodules.fin = fin = Finalize(cfg)
        m.submodules.ofifo = ofifo = StreamFIFO(out_word_layout(cfg), OUT_FIFO_DEPTH)
        frow = Signal(range(cfg.tile_rows + 1))
        fw = Signal(range(wmax + 1))
        f_issue = Signal()
        f_raw = Signal()    # the word issued is the row's statistics (lse): after its O words
        fwords = Signal(range(wmax + 2))
        m.d.comb += [fwords.eq(words + c.lse), f_raw.eq(fw == words)]
        inflight = Signal(range(OUT_FIFO_DEPTH + 1))
        drain = Signal(range(PV_DRAIN + 1))
        f_all = Signal()   # every word issued
        no_keys = Signal()
        m.d.comb += no_keys.eq(keys == 0)
        ready_fin = Signal()
        m.d.comb += ready_fin.eq(running & ~steps_left & (drain == PV_DRAIN))
        with m.If(running & ~steps_left & (drain != PV_DRAIN)):
            m.d.sync += drain.eq(drain + 1)
        m.d.comb += [
            fin_mode.eq(ready_fin),
            fin_ml_addr.eq(frow >> lp),
            f_issue.eq(ready_fin & ~f_all & (ofifo.level + inflight < OUT_FIFO_DEPTH)),
        ]
        fin_addr = Signal(range(gmax * wmax + 1))
        m.d.comb += fin_addr.eq((frow >> lp) * wmax + Mux(f_raw, 0, fw))
        for i in range(p):
            m.d.comb += o_rd[i].addr.eq(Mux(fin_mode, fin_addr, addrs[1]))
        with m.If(f_issue):
            m.d.sync += self.fin_busy.eq(self.fin_busy + 1)
            with m.If(fw == fwords - 1):
                m.d.sync += [fw.eq(0), frow.eq(frow + 1)]
                with m.If(frow == c.rows - 1):
                    m.d.sync += f_all.eq(1)
            with m.Else():
                m.d.sync += fw.eq(fw + 1)
        f_lane = Signal(range(p))
        fv1, fraw1 = Signal(), Signal()
        m.d.sync += [fv1.eq(f_issue), fraw1.eq(f_raw), f_lane.eq(frow[:lp] if lp else 0)]
        sel_o = Signal(acc_word)
        sel_l = Signal(cfg.row_sum_bits)
        sel_m = Signal(signed(cfg.max_bits + 1))
        with m.Switch(f_lane):
            for i in range(p):
                with m.Case(i):
                    m.d.comb += [sel_o.eq(o_rd[i].data), sel_l.eq(ml_rd[i].data.l),
                                 sel_m.eq(ml_rd[i].data.m)]
        # the selected row's O word and ℓ are registered before the finalize unit (with lse,
        # then its statistics: a row that saw no key reports m_init, model.numerics.row_stats)
        fv2 = Signal()
        empty = no_keys | (sel_l == 0)
        m.d.sync += [fv2.eq(fv1), fin.i.payload.o.eq(sel_o),
                     fin.i.payload.l.eq(Mux(no_keys, 0, sel_l)), fin.i.payload.raw.eq(fraw1),
                     fin.i.payload.m.eq(Mux(empty, -(1 << cfg.max_bits), sel_m))]
        m.d.comb += fin.i.valid.eq(fv2)
        # the finalize unit never waits: its words fit the FIFO by the issue rule above
        m.d.comb += [ofifo.i.valid.eq(fin.o.valid), ofifo.i.payload.eq(fin.o.payload)]
        with m.If(f_issue & ~ofifo.i.valid):
            m.d.sync += inflight.eq(inflight + 1)
        with m.Elif(~f_issue & ofifo.i.valid):
            m.d.sync += inflight.eq(inflight - 1)
        wiring.connect(m, ofifo.o, wiring.flipped(self.o))
        s.__dict__.update(f_all=f_all, inflight=inflight, fv1=fv1, fv2=fv2, ofifo=ofifo,
                          frow=frow, fw=fw, drain=drain, f_issue=f_issue)

    def _tile_control(self, m: Module, s: SimpleNamespace) -> None:
        """A tile starts once its Q rows are in and ends when its last output word has left:
        every unit returns to its idle state."""
        running, f_all, inflight, ofifo = s.running, s.f_all, s.inflight, s.ofifo
        seq, kvr, qbuf = s.seq, s.kvr, s.qbuf
        m.d.comb += [self.steps_done.eq(running & ~seq.steps_left), self.k_free.eq(kvr.k_free),
                     self.v_free.eq(kvr.v_free), self.active.eq(s.issue | s.f_issue)]
        start = Signal()
        m.d.comb += start.eq(qbuf.loaded & ~running & self.busy & ~f_all)
        with m.If(start):
            m.d.sync += running.eq(1)
        done = Signal()
        m.d.comb += done.eq(f_all & (inflight == 0) & ~ofifo.o.valid & ~s.fv1 & ~s.fv2)
        # the Q buffer is free for the next tile's rows once this tile has taken them (its
        # reads end with the steps: QBuffer.q_free); the rings and the sequencer at the end
        m.d.comb += [qbuf.clear.eq(start), kvr.clear.eq(done), seq.clear.eq(done)]
        with m.If(done):
            m.d.sync += [
                self.busy.eq(0), running.eq(0), f_all.eq(0), s.drain.eq(0),
                s.frow.eq(0), s.fw.eq(0), s.exp_done.eq(0),
            ]
        # internal state, for tests and debugging
        self.dbg = {"step": s.st, "k_wr": kvr.k_written, "v_wr": kvr.v_written,
                    "k_free": kvr.k_free, "v_free": kvr.v_free, "exp_done": s.exp_done,
                    "running": running, "q_done": qbuf.loaded, "f_all": f_all,
                    "frow": s.frow, "inflight": inflight, "drain": s.drain, "g": s.g,
                    "w": s.w, "ops": s.ops, "plen": seq.plen0, "kv_closed": kvr.closed}
