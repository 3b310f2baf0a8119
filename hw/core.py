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

from amaranth import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio.config import HardwareConfig
from attenio.contract.timing import TIMING
from attenio.errors import bad
from attenio.hw.finalize import Finalize, out_word_layout
from attenio.hw.softmax import SHIFT_BITS, SoftmaxUnit, m_bits
from attenio.model.rules import causal_visible

# Shortest Q Kᵀ or P V step, in cycles: it keeps a row group's m/ℓ read-modify-write (through
# the softmax pipeline) and O read-modify-write from overlapping the next access to the same
# row group. Steps with fewer than MIN_PHASE (group, word) pairs are padded.
MIN_PHASE = TIMING.min_phase
OUT_FIFO_DEPTH = TIMING.out_fifo_depth
# cycles from the step sequencer's end to the first finalize read of O: the last P V write
# (c4) is then done
PV_DRAIN = TIMING.pv_drain
COUNTER_BITS = 40


def _log2(x: int) -> int:
    return x.bit_length() - 1


def _is_pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def word_layout(cfg: HardwareConfig) -> data.ArrayLayout:
    """q elements of Q, K or V: one memory word and one stream beat."""
    return data.ArrayLayout(signed(cfg.data_bits), cfg.macs_per_line)


def _kps_bits(cfg: HardwareConfig) -> int:
    return max(1, (cfg.max_keys_per_step.bit_length() - 1).bit_length())


def qcmd_layout(cfg: HardwareConfig) -> data.StructLayout:
    """What the Q loader needs (from ``LOAD_Q``): rows, head dim, log2 keys per step."""
    return data.StructLayout({
        "rows": unsigned((cfg.tile_rows).bit_length()),
        "d": unsigned((cfg.max_head_dim).bit_length()),
        "kps_log2": unsigned(_kps_bits(cfg)),
    })


def kv_beat_layout(cfg: HardwareConfig) -> data.StructLayout:
    """One K/V beat: a word, which ring it goes to, the last word of its row, the last beat of
    the tile (the loader tags them, so the ring writer needs no command)."""
    return data.StructLayout({"data": word_layout(cfg), "v": 1, "last": 1, "end": 1})


def cmd_layout(cfg: HardwareConfig) -> data.StructLayout:
    return data.StructLayout({
        "rows": unsigned((cfg.tile_rows).bit_length()),
        "d": unsigned((cfg.max_head_dim).bit_length()),
        "keys": unsigned((cfg.max_seq_len).bit_length()),
        "c_m": unsigned(cfg.numerics.scale_mult_bits),
        "c_sh": unsigned(6),
        "causal": unsigned(1),
        "q_pos": unsigned(24),
        "diag": signed(25),
        # keys per step = 2**kps_log2 ≤ max_keys_per_step; with more than one,
        # rows·2**kps_log2 ≤ mac_lines
        "kps_log2": unsigned(_kps_bits(cfg)),
    })


