"""The compute core's blocks on their own: QBuffer, KVRing and StepSequencer against small
models of what they hold and in which order they step."""

import random

import pytest
from amaranth.sim import Simulator

from attenio.base import config as C
from attenio.contract.rules import groups_seen_to, groups_started, kv_order, skipped_groups
from attenio.contract.timing import TIMING
from attenio.hw.kvring import KVRing
from attenio.hw.qbuf import QBuffer
from attenio.hw.sequencer import StepSequencer

TINY = C.tiny()


def _sim(dut, tb):
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()


# ---- QBuffer ----

def ref_qbuffer(cfg, rows, d, kps_log2, data):
    """{(bank, address): word} after loading ``rows`` rows of ``d`` elements."""
    p, q = cfg.mac_lines, cfg.macs_per_line
    wmax = -(-cfg.max_head_dim // q)
    words = -(-d // q)
    out = {}
    for r in range(rows):
        for w in range(words):
            word = [data[r][w * q + j] if w * q + j < d else 0 for j in range(q)]
            banks = [r % p] if kps_log2 == 0 else [r * (1 << kps_log2) + k
                                                    for k in range(1 << kps_log2)]
            for b in banks:
                out[(b, (r // p) * wmax + w)] = word
    return out


def rtl_qbuffer(cfg, rows, d, kps_log2, data):
    dut = QBuffer(cfg)
    q = cfg.macs_per_line
    words = -(-d // q)
    got = {}
    expect = ref_qbuffer(cfg, rows, d, kps_log2, data)

    async def tb(ctx):
        ctx.set(dut.qcmd.payload, {"rows": rows, "d": d, "kps_log2": kps_log2})
        ctx.set(dut.qcmd.valid, 1)
        await ctx.tick().until(dut.qcmd.ready)
        ctx.set(dut.qcmd.valid, 0)
        for r in range(rows):
            for w in range(words):
                # lanes past d carry garbage: the buffer must store 0 there
                ctx.set(dut.q.payload, [data[r][w * q + j] if w * q + j < d else 99
                                        for j in range(q)])
                ctx.set(dut.q.valid, 1)
                await ctx.tick().until(dut.q.ready)
        ctx.set(dut.q.valid, 0)
        await ctx.tick()
        assert ctx.get(dut.loaded)
        for bank, addr in expect:
            ctx.set(dut.rd_addr, addr)
            await ctx.tick()
            got[(bank, addr)] = [int(x) for x in ctx.get(dut.rd_data[bank])]
        ctx.set(dut.clear, 1)
        await ctx.tick()
        assert not ctx.get(dut.loaded)

    _sim(dut, tb)
    return got


@pytest.mark.parametrize("rows, d, kps_log2", [(5, 8, 0), (1, 5, 2), (2, 3, 1), (16, 32, 0)])
def test_qbuffer(rows, d, kps_log2):
    rng = random.Random(rows * 100 + d)
    data = [[rng.randrange(-128, 128) for _ in range(d)] for _ in range(rows)]
    assert rtl_qbuffer(TINY, rows, d, kps_log2, data) == ref_qbuffer(TINY, rows, d, kps_log2,
                                                                      data)


# ---- StepSequencer ----

def ref_phases(cfg, keys, kps_log2, ops, ops_v=None):
    """(Q Kᵀ?, step, cycles) of every phase, in order: the K/V stream's order, K → Q Kᵀ and
    V → P V."""
    steps = -(-keys // (1 << kps_log2))
    ops_v = ops if ops_v is None else ops_v
    return [(which == "K", st, max(ops if which == "K" else ops_v, TIMING.min_phase))
            for which, st in kv_order(steps)]


def rtl_phases(cfg, keys, kps_log2, ops, words, ops_v=None, words_v=None):
    dut = StepSequencer(cfg)
    phases = []

    async def tb(ctx):
        ctx.set(dut.keys, keys)
        ctx.set(dut.blog, kps_log2)
        ctx.set(dut.ops, ops)
        ctx.set(dut.words, words)
        ctx.set(dut.ops_v, ops if ops_v is None else ops_v)
        ctx.set(dut.words_v, words if words_v is None else words_v)
        ctx.set(dut.groups, ops // words)
        ctx.set(dut.g_hi, ops // words)
        ctx.set(dut.g_hi0, ops // words)
        await ctx.tick()
        # every row is in the rings and every softmax done: nothing stalls
        ctx.set(dut.k_written, keys)
        ctx.set(dut.v_written, keys)
        ctx.set(dut.exp_done, keys)
        await ctx.tick().repeat(3)
        ctx.set(dut.running, 1)
        cycles = issues = 0
        for _ in range(100_000):
            if not ctx.get(dut.steps_left):
                break
            cycles += 1
            issues += ctx.get(dut.issue)
            if ctx.get(dut.step_end):
                phases.append((bool(ctx.get(dut.is_qk)), ctx.get(dut.st), cycles))
                assert issues == (ops if ctx.get(dut.is_qk) or ops_v is None else ops_v)
                cycles = issues = 0
            await ctx.tick()

    _sim(dut, tb)
    return phases


def rtl_skipping(cfg, keys, groups, words, t0, tw0=None, hlog=0, g_range=None, starts=False,
                 news=None):
    """Per phase: (Q Kᵀ?, step, ops issued, first row group issued) with skipping on (and a
    window's at its upper edge with ``tw0``; ``hlog``: a group of mac_lines >> hlog
    positions; ``g_range``: a selected part's groups [g_lo, g_hi); ``starts``: the window
    starts each group at its first step, ``win_starts``). ``news`` (a list) gets each phase's
    groups issued with ``new``."""
    g_lo, g_hi = g_range or (0, groups)
    # phase 0's groups, as the core registers them with the command: where a window that
    # starts its groups reaches with key 0 (contract.rules.groups_seen_to), else g_hi
    lines = cfg.mac_lines >> hlog
    g_hi0 = (max(1, groups_seen_to(0, 0, -tw0, 0, lines, groups, starts=True))
             if starts and tw0 is not None else g_hi)
    dut = StepSequencer(cfg)
    out = []

    async def tb(ctx):
        for sig, v in ((dut.keys, keys), (dut.blog, 0), (dut.ops, groups * words),
                       (dut.words, words), (dut.ops_v, groups * (words + 1)),
                       (dut.words_v, words + 1), (dut.skip, int(t0 is not None)),
                       (dut.groups, groups), (dut.t0, t0 or 0),
                       (dut.skip_hi, int(tw0 is not None)), (dut.tw0, tw0 or 0),
                       (dut.hlog, hlog), (dut.g_lo, g_lo), (dut.g_hi, g_hi),
                       (dut.g_hi0, g_hi0),
                       (dut.win_starts, int(starts)),
                       (dut.k_written, keys), (dut.v_written, keys), (dut.exp_done, keys)):
            ctx.set(sig, v)
        await ctx.tick().repeat(4)
        ctx.set(dut.running, 1)
        issues, first_g, new = 0, None, set()
        for _ in range(100_000):
            if not ctx.get(dut.steps_left):
                break
            if ctx.get(dut.issue):
                first_g = ctx.get(dut.g) if issues == 0 else first_g
                issues += 1
                if ctx.get(dut.new):
                    new.add(ctx.get(dut.g))
            if ctx.get(dut.step_end):
                out.append((bool(ctx.get(dut.is_qk)), ctx.get(dut.st), issues, first_g))
                if news is not None:
                    news.append(sorted(new))
                issues, first_g, new = 0, None, set()
            await ctx.tick()

    _sim(dut, tb)
    return out


@pytest.mark.parametrize("keys, groups, words, t0", [(20, 4, 2, 0), (40, 5, 1, -3), (9, 3, 2, 5),
                                                    (12, 4, 1, 9)])
def test_sequencer_skips_row_groups_causal_hides(keys, groups, words, t0):
    # t0 = −(q_pos + diag): step st's key is seen by rows ≥ st + t0 (contract.rules)
    p = TINY.mac_lines
    # P V steps here have a word a row more than Q Kᵀ steps (V's head dim of its own)
    ref = [(qk, st, (groups - skipped_groups(st, -t0, 0, p, groups)) * (words + (not qk)),
            skipped_groups(st, -t0, 0, p, groups))
           for qk, st in ((which == "K", st) for which, st in kv_order(keys))]
    assert rtl_skipping(TINY, keys, groups, words, t0) == ref


@pytest.mark.parametrize("keys, groups, words, t0, tw0, hlog", [
    (30, 6, 2, None, -5, 0),        # a window alone: the groups its key has not reached skip
    (40, 7, 1, 0, -3, 1),           # causal and a window, two positions a group (head_pos)
    (24, 5, 2, -1, 2, 2),           # one position a group: at most the window's rows issue
])
def test_sequencer_skips_row_groups_past_a_window(keys, groups, words, t0, tw0, hlog):
    # step st's key is seen by positions ≥ st + t0 (causal) and ≤ st + tw0 (the window)
    lines = TINY.mac_lines >> hlog
    ref = []
    for which, st in kv_order(keys):
        lo = skipped_groups(st, -t0, 0, lines, groups) if t0 is not None else 0
        hi = max(lo + 1, groups_seen_to(st, st, -tw0, 0, lines, groups))
        ref.append((which == "K", st, (hi - lo) * (words + (which != "K")), lo))
    got = rtl_skipping(TINY, keys, groups, words, t0, tw0, hlog)
    assert got == ref
    assert any(n < groups * words for qk, _, n, _ in got if qk)     # something was skipped


@pytest.mark.parametrize("keys, groups, words, t0, tw0, hlog", [
    (30, 6, 2, None, -5, 0),        # a window alone
    (40, 7, 1, 0, -3, 1),           # causal and a window, two positions a group (head_pos)
    (24, 5, 2, -1, 2, 2),           # one position a group, the window's reach above step 0's
    (20, 4, 2, 0, 0, 0),            # step 0 reaches the first group alone
])
def test_sequencer_starts_groups_where_the_window_reaches_them(keys, groups, words, t0, tw0,
                                                               hlog):
    """A tile of one part (``win_starts``) cuts its window's groups from step 0 on, and flags
    each group ``new`` at the first step that issues it (contract.rules.groups_seen_to with
    ``starts``, groups_started): its m, ℓ and O start there, not at step 0."""
    lines = TINY.mac_lines >> hlog
    news: list = []
    got = rtl_skipping(TINY, keys, groups, words, t0, tw0, hlog, starts=True, news=news)
    ref, spans = [], {}
    for which, st in kv_order(keys):
        lo = skipped_groups(st, -t0, 0, lines, groups) if t0 is not None else 0
        hi = max(lo + 1, groups_seen_to(st, st, -tw0, 0, lines, groups, starts=True))
        spans[st] = (lo, hi)
        ref.append((which == "K", st, (hi - lo) * (words + (which != "K")), lo))
    assert got == ref
    for (_, st, _, _), new in zip(got, news, strict=True):
        lo, hi = spans[st]
        first = groups_started(spans[st - 1] if st else None, groups)
        assert new == list(range(max(lo, first), hi)), (st, new)
    # the first two steps issue fewer than every group: the cut the rule lifts
    assert any(n < groups * words for qk, st, n, _ in got if qk and st < 2)
    # and without win_starts they issue every group, only step 0's new
    news0: list = []
    got0 = rtl_skipping(TINY, keys, groups, words, t0, tw0, hlog, news=news0)
    assert all(n == groups * (words + (not qk)) for qk, st, n, _ in got0 if st < 2)
    assert all(new == ([] if st else list(range(groups)))
               for (_, st, _, _), new in zip(got0, news0, strict=True))


@pytest.mark.parametrize("keys, kps_log2, ops", [(1, 0, 4), (7, 0, 20), (9, 1, 3), (16, 2, 12)])
def test_sequencer_order_and_length(keys, kps_log2, ops):
    words = 2 if ops % 2 == 0 else 1
    assert rtl_phases(TINY, keys, kps_log2, ops, words) == ref_phases(TINY, keys, kps_log2, ops)


@pytest.mark.parametrize("keys, groups, words, g_lo, g_hi", [(6, 4, 2, 1, 2), (5, 5, 1, 2, 5),
                                                            (3, 3, 3, 0, 1)])
def test_sequencer_issues_a_selected_parts_groups_alone(keys, groups, words, g_lo, g_hi):
    """A selected part (COMPUTE.select) issues its row groups [g_lo, g_hi) in every phase,
    steps 0 and 1 included (the part continues its rows: none starts there)."""
    got = rtl_skipping(TINY, keys, groups, words, None, None, 0, (g_lo, g_hi))
    assert [(n, g) for _, _, n, g in got] == [
        ((g_hi - g_lo) * (words + (not qk)), g_lo) for qk, _, _, _ in got]
    assert len(got) == 2 * keys


@pytest.mark.parametrize("groups, words, words_v", [(4, 1, 5), (3, 6, 2), (2, 3, 8)])
def test_sequencer_phases_with_v_of_its_own_head_dim(groups, words, words_v):
    # Q Kᵀ steps issue groups·words pairs, P V steps groups·words_v (COMPUTE.dv): each
    # padded to min_phase alone
    ops, ops_v = groups * words, groups * words_v
    assert (rtl_phases(TINY, 7, 0, ops, words, ops_v, words_v)
            == ref_phases(TINY, 7, 0, ops, ops_v))


# ---- KVRing ----

def test_ring_holds_rows_until_freed():
    cfg = TINY
    ring = cfg.ring_rows
    words = 2
    dut = KVRing(cfg)
    rows = [[[r * 10 + w] * cfg.macs_per_line for w in range(words)] for r in range(ring + 1)]

    async def tb(ctx):
        def beat(r, w):
            ctx.set(dut.kv.payload, {"data": rows[r][w], "v": 0, "last": int(w == words - 1),
                                     "end": 0})
            ctx.set(dut.kv.valid, 1)

        for r in range(ring):
            for w in range(words):
                beat(r, w)
                await ctx.tick().until(dut.kv.ready)
        ctx.set(dut.kv.valid, 0)
        await ctx.tick().repeat(2)
        assert ctx.get(dut.k_written) == ring
        beat(ring, 0)                       # the ring is full: the next row waits
        await ctx.tick().repeat(3)
        assert not ctx.get(dut.kv.ready)
        # a Q Kᵀ step over key 0 ends (its fields are steady during the step): row 0's slot
        # is free again
        ctx.set(dut.is_qk, 1)
        ctx.set(dut.kend, 1)
        await ctx.tick().repeat(2)
        ctx.set(dut.step_end, 1)
        await ctx.tick()
        ctx.set(dut.step_end, 0)
        assert ctx.get(dut.k_free) == 1
        await ctx.tick().until(dut.kv.ready)
        ctx.set(dut.kv.valid, 0)
        # every held row reads back from copy 0 at kbase
        for r in range(1, ring):
            for w in range(words):
                ctx.set(dut.kbase, r)
                ctx.set(dut.word, w)
                await ctx.tick()
                assert [int(x) for x in ctx.get(dut.k_data[0])] == rows[r][w]

    _sim(dut, tb)


def test_ring_keeps_each_k_rows_factor_with_its_slot():
    """A K row's factor word (tagged ``sc``) goes to its slot's register, not into the ring;
    each copy reads key ``kbase + c``'s factor in the same cycle; a V row's data is untouched
    by it."""
    cfg = TINY
    ring = cfg.ring_rows
    words = 2
    dut = KVRing(cfg)
    cmb = cfg.numerics.scale_mult_bits
    factors = [((1 << (cmb - 1)) + 97 * r, r + 3) for r in range(ring)]

    def word_of(m, e):
        bits = m | (e << cmb)
        return [(bits >> (8 * i)) & 0xFF for i in range(cfg.macs_per_line)]

    def signed8(x):
        return x - 256 if x > 127 else x

    async def tb(ctx):
        for r in range(ring):
            for w in range(words + 1):
                sc = int(w == words)
                data = ([signed8(x) for x in word_of(*factors[r])] if sc
                        else [r * 10 + w] * cfg.macs_per_line)
                ctx.set(dut.kv.payload, {"data": data, "v": 0, "last": sc, "sc": sc,
                                         "end": 0})
                ctx.set(dut.kv.valid, 1)
                await ctx.tick().until(dut.kv.ready)
        ctx.set(dut.kv.valid, 0)
        await ctx.tick()
        assert ctx.get(dut.k_written) == ring
        for r in range(ring):
            ctx.set(dut.kbase, r)
            for c in range(cfg.max_keys_per_step):
                got = ctx.get(dut.k_scale[c])
                m, e = factors[(r + c) % ring]
                assert (int(got.c_m), int(got.c_sh)) == (m, e), (r, c)
            for w in range(words):            # the factor word did not land in the ring
                ctx.set(dut.word, w)
                await ctx.tick()
                assert [int(x) for x in ctx.get(dut.k_data[0])] == [r * 10 + w] * cfg.macs_per_line

    _sim(dut, tb)
