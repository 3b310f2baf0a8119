"""The key loop of one tile: a ``LOAD_KV`` co-simulated with its ``COMPUTE`` step by step,
with its steady-state periods skipped arithmetically and whole tiles remembered (exact)."""

from __future__ import annotations

from collections import deque

from attenio.contract.program import Instr
from attenio.contract.rules import kv_blocks_during, skipped_groups
from attenio.sim.engines import Channel, Span, Stats, cdiv

__all__ = ["tile_loop", "tile_loop_memo"]


# Skip whole steady-state periods of the key loop (exact; tests turn it off to prove it).
STEADY_STATE_SKIP = True
# causal tiles skip, step by step, the row groups that see none of the step's keys (the RTL's
# StepSequencer does the same)
ROW_GROUP_SKIP = True


def tile_loop(hw, timing, rd: Channel, stats: Stats, kv: Instr, comp: Instr,
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
    steps = cdiv(keys, b)
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
    groups = cdiv(rows * b, p)
    # causal row-group skipping (one head, one key per step): a step's first key k is seen
    # only by rows ρ ≥ k − q_pos − diag, so the groups below skip its Q Kᵀ and P V
    skip = bool(ROW_GROUP_SKIP and comp.causal and comp.heads == 1 and b == 1 and groups > 1)

    def gmin(s):
        return skipped_groups(s * b, comp.q_pos, comp.diag, p, groups) if skip else 0

    def next_change(s):
        """The first step after s whose skipped groups differ (steps when none does)."""
        if not skip or gmin(s) == groups - 1:
            return steps
        return max(s + 1, cdiv((gmin(s) + 1) * p + comp.q_pos + comp.diag, b))

    def pe_ops(s, nk):
        # row groups of mac_lines rows (nk keys side by side when rows < lines) × words of d
        return (cdiv(rows * nk, p) - gmin(s)) * words

    def pe_cycles(s, nk):
        return max(pe_ops(s, nk), timing.min_phase)

    def exp_cycles(s, nk):
        return cdiv((rows - gmin(s) * p) * nk, lanes)

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
        data = cdiv(nk * row_bytes, rd.rate)
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


def tile_loop_memo(memo: dict, hw, timing, rd: Channel, stats: Stats, kv: Instr, comp: Instr,
                    kv_start: int, pe_start: int, ring_rows: int, eb: int):
    """:func:`tile_loop` without spans, remembered: a tile's timeline depends only on its
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
        out = tile_loop(hw, timing, rd, stats, kv, comp, kv_start, pe_start, ring_rows, eb)
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
