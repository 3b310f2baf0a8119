"""PEArray against the integer model: a line's Q Kᵀ score is the integer dot product of its
row and key, accumulated word by word; P V is ``O = rescale(O, shift) + p·v``
(``model.numerics.rescale``) per key, chained over a row's consecutive lines when a step
takes several keys. Operands enter at the core's pipeline stages (PEArray's docstring)."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.hw.pe_array import PEArray
from attenio.model.numerics import rescale

from .helpers import simulate

TINY = C.tiny()
P, Q = TINY.mac_lines, TINY.macs_per_line


def ref_scores(qw, kw):
    """qw, kw: [words, lines, q] integers → each line's Σ q·k."""
    return (np.asarray(qw, dtype=np.int64) * np.asarray(kw, dtype=np.int64)).sum(axis=(0, 2))


def rtl_scores(qw, kw):
    dut = PEArray(TINY)
    words = len(qw)
    out = []

    async def tb(ctx):
        for t in range(words + 4):
            feed = t < words
            ctx.set(dut.qk, (1 << P) - 1 if feed else 0)      # a bit a line
            if feed:
                for i in range(P):
                    for lane in range(Q):
                        ctx.set(dut.q[i][lane], int(qw[t][i][lane]))
                        ctx.set(dut.k[i][lane], int(kw[t][i][lane]))
            # the sums of the operands of cycle t - 3 are added in cycle t
            w = t - 3
            ctx.set(dut.acc, 0 <= w < words)
            ctx.set(dut.acc_first, w == 0)
            await ctx.tick()
        out.extend(ctx.get(dut.scores[i]) for i in range(P))

    simulate(dut, tb)
    return out


@pytest.mark.parametrize("words, seed", [(1, 1), (5, 2), (16, 3)])
def test_qk_scores(words, seed):
    rng = np.random.default_rng(seed)
    lim = 1 << (TINY.data_bits - 1)
    qw = rng.integers(-lim, lim, size=(words, P, Q))
    kw = rng.integers(-lim, lim, size=(words, P, Q))
    qw[0, 0, :] = kw[0, 0, :] = -lim          # the extreme product
    assert rtl_scores(qw, kw) == ref_scores(qw, kw).tolist()


def ref_pv(o_old, p, v, shift, b, zero):
    """Each line's new O word: a row's keys on lines h … h+b−1 (h a multiple of b), the
    head starting from its O word (0 on the tile's first key)."""
    out = np.zeros((P, Q), dtype=np.int64)
    for h in range(0, P, b):
        o = np.zeros(Q, dtype=np.int64) if zero else np.asarray(o_old[h], dtype=np.int64)
        for i in range(h, h + b):
            o = rescale(o, shift[i]) + int(p[i]) * np.asarray(v[i], dtype=np.int64)
            out[i] = o
    return out


def rtl_pv(o_old, p, v, shift, b, zero):
    dut = PEArray(TINY)
    out = []

    async def tb(ctx):
        for i in range(P):
            ctx.set(dut.head[i], i % b == 0)
        # c1: operands and shift; c2: the O words read and zero; c4: the result
        ctx.set(dut.qk, 0)
        for i in range(P):
            ctx.set(dut.p[i], int(p[i]))
            ctx.set(dut.shift[i], int(shift[i]))
            for lane in range(Q):
                ctx.set(dut.v[i][lane], int(v[i][lane]))
        await ctx.tick()
        for i in range(P):
            for lane in range(Q):
                ctx.set(dut.o_old[i][lane], int(o_old[i][lane]))
        ctx.set(dut.zero, zero)
        await ctx.tick()
        ctx.set(dut.zero, not zero)     # a cycle late: must not count
        await ctx.tick()
        out.extend([ctx.get(dut.o_new[i][lane]) for lane in range(Q)] for i in range(P))

    simulate(dut, tb)
    return out


@pytest.mark.parametrize("b, zero, seed", [(1, False, 1), (2, False, 2), (4, False, 3),
                                           (4, True, 4), (1, True, 5)])
def test_pv_rescale_and_chain(b, zero, seed):
    rng = np.random.default_rng(seed)
    cfg = TINY
    lim = 1 << (cfg.data_bits - 1)
    amax = 1 << (cfg.acc_bits - 4)
    o_old = rng.integers(-amax, amax, size=(P, Q))
    p = rng.integers(0, 1 << cfg.exp_bits, size=P)
    v = rng.integers(-lim, lim, size=(P, Q))
    shift = rng.choice([0, 1, 3, 17, 62], size=P)
    assert rtl_pv(o_old, p, v, shift, b, zero) == ref_pv(o_old, p, v, shift, b, zero).tolist()