class ComputeCore(wiring.Component):
    """One query tile: ``Q`` rows in, ``K``/``V`` rows in, ``O`` rows out.

    Ports
    -----
    qcmd : stream of ``qcmd_layout`` (from ``LOAD_Q``): taken when the core is idle and its Q
        buffer is not already loaded; opens the ``q`` stream for that many rows.
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
        Parameters this RTL does not support: ``mac_lines`` or ``macs_per_line`` not a power
        of two, ``softmax_block`` ≠ 1, ``exp_lanes`` ≠ ``mac_lines``.
    """

    def __init__(self, cfg: HardwareConfig):
        for name in ("mac_lines", "macs_per_line"):
            if not _is_pow2(getattr(cfg, name)):
                raise bad(name, getattr(cfg, name), "this RTL needs a power of two")
        if cfg.softmax_block != 1:
            raise bad("softmax_block", cfg.softmax_block,
                      "this RTL updates the running max every key (softmax_block = 1)")
        if cfg.exp_lanes != cfg.mac_lines:
            raise bad("exp_lanes", cfg.exp_lanes,
                      f"this RTL needs exp_lanes == mac_lines ({cfg.mac_lines})")
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

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        p, q = cfg.mac_lines, cfg.macs_per_line
        lp, lq = _log2(p), _log2(q)
        gmax = -(-cfg.tile_rows // p)
        wmax = -(-cfg.max_head_dim // q)
        ring = max(1, cfg.kv_ring_depth // 2)
        mb = m_bits(cfg)
        wl = word_layout(cfg)
        ml_layout = data.StructLayout({"m": signed(mb), "l": unsigned(cfg.row_sum_bits)})
        pb_layout = data.StructLayout({"p": unsigned(cfg.exp_bits),
                                       "shift": unsigned(SHIFT_BITS)})
        acc_word = data.ArrayLayout(signed(cfg.acc_bits), q)

        # ---- memories ----
        def banks(name, shape, depth, lut=False):
            """p memories; ``lut``: ask synthesis for distributed (LUT) RAM, which keeps a
            small table out of block RAM: a 64-word table would hold whole DP16KDs for a few
            percent of their bits."""
            rds, wrs = [], []
            for i in range(p):
                mem = Memory(shape=shape, depth=depth, init=[],
                             attrs={"ram_style": "distributed"} if lut else None)
                m.submodules[f"{name}{i}"] = mem
                rds.append(mem.read_port())
                wrs.append(mem.write_port())
            return rds, wrs

        q_rd, q_wr = banks("qbuf", wl, gmax * wmax)
        o_rd, o_wr = banks("obuf", acc_word, gmax * wmax)
        ml_rd, ml_wr = banks("ml", ml_layout, gmax, lut=True)
        pb_rd, pb_wr = banks("pbuf", pb_layout, 2 * gmax, lut=True)
        # The rings are replicated once per key a step can take, so a step reads the words of
        # all its keys in the same cycle (the rings are small: ring·⌈max_head_dim/q⌉ words).
        lkmax = _log2(cfg.max_keys_per_step)
        copies = cfg.max_keys_per_step
        k_rd, k_wr, v_rd, v_wr = [], [], [], []
        for cpy in range(copies):
            for name, rds, wrs in (("kring", k_rd, k_wr), ("vring", v_rd, v_wr)):
                mem = Memory(shape=wl, depth=ring * wmax, init=[])
                m.submodules[f"{name}{cpy}"] = mem
                rds.append(mem.read_port())
                wrs.append(mem.write_port())

        # ---- command registers ----
        c = Signal(cmd_layout(cfg))
        groups = Signal(range(gmax + 1))
        words = Signal(range(wmax + 1))
        ops = Signal(range(gmax * wmax + 1))
        plen = Signal(range(max(gmax * wmax, MIN_PHASE) + 1))
        keys = c.keys
        m.d.comb += self.cmd.ready.eq(~self.busy)
        # log2(keys per step); a constant 0 when the config allows one key per step, so
        # synthesis drops the chains and the routing between lines
        blog = Signal(range(lkmax + 1))
        m.d.comb += blog.eq(c.kps_log2)
        bmask = Signal(range(p + 1))
        m.d.comb += bmask.eq((1 << blog) - 1)
        with m.If(self.cmd.valid & self.cmd.ready):
            cm = self.cmd.payload
            g_new = ((cm.rows << cm.kps_log2) + (p - 1)) >> lp
            w_new = (cm.d + (q - 1)) >> lq
            m.d.sync += [c.eq(cm), groups.eq(g_new), words.eq(w_new), self.busy.eq(1)]
        # ops and the step length follow one cycle later (the core is loading Q by then)
        m.d.sync += ops.eq(groups * words)
        m.d.sync += plen.eq(Mux(groups * words > MIN_PHASE, groups * words, MIN_PHASE))

        # ---- Q loader (configured by qcmd, independent of the compute command) ----
        qrow = Signal(range(cfg.tile_rows + 1))
        qw = Signal(range(wmax + 1))
        q_loading = Signal()
        q_done = Signal()
        qc = Signal(qcmd_layout(cfg))
        q_words = Signal(range(wmax + 1))
        qblog = Signal(range(lkmax + 1))
        m.d.comb += qblog.eq(qc.kps_log2)
        m.d.comb += self.qcmd.ready.eq(~self.busy & ~q_loading & ~q_done)
        with m.If(self.qcmd.valid & self.qcmd.ready):
            m.d.sync += [qc.eq(self.qcmd.payload), q_loading.eq(1), qrow.eq(0), qw.eq(0),
                         q_words.eq((self.qcmd.payload.d + (q - 1)) >> lq)]
        m.d.comb += self.q.ready.eq(q_loading)

        def q_lane_mask(word_idx, lane):
            return (word_idx << lq) + lane < qc.d

        for i in range(p):
            # b = 1: row ρ lives in bank ρ mod p; b > 1 (one row group): row ρ is copied into
            # the b lines ρ·b … ρ·b+b−1 that take its b keys of a step
            mine = Mux(qblog == 0, (qrow[:lp] == i) if lp else 1, (i >> qblog) == qrow)
            m.d.comb += [
                q_wr[i].addr.eq((qrow >> lp) * wmax + qw),
                q_wr[i].en.eq(self.q.valid & self.q.ready & mine),
            ]
            for lane in range(q):
                m.d.comb += q_wr[i].data[lane].eq(
                    Mux(q_lane_mask(qw, lane), self.q.payload[lane], 0))
        with m.If(self.q.valid & self.q.ready):
            with m.If(qw == q_words - 1):
                m.d.sync += qw.eq(0)
                m.d.sync += qrow.eq(qrow + 1)
                with m.If(qrow == qc.rows - 1):
                    m.d.sync += [q_done.eq(1), q_loading.eq(0)]
            with m.Else():
                m.d.sync += qw.eq(qw + 1)

        # ---- K/V ring writer (driven by the beats' tags) ----
        k_wr_n = Signal(range(cfg.max_seq_len + 1))   # K rows fully written
        v_wr_n = Signal(range(cfg.max_seq_len + 1))
        k_free = Signal(range(cfg.max_seq_len + 1))   # K rows the PE array is done with
        v_free = Signal(range(cfg.max_seq_len + 1))
        kv_closed = Signal()                          # the tile's last beat is in
        kvw = Signal(range(wmax + 1))
        beat = self.kv.payload
        write_k = Signal()
        m.d.comb += write_k.eq(~beat.v)
        # ring occupancy (rows written, not yet freed) and room for a row, kept as registers
        # (off the AXI read-data path); room_k/room_v = k_wr_n − k_free < ring
        k_room, v_room = Signal(init=1), Signal(init=1)
        m.d.comb += self.kv.ready.eq(Mux(write_k, k_room, v_room) & ~kv_closed)
        k_slot = Signal(range(ring))
        v_slot = Signal(range(ring))
        m.d.comb += [
            k_slot.eq(k_wr_n % ring if not _is_pow2(ring) else k_wr_n[:_log2(ring)]),
            v_slot.eq(v_wr_n % ring if not _is_pow2(ring) else v_wr_n[:_log2(ring)]),
        ]
        take = self.kv.valid & self.kv.ready
        for wrs, slot, sel in ((k_wr, k_slot, write_k), (v_wr, v_slot, ~write_k)):
            for mem_wr in wrs:
                m.d.comb += [mem_wr.addr.eq(slot * wmax + kvw), mem_wr.en.eq(take & sel)]
                for lane in range(q):
                    # lanes past d come in as zeros (the loader pads the row's last word)
                    m.d.comb += mem_wr.data[lane].eq(beat.data[lane])
        with m.If(take):
            with m.If(beat.last):
                m.d.sync += kvw.eq(0)
                with m.If(write_k):
                    m.d.sync += k_wr_n.eq(k_wr_n + 1)
                with m.Else():
                    m.d.sync += v_wr_n.eq(v_wr_n + 1)
            with m.Else():
                m.d.sync += kvw.eq(kvw + 1)
            with m.If(beat.end):
                m.d.sync += kv_closed.eq(1)

        # occupancy bookkeeping: a row completes (+1) with its last beat; a step's end frees
        # kend − k_free rows (a register: both are steady during a step)
        take_row = Signal()
        m.d.comb += take_row.eq(take & beat.last)
        step_end = Signal()
        ring_occ = {}
        for name_, room_, inc_, free_ in (("k", k_room, take_row & write_k, k_free),
                                          ("v", v_room, take_row & ~write_k, v_free)):
            occ = Signal(range(ring + 1), name=f"{name_}_occ")
            rows = Signal(range(cfg.max_keys_per_step + 1), name=f"{name_}_step_rows")
            ring_occ[name_] = (occ, rows, inc_, free_, room_)

        # ---- step sequencer ----
        # A step takes b = 2**kps_log2 keys: steps = ⌈keys/b⌉, step st covers keys st·b ….
        steps = Signal(range(cfg.max_seq_len + 1))
        m.d.comb += steps.eq((keys + bmask) >> blog)
        running = Signal()
        ph = Signal(range(2 * cfg.max_seq_len + 1))
        cnt = Signal.like(plen)
        g = Signal(range(gmax + 1))
        w = Signal(range(wmax + 1))
        exp_done = Signal(range(cfg.max_seq_len + 1))   # steps whose softmax is written
        last_ph = Signal()
        is_qk = Signal()
        st = Signal(range(cfg.max_seq_len + 1))         # the current step
        kbase = Signal(range(cfg.max_seq_len + 1))      # its first key
        kend = Signal(range(cfg.max_seq_len + 1))       # one past its last key
        more = Signal()                                 # ph is a step of the tile

        # The phase's fields are registers (off the issue path). While idle (ph = 0) they are
        # those of phase 0, from the command (in one cycle before the tile runs); at a step's
        # end, those of ph + 1, computed in two register stages after ph last changed (a step
        # lasts ≥ MIN_PHASE cycles) from steps, itself a register of the command.
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
        with m.If(~running):
            m.d.sync += [last_ph.eq(0), is_qk.eq(1), st.eq(0), kbase.eq(0),
                         kend.eq(key_end(0)), more.eq(keys != 0)]
        with m.Elif(step_end):
            for f_, v in zip(fields, nfields, strict=True):
                m.d.sync += f_.eq(v)
        steps_left = Signal()
        m.d.comb += steps_left.eq(running & more)
        can_start = Signal()
        m.d.comb += can_start.eq(Mux(is_qk, k_wr_n >= kend,
                                     (v_wr_n >= kend) & (exp_done > st)))
        active = Signal()
        m.d.comb += active.eq(steps_left & ((cnt != 0) | can_start))
        issue = Signal()
        m.d.comb += issue.eq(active & (cnt < ops))
        with m.If(issue):
            with m.If(w == words - 1):
                m.d.sync += [w.eq(0), g.eq(g + 1)]
            with m.Else():
                m.d.sync += w.eq(w + 1)
        plen_m1 = Signal.like(plen)
        m.d.sync += plen_m1.eq(plen - 1)
        m.d.comb += step_end.eq(active & (cnt == plen_m1))
        with m.If(active):  # after the issue counters: the end of a step resets them
            with m.If(step_end):
                m.d.sync += [cnt.eq(0), ph.eq(ph + 1), g.eq(0), w.eq(0)]
                with m.If(is_qk):
                    m.d.sync += k_free.eq(kend)
                with m.Else():
                    m.d.sync += v_free.eq(kend)
            with m.Else():
                m.d.sync += cnt.eq(cnt + 1)
        # the rings' occupancy and room (see the K/V ring writer)
        for name_, (occ, rows, inc_, free_, room_) in ring_occ.items():
            dec = step_end & (is_qk if name_ == "k" else ~is_qk)
            nocc = Signal(signed(occ.shape().width + 2), name=f"{name_}_occ_next")
            m.d.comb += nocc.eq(occ + inc_ - Mux(dec, rows, 0))
            m.d.sync += [rows.eq(kend - free_), occ.eq(nocc), room_.eq(nocc < ring)]
        with m.If(steps_left & ~active):
            with m.If(is_qk | (v_wr_n < kend)):
                m.d.sync += self.pe_wait_kv.eq(self.pe_wait_kv + 1)
            with m.Else():
                m.d.sync += self.pe_wait_exp.eq(self.pe_wait_exp + 1)
        with m.If(active & ~issue):
            m.d.sync += self.pe_pad.eq(self.pe_pad + 1)
        with m.If(issue):
            m.d.sync += self.pe_busy.eq(self.pe_busy + 1)

        def slot_of(x):
            return x[:_log2(ring)] if _is_pow2(ring) else x % ring

        # memory read addresses (c0): ring copy s reads key kbase + s
        for i in range(p):
            m.d.comb += [q_rd[i].addr.eq(g * wmax + w)]
        for cpy in range(copies):
            addr = slot_of(kbase + cpy) * wmax + w
            m.d.comb += [k_rd[cpy].addr.eq(addr), v_rd[cpy].addr.eq(addr)]

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

        def lane_copy(rds, i, name):
            """The ring word line i uses: copy (i mod b)."""
            return pick(f"{name}_word{i}", wl,
                        {k_: rds[i & ((1 << k_) - 1)].data for k_ in range(lkmax + 1)})

        def from_row_bank(datas, shape, i, name):
            """Line i's chain starts from the state of row i >> log2(b), kept in that bank."""
            return pick(f"{name}_src{i}", shape,
                        {k_: datas[i >> k_] for k_ in range(lkmax + 1)})

        def from_chain_end(outs, shape, i, name):
            """Bank i (row i) takes the result of its chain's last line, i·b + b − 1."""
            return pick(f"{name}_res{i}", shape,
                        {k_: outs[min(p - 1, (i << k_) + (1 << k_) - 1)]
                         for k_ in range(lkmax + 1)})

        # ---- Q Kᵀ pipeline ----
        qk_issue = issue & is_qk
        v1 = Signal()
        g1, g2, g3 = (Signal.like(g, name=f"qk_g{k}") for k in (1, 2, 3))
        k1, k2, k3 = (Signal.like(st, name=f"qk_st{k}") for k in (1, 2, 3))
        first1, first2 = Signal(), Signal()
        last1, last2 = Signal(), Signal()
        m.d.sync += [v1.eq(qk_issue), g1.eq(g), k1.eq(st), first1.eq(w == 0),
                     last1.eq(w == words - 1)]
        prod_bits = 2 * cfg.data_bits
        prods = [[Signal(signed(prod_bits), name=f"qk_p{i}_{lane}") for lane in range(q)]
                 for i in range(p)]
        # c1 → c2: the MAC operands are registered (below); the products follow in c3
        v1b, first1b, last1b = Signal(), Signal(), Signal()
        g1b, k1b = Signal.like(g, name="qk_g1b"), Signal.like(st, name="qk_st1b")
        m.d.sync += [v1b.eq(v1), g1b.eq(g1), k1b.eq(k1), first1b.eq(first1), last1b.eq(last1)]
        v2 = Signal()
        m.d.sync += [v2.eq(v1b), g2.eq(g1b), k2.eq(k1b), first2.eq(first1b), last2.eq(last1b)]
        kwords = [lane_copy(k_rd, i, "k") for i in range(p)]
        # the products are formed in the P V section: one multiplier per MAC serves both steps
        sums = [Signal(signed(prod_bits + lq + 1), name=f"qk_sum{i}") for i in range(p)]
        v3, first3, last3 = Signal(), Signal(), Signal()
        m.d.sync += [v3.eq(v2), g3.eq(g2), k3.eq(k2), first3.eq(first2), last3.eq(last2)]
        for i in range(p):
            total = prods[i][0]
            for lane in range(1, q):
                total = total + prods[i][lane]
            m.d.sync += sums[i].eq(total)
        accs = [Signal(signed(cfg.score_bits), name=f"qk_acc{i}") for i in range(p)]
        sv4 = Signal()  # accs hold a finished group of scores
        g4, k4 = Signal.like(g), Signal.like(st)
        with m.If(v3):
            for i in range(p):
                m.d.sync += accs[i].eq(Mux(first3, sums[i], accs[i] + sums[i]))
        m.d.sync += [sv4.eq(v3 & last3), g4.eq(g3), k4.eq(k3)]
        # m/ℓ read for the finished group is issued with the last accumulation (c4)
        fin_mode = Signal()
        fin_ml_addr = Signal(range(gmax + 1))
        for i in range(p):
            m.d.comb += ml_rd[i].addr.eq(Mux(fin_mode, fin_ml_addr, g3))
        # visibility of key (k4·b + slot) to the row of each line: causal mask and, in the
        # last step, keys past the end
        vis = Signal(p)
        for i in range(p):
            row = Mux(blog == 0, (g4 << lp) + i, i >> blog)
            key_i = (k4 << blog) + (i & bmask)
            m.d.comb += vis[i].eq((key_i < keys)
                                  & (~c.causal | causal_visible(key_i, row + c.q_pos, c.diag)))

        # ---- softmax ----
        m.submodules.softmax = sm = SoftmaxUnit(cfg)
        m.d.comb += [sm.c_m.eq(c.c_m), sm.c_sh.eq(c.c_sh), sm.chain_log2.eq(blog),
                     sm.i.valid.eq(sv4)]
        m.d.comb += [sm.i.payload.visible.eq(vis), sm.i.payload.first.eq(k4 == 0)]
        ml_data = [ml_rd[i].data for i in range(p)]
        for i in range(p):
            src = from_row_bank(ml_data, ml_layout, i, "ml")
            m.d.comb += [sm.i.payload.s[i].eq(accs[i]), sm.i.payload.m[i].eq(src.m),
                         sm.i.payload.l[i].eq(src.l)]
        # tags through the softmax pipeline
        tg, tk = g4, k4
        for stage in range(sm.latency):
            ng, nk = Signal.like(g4, name=f"sm_g{stage}"), Signal.like(k4, name=f"sm_k{stage}")
            m.d.sync += [ng.eq(tg), nk.eq(tk)]
            tg, tk = ng, nk
        with m.If(sm.i.valid):
            m.d.sync += self.exp_busy.eq(self.exp_busy + 1)
        sm_ml = []
        for j in range(p):
            v = Signal(ml_layout, name=f"sm_ml{j}")
            m.d.comb += [v.m.eq(sm.o.payload.m[j]), v.l.eq(sm.o.payload.l[j])]
            sm_ml.append(v)
        for i in range(p):
            # row ρ's new m, ℓ come from the last line of its chain: ρ·b + b − 1
            res = from_chain_end(sm_ml, ml_layout, i, "ml")
            m.d.comb += [
                ml_wr[i].addr.eq(tg), ml_wr[i].en.eq(sm.o.valid),
                ml_wr[i].data.eq(res),
                pb_wr[i].addr.eq(Mux(tk[0], gmax, 0) + tg), pb_wr[i].en.eq(sm.o.valid),
                pb_wr[i].data.p.eq(sm.o.payload.p[i]),
                pb_wr[i].data.shift.eq(sm.o.payload.shift[i]),
            ]
        with m.If(sm.o.valid & (tg == groups - 1)):
            m.d.sync += exp_done.eq(tk + 1)

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
        o_old = [Signal(acc_word, name=f"pv_o{i}") for i in range(p)]
        o_pv = [[Signal(signed(cfg.pv_bits + 1), name=f"pv_p{i}_{lane}") for lane in range(q)]
                for i in range(p)]
        sh1b = [Signal(unsigned(SHIFT_BITS), name=f"pv_sh1b_{i}") for i in range(p)]
        sh2 = [Signal(unsigned(SHIFT_BITS), name=f"pv_sh{i}") for i in range(p)]
        head2 = Signal(p)
        opa = [[Signal(signed(cfg.exp_bits + 1), name=f"mac_a{i}_{lane}") for lane in range(q)]
               for i in range(p)]
        opb = [[Signal(signed(cfg.data_bits), name=f"mac_b{i}_{lane}") for lane in range(q)]
               for i in range(p)]
        for i in range(p):
            pbv = pb_rd[i].data
            vword = lane_copy(v_rd, i, "v")
            src = from_row_bank([o_rd[j].data for j in range(p)], acc_word, i, "o")
            # combinational from the command (constant during a tile): with one key per step
            # it is a constant and synthesis drops the chain
            m.d.comb += head2[i].eq((i & bmask) == 0)
            m.d.sync += [o_old[i].eq(src), sh1b[i].eq(pbv.shift), sh2[i].eq(sh1b[i])]
            for lane in range(q):
                # One multiplier per MAC for both steps (a step is Q Kᵀ or P V, never both):
                # q·k (B × B signed) or p·v (PF+1 unsigned × B signed) fits one 18×18 DSP.
                # Its operands are registered (c1 → c2), its product too (c2 → c3).
                m.d.sync += [opa[i][lane].eq(Mux(v1, q_rd[i].data[lane], pbv.p)),
                             opb[i][lane].eq(Mux(v1, kwords[i][lane], vword[lane]))]
                prod = Signal(signed(cfg.pv_bits + 1), name=f"mac{i}_{lane}")
                m.d.comb += prod.eq(opa[i][lane] * opb[i][lane])
                m.d.sync += [prods[i][lane].eq(prod), o_pv[i][lane].eq(prod)]
        # c3: a chain head's own O word, shifted (registered)
        o_sh3 = [Signal(acc_word, name=f"pv_osh{i}") for i in range(p)]
        sh3 = [Signal(unsigned(SHIFT_BITS), name=f"pv_sh3_{i}") for i in range(p)]
        o_pv3 = [[Signal(signed(cfg.pv_bits + 1), name=f"pv_p3_{i}_{lane}") for lane in range(q)]
                 for i in range(p)]
        for i in range(p):
            m.d.sync += sh3[i].eq(sh2[i])
            for lane in range(q):
                m.d.sync += [o_sh3[i][lane].eq(Mux(zeros[3], 0, o_old[i][lane]) >> sh2[i]),
                             o_pv3[i][lane].eq(o_pv[i][lane])]
        # c4: O = (O >> shift) + p·v, chained over a row's lines, written from its last line
        chain = []
        for i in range(p):
            out = Signal(acc_word, name=f"pv_new{i}")
            for lane in range(q):
                src = (o_sh3[i][lane] if i == 0
                       else Mux(head2[i], o_sh3[i][lane], chain[i - 1][lane] >> sh3[i]))
                m.d.comb += out[lane].eq(src + o_pv3[i][lane])
            chain.append(out)
        for i in range(p):
            m.d.comb += o_wr[i].data.eq(from_chain_end(chain, acc_word, i, "o"))
            # with b > 1 only the banks of real rows (ρ < p/b) take the result
            m.d.comb += [o_wr[i].addr.eq(addrs[4]),
                         o_wr[i].en.eq(pvs[4] & ((blog == 0) | ((i << blog) < p)))]

        # ---- finalize ----
        m.submodules.fin = fin = Finalize(cfg)
        m.submodules.ofifo = ofifo = fifo.SyncFIFOBuffered(
            width=len(self.o.payload.as_value()), depth=OUT_FIFO_DEPTH)
        frow = Signal(range(cfg.tile_rows + 1))
        fw = Signal(range(wmax + 1))
        f_issue = Signal()
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
        m.d.comb += fin_addr.eq((frow >> lp) * wmax + fw)
        for i in range(p):
            m.d.comb += o_rd[i].addr.eq(Mux(fin_mode, fin_addr, addrs[1]))
        with m.If(f_issue):
            m.d.sync += self.fin_busy.eq(self.fin_busy + 1)
            with m.If(fw == words - 1):
                m.d.sync += [fw.eq(0), frow.eq(frow + 1)]
                with m.If(frow == c.rows - 1):
                    m.d.sync += f_all.eq(1)
            with m.Else():
                m.d.sync += fw.eq(fw + 1)
        f_lane = Signal(range(p))
        fv1 = Signal()
        m.d.sync += [fv1.eq(f_issue), f_lane.eq(frow[:lp] if lp else 0)]
        sel_o = Signal(acc_word)
        sel_l = Signal(cfg.row_sum_bits)
        with m.Switch(f_lane):
            for i in range(p):
                with m.Case(i):
                    m.d.comb += [sel_o.eq(o_rd[i].data), sel_l.eq(ml_rd[i].data.l)]
        # the selected row's O word and ℓ are registered before the finalize unit
        fv2 = Signal()
        m.d.sync += [fv2.eq(fv1), fin.i.payload.o.eq(sel_o),
                     fin.i.payload.l.eq(Mux(no_keys, 0, sel_l))]
        m.d.comb += fin.i.valid.eq(fv2)
        m.d.comb += [ofifo.w_en.eq(fin.o.valid), ofifo.w_data.eq(fin.o.payload.as_value())]
        with m.If(f_issue & ~ofifo.w_en):
            m.d.sync += inflight.eq(inflight + 1)
        with m.Elif(~f_issue & ofifo.w_en):
            m.d.sync += inflight.eq(inflight - 1)
        m.d.comb += [
            self.o.valid.eq(ofifo.r_rdy),
            self.o.payload.as_value().eq(ofifo.r_data),
            ofifo.r_en.eq(self.o.ready),
        ]

        # internal state, for tests and debugging
        self.dbg = {"ph": ph, "cnt": cnt, "step": st, "k_wr": k_wr_n, "v_wr": v_wr_n,
                    "k_free": k_free, "v_free": v_free, "exp_done": exp_done,
                    "running": running, "q_done": q_done, "f_all": f_all, "frow": frow,
                    "inflight": inflight, "drain": drain, "g": g, "w": w, "ops": ops,
                    "plen": plen, "qrow": qrow, "kvw": kvw, "kv_closed": kv_closed}

        m.d.comb += [self.steps_done.eq(running & ~steps_left), self.k_free.eq(k_free),
                     self.v_free.eq(v_free), self.active.eq(issue | f_issue)]

        # ---- tile start and end ----
        with m.If(q_done & ~running & self.busy & ~f_all):
            m.d.sync += running.eq(1)
        done = Signal()
        m.d.comb += done.eq(f_all & (inflight == 0) & ~ofifo.r_rdy & ~fv1 & ~fv2)
        with m.If(done):
            m.d.sync += [
                self.busy.eq(0), running.eq(0), q_done.eq(0), f_all.eq(0), drain.eq(0),
                frow.eq(0), fw.eq(0), ph.eq(0), cnt.eq(0), g.eq(0),
                w.eq(0), exp_done.eq(0), k_wr_n.eq(0), v_wr_n.eq(0), k_free.eq(0),
                v_free.eq(0), kv_closed.eq(0), kvw.eq(0),
            ]
            for occ, _, _, _, room_ in ring_occ.values():
                m.d.sync += [occ.eq(0), room_.eq(1)]
        return m
