"""The compute core's stages, each alone in Amaranth's simulator against its model function
(ref/rtl pairs): the score stage's mask and multipliers (``contract.rules``,
``model.numerics.scale``), the softmax stage (``scale``, ``running_max``, ``exp2``,
``accumulate``'s ℓ), the P V stage with its PE array (``accumulate``'s O) and the finalize
stage (``finalize``, ``row_stats``)."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth import Module
from amaranth.lib import wiring

from attenio.base import config as C
from attenio.contract.formats import stats_word_bytes
from attenio.contract.rules import causal_visible, window_visible
from attenio.hw.finalize_stage import FinalizeStage
from attenio.hw.pe_array import PEArray
from attenio.hw.pv_stage import PVStage
from attenio.hw.score import QK_LATENCY, ScoreStage
from attenio.hw.softmax_stage import SoftmaxStage
from attenio.model import numerics as nm

from .helpers import simulate

TINY = C.tiny()


# ---- score: which line sees its key, and each lane's multiplier ----

def ref_score(cfg, cmd, step, rows_cm, key_f):
    """Lines' visibility of key ``step`` (one key a step, rows 0 … p−1 of the tile) and a
    function giving the model's logits of scores under the lanes' multipliers."""
    vis = []
    for i in range(cfg.mac_lines):
        row = i + cmd["q_pos"]
        ok = step < cmd["keys"]
        ok = ok and (not cmd["causal"] or causal_visible(step, row, cmd["diag"]))
        ok = ok and (not cmd["window"] or window_visible(step, row, cmd["win_diag"]))
        vis.append(bool(ok))
    if cmd["row_scales"]:
        cm, sh = np.array([c for c, _ in rows_cm]), np.array([s for _, s in rows_cm])
    else:
        cm, sh = np.full(cfg.mac_lines, cmd["c_m"]), np.full(cfg.mac_lines, cmd["c_sh"])
    km, ke = key_f
    sp = nm.ScaleParams(cm, sh, np.array([km]) if cmd["key_scales"] else None,
                        np.array([ke]) if cmd["key_scales"] else None)
    return vis, lambda s: nm.scale(cfg, np.asarray(s)[:, None], sp)[:, 0]


def rtl_score(cfg, cmd, step, rows_cm, key_f):
    dut = ScoreStage(cfg)
    got = {}

    async def tb(ctx):
        ctx.set(dut.cmd, cmd)
        for i, (c_m, c_sh) in enumerate(rows_cm):
            ctx.set(dut.sc_data[i], {"c_m": c_m, "c_sh": c_sh})
        ctx.set(dut.k_scale[0], {"c_m": key_f[0], "c_sh": key_f[1]})
        for name, v in (("words", 1), ("groups", 1), ("running", 1), ("st", step),
                        ("issue", 1), ("is_qk", 1), ("last_op", 1)):
            ctx.set(getattr(dut, name), v)
        await ctx.tick()
        ctx.set(dut.issue, 0)
        for _ in range(QK_LATENCY + 1):
            await ctx.tick()
            if ctx.get(dut.valid):
                got.update(vis=[bool(ctx.get(dut.visible) >> i & 1)
                                for i in range(cfg.mac_lines)],
                           cm=[ctx.get(dut.c_m[i]) for i in range(cfg.mac_lines)],
                           sh=[ctx.get(dut.c_sh[i]) for i in range(cfg.mac_lines)],
                           step=ctx.get(dut.step))

    simulate(dut, tb)
    return got


@pytest.mark.parametrize("causal,window,row_scales,key_scales,step", [
    (0, 0, 0, 0, 3), (1, 0, 1, 0, 5), (1, 1, 0, 1, 4), (0, 1, 1, 1, 9), (1, 0, 1, 1, 12)])
def test_score_stage_mask_and_multipliers(causal, window, row_scales, key_scales, step):
    cfg = TINY
    rng = np.random.default_rng(step)
    cmb = cfg.numerics.scale_mult_bits
    cmd = {"rows": cfg.mac_lines, "head_rows": 0, "d": cfg.macs_per_line,
           "dv": cfg.macs_per_line, "keys": 10,
           "c_m": int(rng.integers(1 << (cmb - 1), 1 << cmb)), "c_sh": 20, "causal": causal,
           "q_pos": 2, "diag": 3, "window": window, "win_diag": -1, "kps_log2": 0,
           "row_scales": row_scales, "key_scales": key_scales, "lse": 0}
    rows_cm = [(int(rng.integers(1 << (cmb - 1), 1 << cmb)), int(rng.integers(14, 30)))
               for _ in range(cfg.mac_lines)]
    key_f = (int(rng.integers(1 << (cmb - 1), 1 << cmb)), int(rng.integers(0, 8)))
    got = rtl_score(cfg, cmd, step, rows_cm, key_f)
    vis, logits = ref_score(cfg, cmd, step, rows_cm, key_f)
    assert got["vis"] == vis and got["step"] == step
    # the lanes' multipliers give the model's logits for any score
    s = rng.integers(-(1 << (cfg.score_bits - 2)), 1 << (cfg.score_bits - 2), cfg.mac_lines)
    mine = [(int(x) * c + ((1 << h) >> 1)) >> h for x, c, h in zip(s, got["cm"], got["sh"],
                                                                   strict=True)]
    assert mine == [int(x) for x in logits(s)]


# ---- softmax: m, ℓ, p and the shift of one row group ----

def ref_softmax(cfg, scores, cm, sh, vis, m_old, l_old, first):
    sp = nm.ScaleParams(np.array(cm), np.array(sh))
    t = nm.scale(cfg, np.asarray(scores)[:, None], sp)
    if first:
        m_old, l_old = np.full(len(scores), nm.m_init(cfg)), np.zeros(len(scores), np.int64)
    valid = np.asarray(vis)[:, None]
    m, shift = nm.running_max(cfg, np.asarray(m_old), t, valid)
    f = cfg.numerics.logit_frac_bits
    y = np.where(valid, t - (m[:, None] << f), -(1 << 40))      # as attention_head_stepwise
    p = np.where(valid, nm.exp2(cfg, y), 0)
    l, _ = nm.accumulate(cfg, np.asarray(l_old), np.zeros((len(scores), 1), np.int64), p,
                         np.zeros((1, 1), np.int64), shift)
    return [int(x) for x in m], [int(x) for x in l], [int(x) for x in p[:, 0]], \
        [int(x) for x in shift]


def rtl_softmax(cfg, scores, cm, sh, vis, m_old, l_old, first, group=0, step=2):
    dut = SoftmaxStage(cfg)
    p = cfg.mac_lines
    got = {}

    async def tb(ctx):
        ctx.set(dut.groups, 1)
        for i in range(p):
            ctx.set(dut.scores[i], int(scores[i]))
            ctx.set(dut.c_m[i], int(cm[i]))
            ctx.set(dut.c_sh[i], int(sh[i]))
            ctx.set(dut.ml_data[i], {"m": int(m_old[i]), "l": int(l_old[i])})
        ctx.set(dut.visible, sum(1 << i for i in range(p) if vis[i]))
        ctx.set(dut.step, 0 if first else step)
        ctx.set(dut.first, int(first))     # the group starts here (the sequencer's `new`)
        ctx.set(dut.group, group)
        ctx.set(dut.valid, 1)
        ctx.set(dut.step_last, 1)           # the step's last group (here its only one)
        await ctx.tick()
        ctx.set(dut.valid, 0)
        ctx.set(dut.step_last, 0)
        for _ in range(16):
            await ctx.tick()
            if ctx.get(dut.ml_wr_en) and "m" not in got:
                got.update(m=[ctx.get(dut.ml_wr_data[i].m) for i in range(p)],
                           l=[ctx.get(dut.ml_wr_data[i].l) for i in range(p)],
                           p=[ctx.get(dut.pb_wr_data[i].p) for i in range(p)],
                           shift=[ctx.get(dut.pb_wr_data[i].shift) for i in range(p)],
                           addr=[ctx.get(dut.ml_wr_addr[i]) for i in range(p)],
                           pb_addr=[ctx.get(dut.pb_wr_addr[i]) for i in range(p)])
        got["exp_done"] = ctx.get(dut.exp_done)

    simulate(dut, tb)
    return got


@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_softmax_stage_matches_the_model(first, seed):
    cfg = TINY
    rng = np.random.default_rng(seed)
    p, cmb = cfg.mac_lines, cfg.numerics.scale_mult_bits
    scores = rng.integers(-3000, 3000, p)
    cm = rng.integers(1 << (cmb - 1), 1 << cmb, p)
    sh = rng.integers(18, 24, p)
    vis = [True] * (p - 1) + [bool(seed % 2)]
    m_old = rng.integers(-3, 4, p)
    l_old = rng.integers(1 << cfg.numerics.exp_frac_bits, 1 << (cfg.numerics.exp_frac_bits + 2),
                         p)
    got = rtl_softmax(cfg, scores, cm, sh, vis, m_old, l_old, first, group=seed)
    m, l, pv, shift = ref_softmax(cfg, scores, cm, sh, vis, m_old, l_old, first)
    assert (got["m"], got["l"], got["p"], got["shift"]) == (m, l, pv, shift)
    step = 0 if first else 2
    # each bank's copy of the write addresses: the group, and the P buffer's half
    assert got["addr"] == [seed] * p
    assert got["pb_addr"] == [(step % 2) * cfg.row_groups + seed] * p
    assert got["exp_done"] == step + 1          # the tile's only group: the step is done


# ---- P V: O = (O >> shift) + p·v, with the PE array ----

class _PVWithArray(wiring.Component):
    """The P V stage wired to a PE array, as the core wires them."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.stage, self.pe = PVStage(cfg), PEArray(cfg)
        super().__init__({n: v for n, v in self.stage.signature.members.items()
                          if not n.startswith("pe_")})

    def elaborate(self, platform):
        m = Module()
        m.submodules.stage, m.submodules.pe = st, pe = self.stage, self.pe
        for name in self.signature.members:
            port, own = getattr(st, name), getattr(self, name)
            if st.signature.members[name].flow == wiring.In:
                m.d.comb += port.eq(own)
            else:
                m.d.comb += own.eq(port)
        m.d.comb += [pe.qk.eq(0), pe.p.eq(st.pe_p), pe.shift.eq(st.pe_shift),
                     pe.v.eq(st.pe_v), pe.o_old.eq(st.pe_o_old), pe.head.eq(st.pe_head),
                     pe.zero.eq(st.pe_zero), st.pe_o_new.eq(pe.o_new)]
        return m


