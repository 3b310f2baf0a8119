"""Cycle-level schedule generator: tiling, the program, and every engine's timeline.

``schedule(hw, wl, dataflow)`` chooses the tiling (model/io_analysis.py), emits the program
(contract/program.py, docs/isa.md) and runs the timing model of docs/architecture.md's engines:

* **DMA read**: one AXI read port; requests in order, one per cycle, at most
  ``Timing.max_outstanding`` in flight; each burst's data starts ``dram_latency`` cycles after its
  request (or when the channel frees) and takes ``⌈bytes / rate⌉`` cycles, ``rate =
  min(dram_bytes_per_cycle, AXI bytes)``. Bursts split at 256 beats and 4 KB boundaries.
* **DMA write**: the same for writes; a burst's response returns ``dram_latency`` after its data.
* **PE array**: ``mac_lines = p`` lines of ``macs_per_line = q`` MACs; a line owns one query
  row, its MACs ``q`` columns (one memory word). Per step of b keys over the tile's r rows,
  ``QK`` and ``PV`` each issue ``⌈r·b/p⌉·⌈d/q⌉`` (row group, word) pairs, one per cycle, and
  last at least ``Timing.min_phase`` cycles; order ``QK0, QK1, PV0, QK2, PV1, …`` so the
  softmax of key j hides behind ``QK(j+1)``.
* **EXP**: a pipeline fed by the ``QK`` step, one row group per cycle; a step's p values are
  ready ``Timing.p_ready_latency`` cycles after its last ``QK`` issue.
* **Finalize**: ``Timing.pv_drain`` cycles after the last ``PV``, one output word (q elements of
  one row) per cycle into a FIFO that the paired ``STORE_O`` drains; the core is free for the
  next tile when the last word has left.
* **Fetch and dispatch**: a separate instruction read port fetches chunks of
  ``Timing.fetch_chunk`` instructions, two chunks ahead; instructions dispatch in order into
  queues of depth ``Timing.queue_depth``.

The timeline is exact for this model (integer cycles). Inside a tile the key loop reaches a
periodic steady state within a few ring depths; once the loop's state (all pending times,
relative to one of them) repeats, the remaining periods are skipped arithmetically, which makes
a 128K-token head cost milliseconds per tile, not per key.

``flat`` and ``standard`` do not fit this instruction set (their tiles hold whole rows of S, or
S and P leave the chip); they run a phase-level model on the same engines and DRAM model and
emit no program.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from attenio.config import HardwareConfig, Workload
from attenio.contract.program import INSTR_BYTES, NEXT, PREV, QUEUES, Instr, Op, validate
from attenio.contract.rules import axi_bursts, keys_seen, kv_blocks_during, skipped_groups
from attenio.contract.timing import Timing
from attenio.errors import bad
from attenio.model import io_analysis as io
from attenio.model.numerics import ScaleParams, softmax_scale

__all__ = ["Timing", "Layout", "Schedule", "schedule", "build_program", "simulate_program"]

ENGINES = ("dma_read", "dma_write", "pe", "exp", "finalize")
# Skip whole steady-state periods of the key loop (exact; tests turn it off to prove it).
STEADY_STATE_SKIP = True
# causal tiles skip, step by step, the row groups that see none of the step's keys (the RTL's
# StepSequencer does the same)
ROW_GROUP_SKIP = True


@dataclass(frozen=True)
class Layout:
    """Byte addresses of the program and the tensors in DRAM (all 4 KB aligned)."""

    program: int
    q: int
    k: int
    v: int
    o: int
    end: int

    @classmethod
    def packed(cls, hw: HardwareConfig, wl: Workload, program_bytes: int,
               row_scales: bool = False, key_scales: bool = False) -> Layout:
        """Program, Q, K, V and O one after another, each region 4 KB aligned; with
        ``row_scales`` each Q row is followed by the word holding its multiplier, with
        ``key_scales`` each K row by the word holding its factor."""
        def up(x):
            return -(-x // 4096) * 4096

        eb = hw.element_bytes
        dp = hw.row_elements(wl.head_dim)      # rows padded to whole words
        qb = wl.batch * wl.heads * wl.seq_q * hw.q_row_elements(wl.head_dim, row_scales) * eb
        kb = wl.batch * wl.kv_heads * wl.seq_k * hw.k_row_elements(wl.head_dim, key_scales) * eb
        vb = wl.batch * wl.kv_heads * wl.seq_k * dp * eb
        p = 0
        q = up(p + program_bytes)
        k = up(q + qb)
        v = up(k + kb)
        o = up(v + vb)
        return cls(program=p, q=q, k=k, v=v, o=o, end=up(o + hw.o_bytes(wl)))


# ---- program generation -----------------------------------------------------------------------

def _keys_per_step(hw: HardwareConfig, rows: int, dataflow_b: int, ring_limit: int) -> int:
    if rows >= hw.mac_lines:
        return min(dataflow_b, ring_limit)
    return io.keys_per_step(hw.mac_lines, rows, min(ring_limit, hw.max_keys_per_step))


def build_program(hw: HardwareConfig, wl: Workload, tiling: io.Tiling, layout: Layout,
                  scale: ScaleParams) -> list[Instr]:
    """The instruction stream for ``wl`` under ``tiling`` (attenio, fa2, fa2-uncapped).

    Per tile: ``LOAD_Q, LOAD_KV, COMPUTE, FINALIZE, STORE_O`` with tokens load→compute (Q
    ready, pushed by ``LOAD_Q``) and compute→load (Q buffer free, pushed by ``COMPUTE`` once
    the tile's last step has issued: the next tile's Q rows load while this one's output is
    finalized and stored, the third overlap level);
    ``LOAD_KV`` feeds ``COMPUTE`` and ``FINALIZE`` feeds ``STORE_O`` through streams, paired in
    program order. One ``END`` closes the program. Program length is ``5·tiles + 1``
    instructions, O(N/a) per head.
    """
    eb, ob = hw.element_bytes, hw.out_element_bytes
    d = wl.head_dim
    dp = hw.row_elements(d)      # a row's pitch in DRAM: whole words (Layout.packed)
    rs = int(scale.per_row)
    dq = hw.q_row_elements(d, bool(rs))      # a Q row's pitch: with its multiplier's word
    c_m, c_sh = (0, 0) if rs else (scale.c_m, scale.c_sh)
    ks = int(scale.k_m is not None)
    dk = hw.k_row_elements(d, bool(ks))     # a K row's pitch: with its factor's word
    g = tiling.heads_per_tile
    pos = tiling.positions
    attenio_flow = tiling.dataflow == "attenio"
    causal = io.causal_mask(wl)      # a mask that hides nothing (decode) is not applied
    ring = hw.ring_rows if attenio_flow else tiling.keys_per_step
    tiles = []
    for b in range(wl.batch):
        for hk in range(wl.kv_heads):
            for h0 in range(hk * wl.group_size, (hk + 1) * wl.group_size, g):
                for p0, rows in io.query_tiles(wl.seq_q, pos, causal):
                    tiles.append((b, hk, h0, p0, rows))
    prog: list[Instr] = []
    last = len(tiles) - 1
    for t, (b, hk, h0, p0, rows) in enumerate(tiles):
        keys = io.tile_keys(p0, rows, wl.seq_q, wl.seq_k, causal, tiling.kv_block)
        kps = (_keys_per_step(hw, rows * g, 1, ring) if attenio_flow and not tiling.fixed_b
               else tiling.keys_per_step)
        q_addr = layout.q + ((b * wl.heads + h0) * wl.seq_q + p0) * dq * eb
        o_addr = layout.o + ((b * wl.heads + h0) * wl.seq_q + p0) * dp * ob
        kv_off = (b * wl.kv_heads + hk) * wl.seq_k * eb
        common = {"rows": rows, "heads": g, "d": d}
        prog.append(Instr(Op.LOAD_Q, {**common, "keys_per_step": kps, "addr": q_addr,
                                      "row_stride": dq * eb,
                                      "head_stride": wl.seq_q * dq * eb, "row_scales": rs},
                          pop_next=t > 0, push_next=True))
        if keys > 0:
            prog.append(Instr(Op.LOAD_KV, {"keys": keys, "d": d, "keys_per_step": kps,
                                           "k_addr": layout.k + kv_off * dk,
                                           "v_addr": layout.v + kv_off * dp,
                                           "row_stride": dk * eb,
                                           "key_scales": ks}))
        prog.append(Instr(Op.COMPUTE, {**common, "causal": int(causal), "keys": keys,
                                       "keys_per_step": kps, "q_pos": p0,
                                       "diag": wl.seq_k - wl.seq_q, "c_m": c_m,
                                       "c_sh": c_sh, "row_scales": rs, "key_scales": ks},
                          pop_prev=True, push_prev=t < last))
        # the Q buffer is free once the tile's steps have issued (the core takes the next
        # tile's Q rows then); FINALIZE needs no token
        prog.append(Instr(Op.FINALIZE, dict(common)))
        prog.append(Instr(Op.STORE_O, {**common, "addr": o_addr, "row_stride": dp * ob,
                                       "head_stride": wl.seq_q * dp * ob}))
    prog.append(Instr(Op.END))
    return prog


# ---- timing model ------------------------------------------------------------------------------

def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


class Channel:
    """One AXI direction in front of the DRAM model (see the module docstring)."""

    def __init__(self, hw: HardwareConfig, timing: Timing, write: bool = False, gap: int = 1):
        self.latency = hw.dram_latency
        self.rate = min(hw.dram_bytes_per_cycle, hw.axi_data_bytes)
        self.beat = hw.axi_data_bytes
        self.max_beats = timing.max_burst_beats
        self.max_out = timing.max_outstanding
        self.gap = gap
        self.write = write
        self.data_delay = timing.fifo_latency if write else 0  # W follows AW through a FIFO
        self.free = 0          # data channel busy until
        self.last_req = -1     # cycle of the last request
        self.done = deque()    # completion (response) times of the last max_out bursts
        self.busy = 0
        self.nbytes = 0
        self.activity = None   # a list to record (start, end, busy) of each burst's data in

    def bursts(self, addr: int, n: int):
        return axi_bursts(addr, n, self.beat, self.max_beats)

    def transfer(self, ready: int, addr: int, n: int) -> tuple[int, int]:
        """Move ``n`` bytes at ``addr``, requesting no earlier than ``ready``.
        Returns (last request cycle, completion cycle)."""
        end = ready
        for _, chunk in self.bursts(addr, n):
            req = max(ready, self.last_req + self.gap)
            if len(self.done) == self.max_out:
                req = max(req, self.done[0])
            self.last_req = req
            start = max(req + self.data_delay if self.write else req + self.latency, self.free)
            dur = _cdiv(chunk, self.rate)
            self.free = start + dur
            end = self.free + self.latency if self.write else self.free
            self.done.append(end)
            if len(self.done) > self.max_out:
                self.done.popleft()
            self.busy += dur
            self.nbytes += chunk
            if self.activity is not None:
                self.activity.append((start, start + dur, dur))
        return self.last_req, end

    def state(self, ref: int) -> tuple:
        return (self.free - ref, self.last_req - ref, tuple(x - ref for x in self.done))

    def shift(self, dt: int) -> None:
        self.free += dt
        self.last_req += dt
        self.done = deque(x + dt for x in self.done)


@dataclass
class Stats:
    busy: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ENGINES, 0))
    stalls: dict[str, int] = field(default_factory=dict)
    useful_macs: int = 0
    # engine → [(start, end, busy cycles spread over it)], kept with the spans (for plots)
    activity: dict[str, list] | None = None

    def active(self, engine: str, start: int, end: int, busy: int) -> None:
        if self.activity is not None and busy > 0 and end > start:
            self.activity[engine].append((start, end, busy))

    def stall(self, cause: str, cycles: int) -> None:
        if cycles > 0:
            self.stalls[cause] = self.stalls.get(cause, 0) + cycles


@dataclass
class Span:
    """One interval on one engine's track (for traces)."""

    engine: str
    name: str
    start: int
    end: int
    args: dict


