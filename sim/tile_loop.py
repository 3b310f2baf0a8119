"""The key loop of one tile: a ``LOAD_KV`` co-simulated with its ``COMPUTE`` step by step,
with its steady-state periods skipped arithmetically and whole tiles remembered (exact)."""

from __future__ import annotations

from collections import deque

from attenio.contract.isa import d_v_of
from attenio.contract.program import Instr
from attenio.contract.rules import (
    PAGE_ALIGN_LOG2,
    PageWalk,
    groups_seen_to,
    kv_blocks_during,
    skipped_groups,
    skips_row_groups,
)
from attenio.sim.engines import Channel, Span, Stats, cdiv

__all__ = ["tile_loop", "tile_loop_memo"]


# Skip whole steady-state periods of the key loop (exact; tests turn it off to prove it).
STEADY_STATE_SKIP = True
# a causal tile's rest, from a change of its skipped row groups, repeats another tile's when
# their states and diagonals match (exact; tests turn it off to prove it)
SUFFIX_MEMO = True
# causal tiles skip, step by step, the row groups that see none of the step's keys (the RTL's
# StepSequencer does the same)
ROW_GROUP_SKIP = True


class TileLoop:
    """One LOAD_KV co-simulated with its COMPUTE, step by step (:func:`tile_loop`): the
    step geometry, the rolling histories of each step's times, and the steady-state skip."""

    def __init__(self, hw, timing, rd: Channel, stats: Stats, kv: Instr, comp: Instr,
                 kv_start: int, pe_start: int, ring_rows: int, eb: int,
                 step_spans: list | None = None, tile: int = 0, entries=None,
                 suffix: dict | None = None):
        self.timing, self.rd, self.stats, self.kv, self.comp = timing, rd, stats, kv, comp
        self.step_spans, self.tile = step_spans, tile
        self.rows = comp.rows * comp.heads
        self.b = b = comp.keys_per_step
        self.keys = comp.keys
        self.steps = cdiv(self.keys, b)
        self.lanes = hw.exp_lanes
        self.ck = max(1, ring_rows // b)
        # whole words, as the DMA moves rows (a K row with its factor's word; V rows then lie
        # a word closer: K and V are both contiguous or neither)
        # (a paged cache packs its K factors: a word of them before each factor group of
        # rows, read with the block that starts the group)
        paged = bool(kv.args.get("paged", 0))
        self.fgroup = self.fword = 0
        ks = bool(kv.args.get("key_scales", 0))
        # the blocks that read a factor word where one leads their group: K's, V's or both
        self.factored = {"K": ks and paged, "V": bool(kv.args.get("value_scales", 0))}
        if any(self.factored.values()):
            self.fgroup = hw.factor_group(1 << kv.page_log2)
            self.fword = hw.macs_per_line * eb
        ks = ks and not paged
        self.k_bytes = hw.k_row_elements(comp.d, ks) * eb
        self.d_v = d_v_of(comp)
        self.v_bytes = hw.row_elements(self.d_v) * eb
        self.v_stride = hw.v_row_stride(kv.row_stride, ks, comp.d, self.d_v)
        self.contiguous = kv.row_stride == self.k_bytes
        # V is the first d_v elements of each K row (LOAD_KV.v_in_k): read with K, once
        self.v_in_k = bool(kv.args.get("v_in_k", 0))
        # words a row group's step issues: Q·K's head dim for Q Kᵀ, V's for P V
        self.words = {"QK": hw.words(comp.d), "PV": hw.words(self.d_v)}
        self.p = p = hw.mac_lines
        self.groups = cdiv(self.rows * b, p)
        # row-group skipping (positions rising with the row, one key per step): a causal
        # step's key k is seen only by positions ρ ≥ k − q_pos − diag, a window's only by ρ ≤
        # k − q_pos − win_diag, so the groups outside skip its Q Kᵀ and P V (a group holds
        # mac_lines >> hlog positions: COMPUTE.head_pos puts a position's heads side by side)
        head_pos = bool(comp.args.get("head_pos", 0))
        window = bool(comp.args.get("window", 0))
        self.skip = ROW_GROUP_SKIP and bool(skips_row_groups(bool(comp.causal) or window,
                                                             comp.heads == 1 or head_pos,
                                                             b == 1, self.groups))
        self.lo, self.hi = self.skip and bool(comp.causal), self.skip and window
        # a tile of one part starts each row group where its window first issues it
        # (contract.rules.groups_seen_to's ``starts``): no step issues every group
        self.starts = not comp.args.get("more", 0) and not comp.args.get("cont", 0)
        self.lines = p >> (comp.rows.bit_length() - 1 if head_pos else 0)
        # a selected part (COMPUTE.select): the row groups of its rows alone, every step
        self.sel = None
        if comp.args.get("select", 0):
            r0 = comp.args.get("sel_row", 0)
            self.sel = (r0 // p, cdiv(r0 + comp.rows, p))
            self.skip = True
        self.q_pos, self.diag = comp.q_pos, comp.diag
        self.win_diag = comp.args.get("win_diag", 0)
        self._spans: dict[int, tuple[int, int]] = {}
        # rolling histories (times), indexed by step
        self.qk_end: dict[int, int] = {}
        self.pv_end: dict[int, int] = {}
        self.arr_k: dict[int, int] = {}
        self.arr_v: dict[int, int] = {}
        self.p_ready: dict[int, int] = {}
        self.pe_free = self.exp_free = pe_start
        self.exp_first = None
        self.mem_stall = self.exp_stall = self.pad = 0
        self.rd_floor = kv_start  # LOAD_KV may not request before it starts
        # K/V blocks that tile 4 KB lines exactly never cross one: where a block sits in its
        # line then changes nothing, and the steady state repeats every step, not every line
        kblk, vblk = b * self.k_bytes, b * self.v_bytes
        self.no_4k = (self.contiguous and not self.fgroup and 4096 % kblk == 0
                      and 4096 % vblk == 0
                      and kv.k_addr % kblk == 0 and kv.v_addr % vblk == 0)
        # the rests of causal tiles remembered across tiles (not with spans or a paged cache)
        self.suffix = (suffix if SUFFIX_MEMO and step_spans is None and stats.activity is None
                       and self.skip and self.sel is None and not kv.args.get("paged", 0)
                       else None)
        # a paged cache: the block table's walk (contract.rules.PageWalk) and its pages
        self.walk = None
        if kv.args.get("paged", 0):
            if entries is None:
                raise ValueError("a paged LOAD_KV needs the block tables (entries=)")
            self.walk = PageWalk(kv.table, self.keys, kv.page_log2, hw.axi_data_bytes)
            self.pages = [e << PAGE_ALIGN_LOG2 for e in entries(kv.table, self.walk.pages)]
            self.word_arrival: dict[int, int] = {}
            w = self.walk
            # the steady state repeats only where every page sits alike in its 4 KB line, and
            # only before the K block of the last table word's first page (no word follows)
            self.page_skip = len({a % 4096 for a in self.pages}) == 1
            self.last_word_step = ((w.words - 1) * w.epb - w.e0) * w.page // self.b

    def arrival(self, j: int, ref: int):
        """Table word j's arrival relative to ``ref``; ``True`` once it can no longer hold a
        page's K block back (a block waits for ``arrival + entry_latency`` and for the read
        channel's last request, which only grows: once the first is not later, it never
        binds again); ``None`` before it is requested."""
        a = self.word_arrival.get(j)
        if a is None:
            return None
        return True if a + self.timing.entry_latency <= self.rd.last_req else a - ref

    def word_start(self, s: int) -> bool:
        """Step s loads (as its next K block) the first page of a table word: a paged walk's
        state holds the block's place in its page and word, so it can repeat only where that
        place is the same; looking there alone finds the same periods, at most one word
        later, for a state built once a word instead of once a step."""
        w = self.walk
        first = (s + 1) * self.b
        return first % w.page == 0 and w.entry(first // w.page)[1] == 0

    # ---- step geometry ----
    def span(self, s: int) -> tuple[int, int]:
        """Step s's row groups: the first it issues and one past its last (every group
        without skipping)."""
        if self.sel is not None:
            return self.sel
        if not self.skip:
            return 0, self.groups
        got = self._spans.get(s)
        if got is None:
            lo = (skipped_groups(s, self.q_pos, self.diag, self.lines, self.groups)
                  if self.lo else 0)
            hi = (groups_seen_to(s, s, self.q_pos, self.win_diag, self.lines, self.groups,
                                 self.starts)
                  if self.hi else self.groups)
            got = self._spans[s] = (lo, max(hi, lo + 1))
        return got

    def next_change(self, s: int) -> int:
        """The first step after s whose row groups may differ (steps when none does)."""
        if not self.skip or self.sel is not None:
            return self.steps
        lo, hi = self.span(s)
        out = self.steps
        if self.lo and lo < self.groups - 1:
            out = max(s + 1, (lo + 1) * self.lines + self.q_pos + self.diag)
        if self.hi and s < 2 and not self.starts:
            out = min(out, 2)
        elif self.hi and hi < self.groups:
            # the window's reach passes group hi at key hi·lines + q_pos + win_diag (one key
            # a step); the raw reach may lie below the causal skip's (then later still)
            out = min(out, max(s + 1, hi * self.lines + self.q_pos + self.win_diag))
        return out

    def pe_ops(self, s: int, nk: int, kind: str = "QK") -> int:
        # row groups of mac_lines rows (nk keys side by side when rows < lines) × words of the
        # step's rows (d for Q Kᵀ, dv for P V)
        if not self.skip:
            return cdiv(self.rows * nk, self.p) * self.words[kind]
        lo, hi = self.span(s)
        return (hi - lo) * self.words[kind]

    def pe_cycles(self, s: int, nk: int, kind: str = "QK") -> int:
        return max(self.pe_ops(s, nk, kind), self.timing.min_phase)

    def exp_cycles(self, s: int, nk: int) -> int:
        lo, hi = self.span(s)
        return cdiv((min(self.rows, hi * self.p) - lo * self.p) * nk, self.lanes)

    def step_keys(self, s: int) -> int:
        return min(self.b, self.keys - s * self.b)

    def step_span(self, engine, name, start, end):
        if self.step_spans is not None:
            self.step_spans.append(Span(engine, name, start, end, {"tile": self.tile}))

    # ---- the engines ----
    def load(self, s: int, which: str, ready: int):
        kv, rd = self.kv, self.rd
        base, stride, row_bytes = ((kv.k_addr, kv.row_stride, self.k_bytes) if which == "K"
                                   else (kv.v_addr, self.v_stride, self.v_bytes))
        nk = self.step_keys(s)
        if self.walk is None:
            addr = base + s * self.b * stride
        else:
            ready, addr = self.paged_block(s, which, ready, base, stride)
        extra = 0
        if self.factored[which] and (s * self.b) % self.fgroup == 0:
            extra = self.fword          # the block starts a factor group: its word first
        if self.contiguous:
            out = rd.transfer(ready, addr, nk * row_bytes + extra)
        else:
            out = (ready, ready)
            for r in range(nk):
                out = rd.transfer(ready, addr + r * stride, row_bytes)
        data = cdiv(nk * row_bytes + extra, rd.rate)
        self.step_span("dma_read", f"{which} {s}", out[1] - data, out[1])
        return out

    def paged_block(self, s: int, which: str, ready: int, base: int, stride: int):
        """A block of a paged cache: the table words requested before it (K only), the wait
        for its page's entry (a K block that starts a page: its address is set a cycle after
        the unit starts, or after the entry arrives, then the request follows as after any
        change of address), and its address. Returns (ready, address)."""
        w, rd, t = self.walk, self.rd, self.timing
        first = s * self.b
        if which == "K":
            for j in w.words_before(first):
                self.word_arrival[j] = rd.transfer(ready, w.word_addr(j), w.beat)[1]
            if first % w.page == 0:
                j, _ = w.entry(first // w.page)
                ready = max(ready, rd.last_req + t.request_gap + 1,
                            self.word_arrival[j] + t.entry_latency)
        page = self.pages[first // w.page]
        r = first % w.page
        # factors: a word before each group of rows (the block that starts one reads it)
        words = -(-r // self.fgroup) * self.fword if self.factored[which] else 0
        return ready, (page + base + r * stride + words) % (1 << 48)

    def pe_step(self, name: str, s: int, start: int) -> int:
        """A Q Kᵀ or P V step of step s on the PE array from ``start``; returns its end."""
        nk = self.step_keys(s)
        ops, cycles = self.pe_ops(s, nk, name), self.pe_cycles(s, nk, name)
        end = start + cycles
        self.step_span("pe", f"{name} {s}", start, end)
        self.stats.busy["pe"] += ops
        self.stats.active("pe", start, end, ops)
        self.pad += cycles - ops
        self.pe_free = end
        return end

    def do_pv(self, j: int) -> None:
        v_in = self.arr_v[j] + self.timing.ring_ready_latency
        st = max(self.pe_free, v_in, self.p_ready[j])
        if st > self.pe_free:
            if v_in >= self.p_ready[j]:
                self.mem_stall += st - self.pe_free
            else:
                self.exp_stall += st - self.pe_free
        self.pv_end[j] = self.pe_step("PV", j, st)

    def do_step(self, s: int) -> None:
        """Q Kᵀ(s) and its softmax, P V(s−1), and the K/V blocks loaded meanwhile."""
        t = self.timing
        nk = self.step_keys(s)
        st = max(self.pe_free, self.arr_k[s] + t.ring_ready_latency)
        self.mem_stall += st - self.pe_free
        self.qk_end[s] = self.pe_step("QK", s, st)
        # EXP(s): a pipeline fed by the Q Kᵀ step; never the bottleneck with one lane a line
        self.exp_first = st if self.exp_first is None else self.exp_first
        self.stats.busy["exp"] += self.exp_cycles(s, nk)
        self.p_ready[s] = st + self.pe_ops(s, nk) - 1 + t.p_ready_latency
        self.stats.active("exp", st, self.p_ready[s], self.exp_cycles(s, nk))
        self.exp_free = max(self.exp_free, self.p_ready[s])
        if s >= 1:
            self.do_pv(s - 1)
        # DMA: the blocks the shared order loads during this step (K(s+1), then V(s)); a
        # block waits for its ring slot, freed by the step ck before it
        ck = self.ck
        for which, j in kv_blocks_during(s, self.steps):
            if self.v_in_k and which == "V":     # V came with K's rows: nothing to read
                self.arr_v[j] = self.arr_k[j]
                continue
            # a block's slots are freed by the step ck before it (with V in K's rows, a K
            # block waits for the V slots too, freed by the later P V step)
            done_by = self.qk_end if which == "K" and not self.v_in_k else self.pv_end
            credit = done_by[j - ck] + t.credit_latency if j >= ck else self.rd_floor
            (self.arr_k if which == "K" else self.arr_v)[j] = self.load(j, which, credit)[1]
        # forget history the loop no longer reads
        for hist, keep in ((self.qk_end, ck + 1), (self.pv_end, ck + 1), (self.arr_k, 2),
                           (self.arr_v, 2), (self.p_ready, 2)):
            hist.pop(s - keep, None)

    # ---- steady state ----
    def counts(self) -> tuple:
        st, rd = self.stats, self.rd
        return (st.busy["pe"], st.busy["exp"], rd.busy, rd.nbytes, self.mem_stall,
                self.exp_stall, self.pad, rd.requests)

    def state_key(self, s: int, ref: int) -> tuple:
        """Everything the rest of the loop reads, relative to ``ref``."""
        ck, kv, b = self.ck, self.kv, self.b
        paged = ()
        if self.walk is not None:       # where the next K block is in its page and table word
            w = self.walk
            g = (s + 1) * b // w.page
            j, i = w.entry(g)
            # past the last table word's first page no word is requested: the entry's place
            # in its word no longer matters
            tail = s >= self.last_word_step
            paged = ((s + 1) * b % w.page, None if tail else i,
                     tuple(self.arrival(x, ref) for x in (j, j + 1)))
        return paged + (tuple(self.qk_end[i] - ref for i in range(s - ck, s) if i >= 0),
                tuple(self.pv_end[i] - ref for i in range(s - 1 - ck, s - 1) if i >= 0),
                self.arr_k[s] - ref, self.arr_v[s - 1] - ref, self.p_ready[s - 1] - ref,
                self.exp_free - ref, self.rd.state(ref),
                0 if self.no_4k else (kv.k_addr + (s + 1) * b * kv.row_stride) % 4096,
                0 if self.no_4k else (kv.v_addr + s * b * self.v_stride) % 4096,
                self.span(s - 1), self.span(s))

    def skip_periods(self, s: int, s0: int, ref0: int, snap: tuple) -> int:
        """Steps s0 … s−1 repeat from step s: skip the whole periods that fit before the
        skipped groups next change; returns the step to continue from."""
        ref = self.pe_free
        period, dt = s - s0, ref - ref0
        # step steps−2 loads the last K block, which may be short: simulate it, never skip it
        end = min(self.steps - 1, self.next_change(s))
        walking = self.walk is not None and s < self.last_word_step
        if walking:                     # ... and the K block of the last table word's first
            end = min(end, self.last_word_step)    # page (step − 1 loads it) comes after
        k = (end - 1 - s) // period
        if k <= 0:
            return s
        deltas = [x - y for x, y in zip(self.counts(), snap, strict=True)]
        stats, rd = self.stats, self.rd
        for eng, busy in (("pe", deltas[0]), ("exp", deltas[1]),
                          ("dma_read", deltas[2])):   # the skipped periods
            stats.active(eng, ref, ref + k * dt, k * busy)
        stats.busy["pe"] += k * deltas[0]
        stats.busy["exp"] += k * deltas[1]
        rd.busy += k * deltas[2]
        rd.nbytes += k * deltas[3]
        self.mem_stall += k * deltas[4]
        self.exp_stall += k * deltas[5]
        self.pad += k * deltas[6]
        rd.requests += k * deltas[7]
        shift, di = k * dt, k * period
        for name in ("qk_end", "pv_end", "arr_k", "arr_v", "p_ready"):
            setattr(self, name, {i + di: t + shift for i, t in getattr(self, name).items()})
        if walking:                     # whole table words went by (the key's phase)
            dw = di * self.b // (self.walk.page * self.walk.epb)
            self.word_arrival = {j + dw: t + shift for j, t in self.word_arrival.items()}
        self.step_span("pe", f"steady state: steps {s}-{s + di - 1}", ref, ref + shift)
        self.pe_free += shift
        self.exp_free += shift
        rd.shift(shift)
        return s + di

    # ---- the rest of a tile, remembered across tiles ----
    def suffix_key(self, s: int) -> tuple:
        """What the loop from step s to the tile's end depends on: its state (relative to the
        PE array's time), the keys left, where the causal diagonal lies from here and the
        step geometry."""
        c, kv = self.comp, self.kv
        return (self.state_key(s, self.pe_free), self.keys - s * self.b,
                s * self.b - c.q_pos - c.diag, s * self.b - c.q_pos - self.win_diag if self.hi
                else None, self.lines, self.rows, self.b, self.groups, self.lo, self.hi,
                c.d, self.d_v, kv.row_stride, kv.args.get("key_scales", 0),
                kv.args.get("value_scales", 0))

    def finish(self, starts: list, hit=None):
        """The tile's end: a remembered suffix applied (``hit``), the suffixes this tile
        began stored, the stalls counted. Returns what :meth:`run` returns."""
        if hit is not None:
            deltas, (issue, done, pe, exp, rd_state) = hit
            ref = self.pe_free
            st, rd = self.stats, self.rd
            st.busy["pe"] += deltas[0]
            st.busy["exp"] += deltas[1]
            rd.busy += deltas[2]
            rd.nbytes += deltas[3]
            self.mem_stall += deltas[4]
            self.exp_stall += deltas[5]
            self.pad += deltas[6]
            rd.requests += deltas[7]
            rd.free, rd.last_req = ref + rd_state[0], ref + rd_state[1]
            rd.done = deque(ref + x for x in rd_state[2])
            self.pe_free, self.exp_free = ref + pe, ref + exp
            kv_done = ref + done
            issue_end = ref + issue
        else:
            kv_done, issue_end = self.arr_v[self.steps - 1], self.rd.last_req
        counts = self.counts()
        for key, ref, snap in starts:
            self.suffix[key] = (tuple(a - b for a, b in zip(counts, snap, strict=True)),
                                (issue_end - ref, kv_done - ref, self.pe_free - ref,
                                 self.exp_free - ref, self.rd.state(ref)))
        self.stats.stall("pe: waiting for K/V (DRAM)", self.mem_stall)
        self.stats.stall("pe: waiting for softmax (EXP)", self.exp_stall)
        self.stats.stall("pe: padding short steps", self.pad)
        return issue_end, kv_done, self.pe_free, (self.exp_first, self.exp_free)

    def run(self):
        """Returns (kv issue end, kv done, pe end, exp span)."""
        _, self.arr_k[0] = self.load(0, "K", self.rd_floor)
        steps = self.steps
        seen: dict[tuple, tuple] = {}
        starts: list = []       # suffixes this tile simulates (to remember at its end)
        s = 0
        skipped = False
        segment = self.span(0)
        while s < steps:
            if self.span(s) != segment:
                # the skipped groups changed: a new steady state may follow (one skip each)
                segment, skipped = self.span(s), False
                seen.clear()
                # the rest of the tile as another tile had it from the same state
                if self.suffix is not None and self.ck < s < steps - 1:
                    key = self.suffix_key(s)
                    if key in self.suffix:
                        return self.finish(starts, self.suffix[key])
                    starts.append((key, self.pe_free, self.counts()))
            # steady-state detection: skip whole periods once the relative state repeats
            tail = self.walk is not None and s >= self.last_word_step
            if tail and s == self.last_word_step:
                # no table word follows: a steady state of its own (one skip)
                skipped = False
                seen.clear()
            if (STEADY_STATE_SKIP and not skipped and 1 <= s < steps - 1
                    and (self.walk is None
                         or (self.page_skip and (tail or self.word_start(s))))):
                key = self.state_key(s, self.pe_free)
                if key in seen:
                    s = self.skip_periods(s, *seen[key])
                    skipped = True
                else:
                    seen[key] = (s, self.pe_free, self.counts())
            self.do_step(s)
            s += 1
        self.do_pv(steps - 1)
        return self.finish(starts)


def tile_loop(hw, timing, rd: Channel, stats: Stats, kv: Instr, comp: Instr,
              kv_start: int, pe_start: int, ring_rows: int, eb: int,
              step_spans: list | None = None, tile: int = 0, entries=None,
              suffix: dict | None = None):
    """Co-simulate one LOAD_KV with its COMPUTE. Returns (kv issue end, kv done, pe end,
    exp span). ``entries(table, n)``: a paged cache's block-table entries. With
    ``step_spans``, each step the loop simulates appends its spans there (``suffix``: the
    rests of causal tiles, remembered across the tiles of one program):
    ``QK s`` and ``PV s`` on the PE array, ``K s`` and ``V s`` (the block's data on the read
    channel), and one ``steady state`` span for the periods it skips."""
    return TileLoop(hw, timing, rd, stats, kv, comp, kv_start, pe_start, ring_rows, eb,
                    step_spans, tile, entries, suffix).run()


def tile_loop_memo(memo: dict, hw, timing, rd: Channel, stats: Stats, kv: Instr, comp: Instr,
                    kv_start: int, pe_start: int, ring_rows: int, eb: int, entries=None,
                    suffix: dict | None = None):
    """:func:`tile_loop` without spans, remembered: a tile's timeline depends only on its
    K/V and COMPUTE fields (addresses within a 4 KB line), when its K/V stream may start and
    the read channel's state, all relative to its first PE cycle. A tile seen before in the
    same relative state (the tiles of one head, heads of one shape) repeats the first one's
    timeline and adds the same busy and stall cycles, exactly (``test_tile_memo_is_exact``)."""
    ref = pe_start
    # the tile's position matters only under a mask (row-group skipping), and there only as
    # the edges' offsets q_pos + diag and q_pos + win_diag (every full tile of a sliding
    # window has the same)
    cargs = {k: v for k, v in comp.args.items() if k not in ("q_pos", "diag", "win_diag")}
    if comp.causal:
        cargs["qd"] = comp.q_pos + comp.diag
    if comp.args.get("window", 0):
        cargs["qw"] = comp.q_pos + comp.args["win_diag"]
    kargs = dict(kv.args)
    pages = ()
    if kargs.get("paged", 0):
        # a paged tile depends on its pages' places in 4 KB lines and the table's in a word
        walk = PageWalk(kv.table, kv.keys, kv.page_log2, hw.axi_data_bytes)
        pages = tuple(e % (4096 >> PAGE_ALIGN_LOG2) for e in entries(kv.table, walk.pages))
        kargs["table"] = walk.e0
    key = (tuple(sorted((k, v % 4096 if k in ("k_addr", "v_addr") else v)
                        for k, v in kargs.items())),
           tuple(sorted(cargs.items())), kv_start - ref, rd.state(ref), pages)
    hit = memo.get(key)
    if hit is None:
        before = (dict(stats.busy), dict(stats.stalls), rd.busy, rd.nbytes, rd.requests)
        out = tile_loop(hw, timing, rd, stats, kv, comp, kv_start, pe_start, ring_rows, eb,
                        entries=entries, suffix=suffix)
        issue_end, kv_done, pe_end, (e0, e1) = out
        hit = ((issue_end - ref, kv_done - ref, pe_end - ref, e0 - ref, e1 - ref),
               {k: v - before[0].get(k, 0) for k, v in stats.busy.items()},
               {k: v - before[1].get(k, 0) for k, v in stats.stalls.items()},
               rd.busy - before[2], rd.nbytes - before[3], rd.requests - before[4],
               rd.state(ref))
        memo[key] = hit
        return out
    rel, busy, stalls, rbusy, rbytes, rreq, (free, last_req, done) = hit
    for k, v in busy.items():
        stats.busy[k] += v
    for k, v in stalls.items():
        stats.stall(k, v)
    rd.busy += rbusy
    rd.nbytes += rbytes
    rd.requests += rreq
    rd.free, rd.last_req = ref + free, ref + last_req
    rd.done = deque(ref + x for x in done)
    a, b_, c, e0, e1 = (ref + x for x in rel)
    return a, b_, c, (e0, e1)