def rtl_pv(cfg, p_vals, shifts, v, o_old, step):
    dut = _PVWithArray(cfg)
    lanes = cfg.mac_lines
    got = {}

    async def tb(ctx):
        ctx.set(dut.is_qk, 0)
        ctx.set(dut.st, step)
        ctx.set(dut.new, int(step == 0))     # the group's first step starts O from 0
        ctx.set(dut.v_data[0], [int(x) for x in v])
        for i in range(lanes):
            ctx.set(dut.pb_data[i], {"p": int(p_vals[i]), "shift": int(shifts[i])})
        ctx.set(dut.issue, 1)
        rd_next, wr_next = ctx.get(dut.o_rd_next), None
        assert ctx.get(dut.o_rd_load)
        await ctx.tick()
        assert ctx.get(dut.o_rd_addr) == rd_next      # told a cycle ahead (the core's copies)
        ctx.set(dut.issue, 0)
        await ctx.tick()                          # c1: the O read's data arrive in c2
        for i in range(lanes):
            ctx.set(dut.o_data[i], [int(x) for x in o_old[i]])
        for _ in range(6):
            if ctx.get(dut.o_wr_load):
                wr_next = ctx.get(dut.o_wr_next)
            await ctx.tick()
            if ctx.get(dut.o_wr_en) and "o" not in got:
                assert ctx.get(dut.o_wr_addr) == wr_next
                got["o"] = [[int(x) for x in ctx.get(dut.o_wr_data[i])] for i in range(lanes)]
                got["addr"] = ctx.get(dut.o_wr_addr)

    simulate(dut, tb)
    return got


