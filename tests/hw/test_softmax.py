"""Softmax unit against the model's scale, running_max, exp2 and ℓ update (ref/rtl pair)."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.contract.formats import SOFTCAP_X_EXTRA, SOFTCAP_X_INT
from attenio.hw.softmax import SoftmaxUnit
from attenio.model import numerics as nm

from .helpers import run_pipeline


def gen(cfg, count, seed, sp=None):
    rng = np.random.default_rng(seed)
    p = cfg.mac_lines
    smax = 1 << (cfg.score_bits - 2)
    sp = nm.ScaleParams(40000, 17) if sp is None else sp
    items = []
    for _ in range(count):
        s = rng.integers(-smax // 64, smax // 64, p)
        t_guess = nm.scale(cfg, s, sp) >> cfg.numerics.logit_frac_bits
        m_old = t_guess + rng.integers(-3, 4, p)
        l_old = rng.integers(0, 1 << (cfg.row_sum_bits - 2), p)
        vis = rng.random(p) < 0.8
        first = bool(rng.random() < 0.2)
        items.append((s, m_old, l_old, vis, first))
    return items


def lane_scales(cfg, sp, k):
    """Item k's multiplier per lane: ``sp`` for all, or with per-row ``sp`` (arrays of several
    pairs) a different pair for each lane and item."""
    if not sp.per_row:
        return nm.ScaleParams(np.full(cfg.mac_lines, sp.c_m), np.full(cfg.mac_lines, sp.c_sh),
                              cap=sp.cap)
    idx = (np.arange(cfg.mac_lines) + k) % len(sp.c_m)
    return sp.take(idx)


def ref_softmax(cfg, items, sp):
    out = []
    f = cfg.numerics.logit_frac_bits
    for k, (s, m_old, l_old, vis, first) in enumerate(items):
        m0 = np.full(len(s), nm.m_init(cfg)) if first else m_old
        l0 = np.zeros(len(s), dtype=np.int64) if first else l_old
        t = nm.scale(cfg, np.asarray(s)[:, None], lane_scales(cfg, sp, k))[:, 0]
        m_new, sh = nm.running_max(cfg, m0, t[:, None], vis[:, None])
        y = np.where(vis, t - (m_new << f), -(1 << 40))
        p = np.where(vis, nm.exp2(cfg, y), 0)
        l_new = nm.rescale(l0, sh) + p
        out.append((m_new.tolist(), l_new.tolist(), p.tolist(), sh.tolist()))
    return out


def rtl_softmax(cfg, items, sp):
    dut = SoftmaxUnit(cfg)
    index = {id(it): k for k, it in enumerate(items)}

    def put(ctx, item):
        s, m_old, l_old, vis, first = item
        ls = lane_scales(cfg, sp, index[id(item)])
        if cfg.softcap_unit:
            ctx.set(dut.softcap, int(sp.cap is not None))
            ctx.set(dut.cap, int(sp.cap or 0))
        ctx.set(dut.c_m, [int(x) for x in ls.c_m])
        ctx.set(dut.c_sh, [int(x) for x in ls.c_sh])
        ctx.set(dut.i.payload, {"s": [int(x) for x in s], "m": [int(x) for x in m_old],
                                "l": [int(x) for x in l_old],
                                "visible": sum(int(v) << k for k, v in enumerate(vis)),
                                "first": int(first)})

    def get(o):
        return ([int(x) for x in o.m], [int(x) for x in o.l], [int(x) for x in o.p],
                [int(x) for x in o.shift])

    return run_pipeline(dut, items, dut.i, dut.o, put, get)


def test_softmax_unit_matches_model():
    for cfg in (C.tiny(), C.fpga()):
        for sp in (nm.ScaleParams(40000, 17), nm.ScaleParams(65535, 0), nm.ScaleParams(33000, 1)):
            items = gen(cfg, 60, sp.c_sh)
            assert rtl_softmax(cfg, items, sp) == ref_softmax(cfg, items, sp)


def test_softmax_unit_takes_each_lanes_multiplier_with_its_scores():
    """Per-row Q scales: every lane has its own multiplier, changing from one input to the
    next (the table the Q rows brought); shifts 0 and 1 exercise the rounding constant."""
    sp = nm.ScaleParams(np.array([40000, 65535, 33000, 50000, 47000]),
                        np.array([17, 0, 1, 16, 18]))
    for cfg in (C.tiny(), C.fpga()):
        items = gen(cfg, 60, 5)
        assert rtl_softmax(cfg, items, sp) == ref_softmax(cfg, items, sp)


@pytest.mark.parametrize("preset", ["tiny", "fpga"])
def test_soft_capping_unit_matches_model(preset):
    """The soft-capping stages (``softcap_unit``): Gemma 2's c = 50 and a tight c = 2, scores
    from far inside the table to past its end (``|x| ≥ 2**SOFTCAP_X_INT``, the last knot), both
    signs; then the same unit with the cap off passes the scaled scores through."""
    cfg = C.replace(C.preset(preset), softcap_unit=True)
    xf = cfg.numerics.logit_frac_bits + SOFTCAP_X_EXTRA
    smax = 1 << (cfg.score_bits - 2)
    for c, reach in ((50.0, 1), (2.0, 5)):       # the largest |x|: 2**(xf + reach)
        c_sh = int(np.log2(smax / 64 * 40000 / 2.0 ** (xf + reach)))
        sp = nm.ScaleParams(40000, c_sh, cap=nm.softcap_cap(cfg, c))
        items = gen(cfg, 60, 7, sp)
        x = nm.scale(cfg, np.concatenate([it[0] for it in items]), nm.ScaleParams(40000, c_sh))
        past = (np.abs(x) >= 1 << (xf + SOFTCAP_X_INT)).any()
        assert (x < 0).any() and past == (c == 2.0)
        assert rtl_softmax(cfg, items, sp) == ref_softmax(cfg, items, sp)
    sp = nm.ScaleParams(40000, 17)
    items = gen(cfg, 30, 8)
    assert rtl_softmax(cfg, items, sp) == ref_softmax(cfg, items, sp)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_unsupported_lane_count_is_refused():
    with pytest.raises(C.ConfigError, match=r"exp_lanes=3.*mac_lines \(4\)"):
        SoftmaxUnit(C.replace(C.tiny(), exp_lanes=3))