def _tile_loop(hw, timing, rd: Channel, stats: Stats, kv: Instr, comp: Instr,
               kv_start: int, pe_start: int, ring_rows: int, eb: int,
               step_spans: list | None = None, tile: int = 0):
    """Co-simulate one LOAD_KV with its COMPUTE. Returns (kv issue end, kv done, pe end,
    exp span). With ``step_spans``, each step the loop simulates appends its spans there:
    ``QK s`` and ``PV s`` on the PE array, ``K s`` and ``V s`` (the block's data on the read
    channel), and one ``steady state`` span for the periods it skips."""
    rows = comp.rows * comp.heads
    d = comp.d
    b = comp.keys_per_step
    keys = comp.keys
    steps = _cdiv(keys, b)
    lanes = hw.exp_lanes
    ck = max(1, ring_rows // b)
    # whole words, as the DMA moves rows (a K row with its factor's word; V rows then lie a
    # word closer: K and V are both contiguous or neither)
    ks = bool(kv.args.get("key_scales", 0))
    k_bytes = hw.k_row_elements(d, ks) * eb
    v_bytes = hw.row_elements(d) * eb
    v_stride = hw.v_row_stride(kv.row_stride, ks)
    contiguous = kv.row_stride == k_bytes

    words = hw.words(d)
    p = hw.mac_lines
    groups = _cdiv(rows * b, p)
    # causal row-group skipping (one head, one key per step): a step's first key k is seen
    # only by rows ρ ≥ k − q_pos − diag, so the groups below skip its Q Kᵀ and P V
    skip = bool(ROW_GROUP_SKIP and comp.causal and comp.heads == 1 and b == 1 and groups > 1)

    def gmin(s):
        return skipped_groups(s * b, comp.q_pos, comp.diag, p, groups) if skip else 0

    def next_change(s):
        """The first step after s whose skipped groups differ (steps when none does)."""
        if not skip or gmin(s) == groups - 1:
            return steps
        return max(s + 1, _cdiv((gmin(s) + 1) * p + comp.q_pos + comp.diag, b))

    def pe_ops(s, nk):
        # row groups of mac_lines rows (nk keys side by side when rows < lines) × words of d
        return (_cdiv(rows * nk, p) - gmin(s)) * words

    def pe_cycles(s, nk):
        return max(pe_ops(s, nk), timing.min_phase)

    def exp_cycles(s, nk):
        return _cdiv((rows - gmin(s) * p) * nk, lanes)

    def step_span(engine, name, start, end):
        if step_spans is not None:
            step_spans.append(Span(engine, name, start, end, {"tile": tile}))

    def load(s, which, ready):
        base, stride, row_bytes = ((kv.k_addr, kv.row_stride, k_bytes) if which == "K"
                                   else (kv.v_addr, v_stride, v_bytes))
        nk = min(b, keys - s * b)
        addr = base + s * b * stride
        if contiguous:
            out = rd.transfer(ready, addr, nk * row_bytes)
        else:
            out = (ready, ready)
            for r in range(nk):
                out = rd.transfer(ready, addr + r * stride, row_bytes)
        data = _cdiv(nk * row_bytes, rd.rate)
        step_span("dma_read", f"{which} {s}", out[1] - data, out[1])
        return out

    # rolling histories (times), indexed by step
    qk_end: dict[int, int] = {}
    pv_end: dict[int, int] = {}
    arr_k: dict[int, int] = {}
    arr_v: dict[int, int] = {}
    p_ready: dict[int, int] = {}
    pe_free = pe_start
    exp_free = pe_start
    exp_first = None
    mem_stall = exp_stall = pad = 0
    rd_floor = kv_start  # LOAD_KV may not request before it starts
    _, arr_k[0] = load(0, "K", rd_floor)

    def do_pv(j):
        nonlocal pe_free, mem_stall, exp_stall, pad
        v_in = arr_v[j] + timing.ring_ready_latency
        st = max(pe_free, v_in, p_ready[j])
        if st > pe_free:
            if v_in >= p_ready[j]:
                mem_stall += st - pe_free
            else:
                exp_stall += st - pe_free
        nk = min(b, keys - j * b)
        pv_end[j] = st + pe_cycles(j, nk)
        step_span("pe", f"PV {j}", st, pv_end[j])
        stats.busy["pe"] += pe_ops(j, nk)
        stats.active("pe", st, pv_end[j], pe_ops(j, nk))
        pad += pe_cycles(j, nk) - pe_ops(j, nk)
        pe_free = pv_end[j]

    seen: dict[tuple, tuple] = {}
    s = 0
    skipped = False
    segment = gmin(0)
    # K/V blocks that tile 4 KB lines exactly never cross one: where a block sits in its line
    # then changes nothing, and the steady state repeats every step instead of every line
    kblk, vblk = b * k_bytes, b * v_bytes
    no_4k = (contiguous and 4096 % kblk == 0 and 4096 % vblk == 0 and kv.k_addr % kblk == 0
             and kv.v_addr % vblk == 0)
    while s < steps:
        if gmin(s) != segment:
            # the skipped groups changed: a new steady state may follow (one skip each)
            segment, skipped = gmin(s), False
            seen.clear()
        # steady-state detection: skip whole periods once the relative state repeats
        if STEADY_STATE_SKIP and not skipped and 1 <= s < steps - 1:
            ref = pe_free
            key = (tuple(qk_end[i] - ref for i in range(s - ck, s) if i >= 0),
                   tuple(pv_end[i] - ref for i in range(s - 1 - ck, s - 1) if i >= 0),
                   arr_k[s] - ref, arr_v[s - 1] - ref, p_ready[s - 1] - ref, exp_free - ref,
                   rd.state(ref),
                   0 if no_4k else (kv.k_addr + (s + 1) * b * kv.row_stride) % 4096,
                   0 if no_4k else (kv.v_addr + s * b * v_stride) % 4096,
                   gmin(s - 1), gmin(s))
            if key in seen:
                s0, ref0, snap = seen[key]
                period, dt = s - s0, ref - ref0
                k = (min(steps, next_change(s)) - 1 - s) // period
                if k > 0:
                    now = (stats.busy["pe"], stats.busy["exp"], rd.busy, rd.nbytes,
                           mem_stall, exp_stall, pad)
                    deltas = [x - y for x, y in zip(now, snap, strict=True)]
                    for eng, busy in (("pe", deltas[0]), ("exp", deltas[1]),
                                      ("dma_read", deltas[2])):   # the skipped periods
                        stats.active(eng, ref, ref + k * dt, k * busy)
                    stats.busy["pe"] += k * deltas[0]
                    stats.busy["exp"] += k * deltas[1]
                    rd.busy += k * deltas[2]
                    rd.nbytes += k * deltas[3]
                    mem_stall += k * deltas[4]
                    exp_stall += k * deltas[5]
                    pad += k * deltas[6]
                    shift, di = k * dt, k * period
                    qk_end = {i + di: t + shift for i, t in qk_end.items()}
                    pv_end = {i + di: t + shift for i, t in pv_end.items()}
                    arr_k = {i + di: t + shift for i, t in arr_k.items()}
                    arr_v = {i + di: t + shift for i, t in arr_v.items()}
                    p_ready = {i + di: t + shift for i, t in p_ready.items()}
                    step_span("pe", f"steady state: steps {s}-{s + di - 1}", ref,
                              ref + shift)
                    pe_free += shift
                    exp_free += shift
                    rd.shift(shift)
                    s += di
                skipped = True
            else:
                seen[key] = (s, ref, (stats.busy["pe"], stats.busy["exp"], rd.busy, rd.nbytes,
                                      mem_stall, exp_stall, pad))
        nk = min(b, keys - s * b)
        # QK(s)
        st = max(pe_free, arr_k[s] + timing.ring_ready_latency)
        mem_stall += st - pe_free
        qk_end[s] = st + pe_cycles(s, nk)
        step_span("pe", f"QK {s}", st, qk_end[s])
        stats.busy["pe"] += pe_ops(s, nk)
        stats.active("pe", st, qk_end[s], pe_ops(s, nk))
        pad += pe_cycles(s, nk) - pe_ops(s, nk)
        pe_free = qk_end[s]
        # EXP(s): a pipeline fed by the Q Kᵀ step; never the bottleneck with one lane a line
        exp_first = st if exp_first is None else exp_first
        stats.busy["exp"] += exp_cycles(s, nk)
        p_ready[s] = st + pe_ops(s, nk) - 1 + timing.p_ready_latency
        stats.active("exp", st, p_ready[s], exp_cycles(s, nk))
        exp_free = max(exp_free, p_ready[s])
        # PV(s-1)
        if s >= 1:
            do_pv(s - 1)
        # DMA: the blocks the shared order loads during this step (K(s+1), then V(s)); a
        # block waits for its ring slot, freed by the step ck before it
        for which, j in kv_blocks_during(s, steps):
            done_by = qk_end if which == "K" else pv_end
            credit = done_by[j - ck] + timing.credit_latency if j >= ck else rd_floor
            if which == "K":
                _, arr_k[j] = load(j, "K", credit)
            else:
                last_req, arr_v[j] = load(j, "V", credit)
        # forget history the loop no longer reads
        for hist, keep in ((qk_end, ck + 1), (pv_end, ck + 1), (arr_k, 2), (arr_v, 2),
                           (p_ready, 2)):
            old = s - keep
            if old in hist:
                del hist[old]
        s += 1
    do_pv(steps - 1)
    stats.stall("pe: waiting for K/V (DRAM)", mem_stall)
    stats.stall("pe: waiting for softmax (EXP)", exp_stall)
    stats.stall("pe: padding short steps", pad)
    return rd.last_req, arr_v[steps - 1], pe_free, (exp_first, exp_free)


def _tile_loop_memo(memo: dict, hw, timing, rd: Channel, stats: Stats, kv: Instr, comp: Instr,
                    kv_start: int, pe_start: int, ring_rows: int, eb: int):
    """:func:`_tile_loop` without spans, remembered: a tile's timeline depends only on its
    K/V and COMPUTE fields (addresses within a 4 KB line), when its K/V stream may start and
    the read channel's state, all relative to its first PE cycle. A tile seen before in the
    same relative state (the tiles of one head, heads of one shape) repeats the first one's
    timeline and adds the same busy and stall cycles, exactly (``test_tile_memo_is_exact``)."""
    ref = pe_start
    # the tile's position matters only under a causal mask (row-group skipping)
    cargs = {k: v for k, v in comp.args.items()
             if comp.causal or k not in ("q_pos", "diag")}
    key = (tuple(sorted((k, v % 4096 if k in ("k_addr", "v_addr") else v)
                        for k, v in kv.args.items())),
           tuple(sorted(cargs.items())), kv_start - ref, rd.state(ref))
    hit = memo.get(key)
    if hit is None:
        before = (dict(stats.busy), dict(stats.stalls), rd.busy, rd.nbytes)
        out = _tile_loop(hw, timing, rd, stats, kv, comp, kv_start, pe_start, ring_rows, eb)
        issue_end, kv_done, pe_end, (e0, e1) = out
        hit = ((issue_end - ref, kv_done - ref, pe_end - ref, e0 - ref, e1 - ref),
               {k: v - before[0].get(k, 0) for k, v in stats.busy.items()},
               {k: v - before[1].get(k, 0) for k, v in stats.stalls.items()},
               rd.busy - before[2], rd.nbytes - before[3], rd.state(ref))
        memo[key] = hit
        return out
    rel, busy, stalls, rbusy, rbytes, (free, last_req, done) = hit
    for k, v in busy.items():
        stats.busy[k] += v
    for k, v in stalls.items():
        stats.stall(k, v)
    rd.busy += rbusy
    rd.nbytes += rbytes
    rd.free, rd.last_req = ref + free, ref + last_req
    rd.done = deque(ref + x for x in done)
    a, b_, c, e0, e1 = (ref + x for x in rel)
    return a, b_, c, (e0, e1)


@dataclass
class Schedule:
    """Result of :func:`schedule`: tiling, program, cycles, utilization, traffic, spans."""

    hw: HardwareConfig
    workload: Workload
    dataflow: str
    tiling: io.Tiling
    program: list[Instr] | None
    total_cycles: int
    busy: dict[str, int]
    stalls: dict[str, int]
    useful_macs: int
    read_bytes: int
    write_bytes: int
    spans: list[Span]
    timing: Timing
    # engine → [(start, end, busy cycles)]: where each engine was busy (with keep_spans)
    activity: dict | None = None

    @property
    def pe_util_time(self) -> float:
        """Fraction of cycles the PE array computes (the paper's definition)."""
        return self.busy["pe"] / self.total_cycles if self.total_cycles else 0.0

    @property
    def pe_util_mac(self) -> float:
        """Useful MACs over MACs × cycles."""
        return self.useful_macs / (self.hw.macs * self.total_cycles) if self.total_cycles else 0.0

    @property
    def time_us(self) -> float:
        return self.total_cycles / self.hw.clock_mhz

    def to_dict(self) -> dict:
        """The schedule's figures as plain data (JSON-ready): configuration, workload,
        tiling, cycles and time, busy and stall cycles per engine, utilization, traffic and
        program length. Spans and the program itself are left out (``attenio schedule
        --trace`` and ``--program`` write those)."""
        import dataclasses

        return {
            "hardware": self.hw.to_dict(), "workload": self.workload.to_dict(),
            "dataflow": self.dataflow, "tiling": dataclasses.asdict(self.tiling),
            "total_cycles": self.total_cycles, "time_us": self.time_us,
            "busy": dict(self.busy), "stalls": dict(self.stalls),
            "useful_macs": self.useful_macs, "pe_util_time": self.pe_util_time,
            "pe_util_mac": self.pe_util_mac, "stall_share": self.stall_share,
            "read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
            "program_instructions": None if self.program is None else len(self.program),
        }

    @property
    def stall_share(self) -> float:
        """Share of cycles the PE array waits on data movement (DRAM, Q load, O store)."""
        mem = sum(v for k, v in self.stalls.items() if "DRAM" in k or "Q load" in k
                  or "store" in k)
        return mem / self.total_cycles if self.total_cycles else 0.0


# step-level spans (QK s, PV s, K s, V s) are kept for the tiles that start before the trace
# holds this many spans: every tile of a small run, the first tiles of a long one
STEP_SPAN_LIMIT = 20_000


def simulate_program(hw: HardwareConfig, wl: Workload, program: list[Instr],
                     timing: Timing | None = None, ring_rows: int | None = None,
                     keep_spans: bool = True,
                     progress=None) -> tuple[int, Stats, int, int, list[Span]]:
    """Run the timing model over a program (``progress(fraction)`` about every 1% of its
    instructions). Returns (total cycles, stats, bytes read,
    bytes written, spans)."""
    timing = timing or Timing()
    eb, ob = hw.element_bytes, hw.out_element_bytes
    ring = ring_rows if ring_rows is not None else hw.ring_rows
    rd = Channel(hw, timing, gap=timing.request_gap)
    wr = Channel(hw, timing, write=True, gap=timing.request_gap)
    fetch = Channel(hw, timing, gap=timing.fetch_gap)
    stats = Stats()
    spans: list[Span] = []
    if keep_spans:
        stats.activity = {e: [] for e in ENGINES}
        rd.activity, wr.activity = stats.activity["dma_read"], stats.activity["dma_write"]
    n = len(program)
    chunk = timing.fetch_chunk
    ahead = timing.fetch_buffer // chunk
    chunk_arrival: dict[int, int] = {}
    dispatch = [0] * n
    start = [0] * n
    # per-queue: start times in order (for queue depth), end of last instruction
    qstarts: dict[str, list[int]] = {name: [] for name in QUEUES}
    q_end = dict.fromkeys(QUEUES, 0)
    tokens: dict[tuple[str, str], deque] = {}
    pending_kv: tuple[Instr, int, int] | None = None
    pending_fin: tuple[int, int, int, int, Instr] | None = None
    last_pe_end = 0
    core_idle = 0          # the previous tile's end: the core's ring credits are its own again
    memo: dict = {}        # tiles already simulated, by everything their timeline depends on
    last_store_resp = 0
    pe_activity_end = 0
    tile = 0

    def fetch_chunk(c: int) -> int:
        """Cycle of the chunk's first data beat."""
        if c not in chunk_arrival:
            ready = timing.fetch_delay
            if c >= ahead:  # the fetch buffer holds `ahead` chunks: chunk c waits for c-ahead
                ready = dispatch[min(n, (c - ahead + 1) * chunk) - 1] + 1
            nbytes = min(chunk, n - c * chunk) * INSTR_BYTES
            _, end = fetch.transfer(ready, c * chunk * INSTR_BYTES, nbytes)
            chunk_arrival[c] = end - _cdiv(nbytes, fetch.rate)
        return chunk_arrival[c]

    def arrival(k: int) -> int:
        """Instruction k can dispatch: its last beat, then the fetch buffer's latency."""
        i = k % chunk
        return fetch_chunk(k // chunk) + _cdiv((i + 1) * INSTR_BYTES, fetch.rate) - 1 + \
            timing.decode_latency + timing.fifo_latency

    def pop_time(ins: Instr, q: str) -> int:
        t = 0
        for flag, other in (("pop_prev", PREV[q]), ("pop_next", NEXT[q])):
            if getattr(ins, flag):
                t = max(t, tokens[(other, q)].popleft())
        return t

    def push(ins: Instr, q: str, when: int) -> None:
        for flag, other in (("push_prev", PREV[q]), ("push_next", NEXT[q])):
            if getattr(ins, flag):
                tokens.setdefault((q, other), deque()).append(when)

    every = max(1, n // 100)
    for k, ins in enumerate(program):
        if progress is not None and k % every == 0:
            progress(k / n)
        arrive = arrival(k)
        disp = max(arrive, dispatch[k - 1] + 1 if k else 0)
        if ins.op == Op.END:
            dispatch[k] = disp
            break
        q = ins.queue
        if len(qstarts[q]) >= timing.queue_depth:
            disp = max(disp, qstarts[q][-timing.queue_depth])
        dispatch[k] = disp
        tok = pop_time(ins, q)
        st = max(disp + timing.fifo_latency, q_end[q], tok)
        start[k] = st
        qstarts[q].append(st)
        if len(qstarts[q]) > timing.queue_depth:
            qstarts[q].pop(0)
        args = {"tile": tile, **ins.args}
        if ins.op == Op.LOAD_Q:
            issue_end, done = _tile_transfer(hw, rd, st + timing.request_delay, ins, eb)
            q_end[q] = issue_end + 1
            push(ins, q, done)
            if keep_spans:
                spans.append(Span("dma_read", f"LOAD_Q t{tile}", st, done, args))
        elif ins.op == Op.LOAD_KV:
            pending_kv = (ins, st, k)
        elif ins.op == Op.COMPUTE:
            gap = st + timing.cmd_latency - pe_activity_end
            if gap > 0:
                stats.stall("pe: fetch/dispatch" if disp >= tok
                            else "pe: waiting for Q load or O store", gap)
            if ins.keys == 0:  # a causal tile that sees no key: O = 0, nothing to stream
                last_pe_end = pe_activity_end = st + timing.cmd_latency
                q_end[q] = last_pe_end + 1
                push(ins, q, q_end[q])
                continue
            if pending_kv is None:
                raise bad("program", f"instruction {k}", "COMPUTE without LOAD_KV")
            kv, kv_st, _ = pending_kv
            pending_kv = None
            # a K/V block is requested only once the core counts credits for this tile
            kv_ready = max(kv_st + timing.request_delay, core_idle + timing.credit_delay)
            pe0 = st + timing.cmd_latency
            if keep_spans:
                issue_end, kv_done, pe_end, exp_span = _tile_loop(
                    hw, timing, rd, stats, kv, ins, kv_ready, pe0, ring, eb,
                    spans if len(spans) < STEP_SPAN_LIMIT else None, tile)
            else:
                issue_end, kv_done, pe_end, exp_span = _tile_loop_memo(
                    memo, hw, timing, rd, stats, kv, ins, kv_ready, pe0, ring, eb)
            q_end["load"] = max(q_end["load"], issue_end + 1)
            # the compute queue sees the last step end in cycle pe_end and moves on after it
            q_end[q] = pe_end + 1
            last_pe_end = pe_activity_end = pe_end
            push(ins, q, pe_end + 1)
            stats.useful_macs += 2 * ins.d * _visible_pairs(ins)
            if keep_spans:
                spans.append(Span("dma_read", f"LOAD_KV t{tile}", kv_st, kv_done,
                                  {"tile": tile, **kv.args}))
                spans.append(Span("pe", f"COMPUTE t{tile}", st, pe_end, args))
                spans.append(Span("exp", f"softmax t{tile}", exp_span[0], exp_span[1], args))
        elif ins.op == Op.FINALIZE:
            # One output word (q elements of a row) per cycle into the output FIFO; the
            # STORE_O that pairs with it drains the FIFO, so the two are resolved together.
            words = ins.rows * ins.heads * _cdiv(ins.d, hw.macs_per_line)
            # the core finalizes on its own once the last P V step is done
            first = last_pe_end + timing.pv_drain + timing.finalize_latency
            stats.busy["finalize"] += words
            stats.active("finalize", first, first + words, words)
            pending_fin = (st, first, first + words - 1, words, ins)
        elif ins.op == Op.STORE_O:
            if pending_fin is None:
                raise bad("program", f"instruction {k}", "STORE_O without FINALIZE")
            f_st, first, last, words, fin_ins = pending_fin
            pending_fin = None
            _, done = _tile_transfer(hw, wr, max(st + timing.request_delay, first), ins, ob)
            # data cannot leave before the finalize unit produced it (a word is several beats)
            data_end = max(wr.free, last + _cdiv(hw.macs_per_line * ob, hw.axi_data_bytes))
            done = max(done, data_end + hw.dram_latency)
            wr.free = data_end
            # the last word has left the core: it is idle again, and the compute queue sees it
            fin_end = data_end + timing.idle_latency
            core_idle = fin_end
            stats.stall("pe: finalize and store", fin_end - pe_activity_end)
            pe_activity_end = fin_end
            q_end["compute"] = fin_end
            push(fin_ins, "compute", fin_end)  # FINALIZE's tokens go out when it ends
            q_end[q] = done
            last_store_resp = max(last_store_resp, done)
            push(ins, q, done)
            if keep_spans:
                spans.append(Span("finalize", f"FINALIZE t{tile}", f_st, fin_end, args))
                spans.append(Span("dma_write", f"STORE_O t{tile}", max(st, first), done, args))
            tile += 1
    total = max(max(q_end.values()), last_store_resp, rd.free, pe_activity_end) + \
        timing.done_latency
    stats.stall("pe: drain (last store response)", total - pe_activity_end)
    stats.busy["dma_read"] = rd.busy
    stats.busy["dma_write"] = wr.busy
    return total, stats, rd.nbytes, wr.nbytes, spans


def _tile_transfer(hw: HardwareConfig, ch: Channel, ready: int, ins: Instr,
                   elem_bytes: int) -> tuple[int, int]:
    """Move a tile's rows (``LOAD_Q`` or ``STORE_O``): one transfer per head when its rows are
    contiguous, else one per row. Returns (last request, completion)."""
    out = (ready, ready)
    # whole words, as the DMA moves rows (a Q row with its multiplier's word)
    row = hw.q_row_elements(ins.d, bool(ins.args.get("row_scales", 0))) * elem_bytes
    for h in range(ins.heads):
        base = ins.addr + h * ins.head_stride
        if ins.row_stride == row:
            out = ch.transfer(ready, base, ins.rows * row)
        else:
            for r in range(ins.rows):
                out = ch.transfer(ready, base + r * ins.row_stride, row)
    return out


def _visible_pairs(ins: Instr) -> int:
    """(query row, key) pairs of a COMPUTE that the mask keeps (all of them without causal)."""
    if not ins.causal:
        return ins.rows * ins.heads * ins.keys
    total = sum(keys_seen(ins.q_pos + r, ins.diag, ins.keys) for r in range(ins.rows))
    return total * ins.heads


def schedule(hw: HardwareConfig, wl: Workload, dataflow: str = "attenio", *,
             timing: Timing | None = None, scale: ScaleParams | None = None,
             keep_spans: bool = True, tiling: io.Tiling | None = None,
             progress=None) -> Schedule:
    """Tile ``wl`` for ``dataflow`` on ``hw``, emit the program and compute the timeline.

    ``tiling`` overrides the chosen tiling (for example the paper's b = 1 rule:
    ``Tiling("attenio", rows=a, keys_per_step=1, fixed_b=True)``).

    Raises
    ------
    ConfigError
        An unknown dataflow, a workload the hardware cannot hold (head dim, one row of
        memory), or a program the controller would reject.
    """
    timing = timing or Timing()
    if dataflow not in io.DATAFLOWS:
        raise bad("dataflow", dataflow, f"choose one of: {', '.join(io.DATAFLOWS)}")
    if wl.head_dim > hw.max_head_dim:
        raise bad("head_dim", wl.head_dim, f"must be in [1, {hw.max_head_dim}] (max_head_dim)")
    if dataflow in ("flat", "standard"):
        return _phase_model(hw, wl, tiling or io.choose_tiling(hw, wl, dataflow), timing)
    if scale is None:
        qmax = (1 << (hw.data_bits - 1)) - 1
        scale = softmax_scale(hw, 1.0 / qmax, 1.0 / qmax, wl.head_dim)
    if tiling is not None:
        return _schedule_tiling(hw, wl, dataflow, tiling, timing, scale, keep_spans, progress)
    tiling = io.choose_tiling(hw, wl, dataflow)
    two = tiling.heads_per_tile > 1

    def part(i):                       # progress of candidate i of the one or two
        if progress is None:
            return None
        return lambda f: progress((i + f) / 2 if two else f)

    best = _schedule_tiling(hw, wl, dataflow, tiling, timing, scale, keep_spans, part(0))
    if two:
        # GQA packing shares K/V but makes tiles of fewer positions: keep it only when it
        # wins by the model's cycles (then bytes)
        mha = _schedule_tiling(hw, wl, dataflow, io.choose_tiling(hw, wl, dataflow, pack=False),
                               timing, scale, keep_spans, part(1))
        if (mha.total_cycles, mha.read_bytes) < (best.total_cycles, best.read_bytes):
            best = mha
    return best


def _schedule_tiling(hw: HardwareConfig, wl: Workload, dataflow: str, tiling: io.Tiling,
                     timing: Timing, scale: ScaleParams, keep_spans: bool,
                     progress=None) -> Schedule:
    """The program of ``wl`` under ``tiling``, validated, and its timeline."""
    rs, ks = scale.per_row, scale.k_m is not None
    probe = build_program(hw, wl, tiling, Layout.packed(hw, wl, 0, rs, ks), scale)
    layout = Layout.packed(hw, wl, len(probe) * INSTR_BYTES, rs, ks)
    program = build_program(hw, wl, tiling, layout, scale)
    ring = None if dataflow == "attenio" else tiling.keys_per_step
    if ring is None:
        validate(program, hw)
    else:
        validate(program, _with_ring(hw, 2 * ring, tiling.rows), rtl=False)
    total, stats, rb, wb, spans = simulate_program(hw, wl, program, timing, ring, keep_spans,
                                                   progress)
    return Schedule(hw, wl, dataflow, tiling, program, total, stats.busy, stats.stalls,
                    stats.useful_macs, rb, wb, spans, timing, activity=stats.activity)


def _with_ring(hw: HardwareConfig, ring: int, rows: int | None = None) -> HardwareConfig:
    # Baselines keep their K/V blocks in the unified memory, not in the row ring: give the
    # validator a ring (and tile) of the size the baseline's tiling uses.
    import dataclasses
    return dataclasses.replace(hw, kv_ring_depth=max(hw.kv_ring_depth, ring),
                               tile_rows=max(hw.tile_rows, rows or 0))


def _phase_model(hw: HardwareConfig, wl: Workload, tiling: io.Tiling,
                 timing: Timing) -> Schedule:
    """FLAT and Standard as sequences of phases, each ``L + max(PE, EXP, reads, writes)`` on
    the same engines (no program: they do not fit the instruction set)."""
    rate = min(hw.dram_bytes_per_cycle, hw.axi_data_bytes)
    lat = hw.dram_latency
    traffic = io.workload_traffic(hw, wl, tiling.dataflow, tiling)
    d, nq, nk = wl.head_dim, wl.seq_q, wl.seq_k
    heads = wl.batch * wl.heads
    busy = dict.fromkeys(ENGINES, 0)
    stalls: dict[str, int] = {}
    total = 0
    pairs = sum(max(0, min(nk, i + 1 + nk - nq)) for i in range(nq)) if wl.causal else nq * nk
    useful = 2 * d * pairs * heads

    def phase(pe: int, exp: int, rbytes: int, wbytes: int) -> None:
        nonlocal total
        r, w = _cdiv(rbytes, rate), _cdiv(wbytes, rate)
        dur = lat + max(pe, exp, r, w)
        busy["pe"] += pe
        busy["exp"] += exp
        busy["dma_read"] += r
        busy["dma_write"] += w
        total += dur
        stalls["pe: waiting for K/V (DRAM)"] = stalls.get("pe: waiting for K/V (DRAM)", 0) + \
            dur - pe

    eb = hw.element_bytes
    if tiling.dataflow == "flat":
        R = tiling.rows
        for _ in range(heads):
            for p0, r in io.query_tiles(nq, R, wl.causal):
                keys = io.tile_keys(p0, r, nq, nk, wl.causal, 1)
                b = max(1, hw.macs // r)
                pe = _cdiv(keys, b) * _cdiv(r * b, hw.macs) * d
                phase(0, 0, r * d * eb, 0)                         # Q rows
                phase(pe, 0, keys * d * eb, 0)                     # S = Q Kᵀ, K streamed
                phase(0, _cdiv(r * keys, hw.exp_lanes), 0, 0)      # softmax on whole rows
                phase(pe, 0, keys * d * eb, r * d * hw.out_element_bytes)  # O = P V
        busy["finalize"] = 0
    else:
        per_head = {name: v // heads for name, v in traffic.reads.items()}
        gemm = _cdiv(nq * nk * d, hw.macs)
        for _ in range(heads):
            phase(gemm, 0, (per_head["Q"] + per_head["K"]) * eb, nq * nk * eb)   # S = Q Kᵀ
            phase(0, _cdiv(nq * nk, hw.exp_lanes), nq * nk * eb, nq * nk * eb)  # P = softmax(S)
            phase(gemm, 0, (per_head["P"] + per_head["V"]) * eb,                 # O = P V
                  nq * d * hw.out_element_bytes)
    return Schedule(hw, wl, tiling.dataflow, tiling, None, total, busy, stalls, useful,
                    traffic.read_bytes, traffic.write_bytes, [], timing)