@pytest.mark.parametrize("step", [0, 3])
def test_pv_stage_matches_accumulate(step):
    cfg = TINY
    rng = np.random.default_rng(step + 10)
    lanes, q = cfg.mac_lines, cfg.macs_per_line
    p_vals = rng.integers(0, 1 << cfg.exp_bits, lanes)
    shifts = rng.integers(0, 4, lanes)
    v = rng.integers(-128, 128, q)
    o_old = rng.integers(-(1 << 20), 1 << 20, (lanes, q))
    got = rtl_pv(cfg, p_vals, shifts, v, o_old, step)
    start = np.zeros_like(o_old) if step == 0 else o_old      # the first key starts from 0
    _, o = nm.accumulate(cfg, np.zeros(lanes, np.int64), start, p_vals[:, None], v[None, :],
                         shifts)
    assert got["o"] == o.tolist() and got["addr"] == 0


# ---- finalize: O / ℓ row by row (and the statistics word with lse) ----

def rtl_finalize_stage(cfg, o_rows, l, m, lse):
    """Rows of one tile held in fake banks (row ρ in bank ρ mod p, word w at (ρ >> log2 p)·
    words_per_row + w); the stage's output words in order."""
    dut = FinalizeStage(cfg)
    p, words = cfg.mac_lines, 1
    rows = len(o_rows)
    out = []

    async def tb(ctx):
        ctx.set(dut.cmd, {"rows": rows, "keys": 5, "lse": lse, "d": cfg.macs_per_line,
                           "dv": cfg.macs_per_line})
        ctx.set(dut.words, words)
        ctx.set(dut.running, 1)
        ctx.set(dut.o.ready, 1)
        ahead = None       # the address and ownership told a cycle ahead (the core's copies)
        for _ in range(200):
            o_addr, ml_addr, active = ctx.get(dut.o_addr), ctx.get(dut.ml_addr), ctx.get(
                dut.active)
            if ahead is not None:
                assert active == ahead[1] and (not ctx.get(dut.issue) or o_addr == ahead[0])
            ahead = (ctx.get(dut.o_addr_next), ctx.get(dut.active_next))
            await ctx.tick()
            # synchronous read ports: the data of the address set before the edge
            if active:
                for i in range(p):
                    r = (o_addr // cfg.words_per_row) * p + i
                    if r < rows:
                        ctx.set(dut.o_data[i], [int(x) for x in o_rows[r]])
                    r = ml_addr * p + i
                    if r < rows:
                        ctx.set(dut.ml_data[i], {"m": int(m[r]), "l": int(l[r])})
            if ctx.get(dut.o.valid):
                out.append([int(x) for x in ctx.get(dut.o.payload)])
            if len(out) == rows * (words + lse):
                break

    simulate(dut, tb)
    return out


@pytest.mark.parametrize("lse", [0, 1])
def test_finalize_stage_matches_the_model(lse):
    cfg = TINY
    rng = np.random.default_rng(5 + lse)
    rows, q = 6, cfg.macs_per_line
    lo = 1 << cfg.numerics.exp_frac_bits
    l = rng.integers(lo, 4 * lo, rows)
    o_rows = (l[:, None] * rng.uniform(-100, 100, (rows, q))).astype(np.int64)
    m = rng.integers(-5, 5, rows)
    got = rtl_finalize_stage(cfg, o_rows, l, m, lse)
    want = nm.finalize(cfg, o_rows, l)
    if lse:
        assert [got[2 * r] for r in range(rows)] == want.tolist()
        # the statistics word carries the row's m and ℓ (contract.formats.stats_of_words)
        ob = cfg.out_element_bytes
        raw = np.array([got[2 * r + 1] for r in range(rows)], dtype=np.int64)
        words = raw.astype(f"<i{ob}").view(np.uint8).reshape(rows, -1)
        assert np.array_equal(words, stats_word_bytes(cfg, m, l))
    else:
        assert got == want.tolist()
