"""ALiBi (issue #45): the float64 reference against the full score matrix with the bias written
out here, the standard slopes against the paper's numbers, the slope's word, the integer
model's two forms bit-identical with ALiBi (and the run plan's per-row words), the golden check
within the accuracy contract with and without the other variants, the saturation at the
logit's floor, and bad slopes refused by name."""

import math

import numpy as np
import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.model import numerics as nm
from attenio.model import reference as ref
from attenio.model import variants as va
from attenio.model.golden import golden_check, golden_output, multipliers, quantized_inputs
from attenio.sim.plan import build_plan

from .score_matrix import visible_matrix

HW = C.preset("fpga+alibi")


def _biased_matrix(wl, q, k, v, slopes, sinks=None, softcap=None):
    """softmax of the full score matrix plus −slope·|i + diag − j| (a formulation apart from
    the streamed online softmax of model/reference.py), one head at a time; with ``sinks``
    one more column; its log-sum-exp beside."""
    out = np.zeros(q.shape[:3] + (v.shape[3],))
    lse = np.full(q.shape[:3], -np.inf)
    g = wl.heads // wl.kv_heads
    seen, dist = visible_matrix(wl)
    for b in range(wl.batch):
        for h in range(wl.heads):
            s = q[b, h] @ k[b, h // g].T / math.sqrt(wl.head_dim)
            if softcap:
                s = softcap * np.tanh(s / softcap)
            s = np.where(seen, s - slopes[h] * dist, -np.inf)
            extra = np.full((wl.seq_q, 1), -np.inf if sinks is None else sinks[h])
            s = np.concatenate([s, extra], axis=1)
            mx = s.max(axis=1, keepdims=True)
            some = np.isfinite(mx[:, 0])            # a row that sees no key gives 0, −inf
            e = np.exp(s - np.where(np.isfinite(mx), mx, 0))
            w = e / np.where(some, e.sum(axis=1), 1)[:, None]
            out[b, h] = np.where(some[:, None], w[:, :-1] @ v[b, h // g], 0)
            with np.errstate(divide="ignore"):
                lse[b, h] = np.where(some, mx[:, 0], -np.inf) + np.log(e.sum(axis=1))
    return out, lse


@pytest.mark.parametrize("causal, window, sq, sk", [
    (False, (-1, -1), 23, 41), (True, (-1, -1), 23, 41), (False, (5, 2), 30, 30),
    (True, (3, 0), 41, 23), (False, (-1, -1), 41, 23)])
def test_reference_is_the_score_matrix_with_the_bias(causal, window, sq, sk):
    wl = C.Workload(seq_q=sq, seq_k=sk, head_dim=12, heads=4, kv_heads=2, causal=causal,
                    window_left=window[0], window_right=window[1])
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal(s) * 2 for s in ((1, 4, sq, 12), (1, 2, sk, 12),
                                                    (1, 2, sk, 12)))
    slopes = np.array([0.5, 0.25, 0.0, 1.5])
    want, want_lse = _biased_matrix(wl, q, k, v, slopes)
    got = ref.attention_of(wl, q, k, v, alibi_slopes=slopes, block=8)
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(ref.lse_of(wl, q, k, alibi_slopes=slopes), want_lse, atol=1e-12)
    # and it is not plain attention
    assert np.abs(ref.attention_of(wl, q, k, v) - got).max() > 1e-2


def test_standard_slopes():
    # Press et al. (ALiBi, ICLR 2022), section 3: 8 heads give 1/2, 1/4, …, 1/256
    np.testing.assert_allclose(va.alibi_slopes_standard(8), 2.0 ** -np.arange(1, 9))
    # 16 heads: 1/√2, 1/2, …, 1/256
    np.testing.assert_allclose(va.alibi_slopes_standard(16), 2.0 ** (-0.5 * np.arange(1, 17)))
    # 12 heads (not a power of two): the 8 of 8 heads, then every other one of 16's
    s12 = va.alibi_slopes_standard(12)
    np.testing.assert_allclose(s12[:8], 2.0 ** -np.arange(1, 9))
    np.testing.assert_allclose(s12[8:], 2.0 ** (-0.5 * np.arange(1, 17))[0::2][:4])


@pytest.mark.parametrize("name", ["tiny+alibi", "fpga+alibi", "asplos26+alibi"])
def test_slope_word_is_the_slope_in_logit_lsbs(name):
    hw = C.preset(name)
    cm, f = hw.numerics.scale_mult_bits, hw.numerics.logit_frac_bits
    slopes = np.concatenate([va.alibi_slopes_standard(64), [0.0, 1.0, 2.5]])
    slopes = slopes[slopes * math.log2(math.e) * 2.0 ** f < (1 << cm) - 1]
    am, ash = va.alibi_word(hw, slopes)
    want = slopes * math.log2(math.e) * 2.0 ** f
    nz = slopes > 0
    assert ((am[nz] >= 1 << (cm - 1)) & (am[nz] < 1 << cm)).all()
    np.testing.assert_allclose(am[nz] / 2.0 ** ash[nz], want[nz], rtol=2.0 ** -cm)
    assert (am[~nz] == 0).all()
    # the bias of a distance is the rounded product, never above the exact one by ½ LSB
    rel = np.arange(0, 5000, 37)
    got = va.alibi_bias(am[:, None], ash[:, None], rel[None, :])
    exact = am[:, None] * rel[None, :] / 2.0 ** ash[:, None]
    assert np.abs(got - exact).max() <= 0.5


@pytest.mark.parametrize("wl", [
    C.Workload(seq_q=37, seq_k=61, head_dim=16, heads=4, kv_heads=2, causal=True),
    C.Workload(seq_q=30, seq_k=30, head_dim=16, heads=4, kv_heads=1, window_left=3,
               window_right=0, causal=True, lse=True),
    C.Workload(seq_q=40, seq_k=25, head_dim=16, heads=4, kv_heads=4, lse=True),
    C.VarlenWorkload(seqlens_q=[1, 1, 1], seqlens_k=[40, 9, 0], head_dim=16, heads=4,
                     kv_heads=1, page_size=8, lse=True),
])
def test_both_integer_forms_agree_with_alibi(wl):
    inp = quantized_inputs(HW, wl, seed=4, sigma=3.0, alibi_slopes=[0.5, 0.0, 0.125, 2.0])
    a, b = {}, {}
    out = golden_output(HW, wl, inp, ml=a)
    np.testing.assert_array_equal(out, golden_output(HW, wl, inp, stepwise=True, ml=b))
    np.testing.assert_array_equal(a["m"], b["m"])
    np.testing.assert_array_equal(a["l"], b["l"])
    # the run plan's per-row words give the same integers
    np.testing.assert_array_equal(out, golden_output(
        HW, wl, inp, scale=build_plan(HW, wl, scale=multipliers(HW, wl, inp)).scale))
    # and ALiBi changed them
    plain = quantized_inputs(HW, wl, seed=4, sigma=3.0)
    assert (golden_output(HW, wl, plain) != out).any()


@pytest.mark.parametrize("name, sigma, extra", [
    ("tiny+alibi", 1.0, {}), ("fpga+alibi", 4.0, {}), ("asplos26+alibi", 2.0, {}),
    ("fpga+alibi+softcap+sinks", 6.0, {"softcap": 30.0, "sinks": [2.0, -1.0]})])
def test_golden_within_the_contract(name, sigma, extra):
    hw = C.preset(name)
    wl = C.Workload(seq_q=256, seq_k=256, head_dim=64, heads=2, kv_heads=1, causal=True,
                    lse=True)
    for slopes in (va.alibi_slopes_standard(2), [0.01, 0.002]):
        m = golden_check(hw, wl, sigma=sigma, alibi_slopes=slopes, **extra)
        assert m["ok"], (slopes, m)


def test_golden_matches_the_matrix_with_every_variant():
    hw = C.preset("fpga+alibi+softcap+sinks")
    wl = C.Workload(seq_q=48, seq_k=64, head_dim=32, heads=2, kv_heads=1, causal=True)
    slopes, sinks, cap = np.array([0.3, 0.05]), np.array([1.0, -2.0]), 20.0
    inp = quantized_inputs(hw, wl, seed=3, sigma=3.0, alibi_slopes=slopes, sinks=sinks,
                           softcap=cap)
    got = nm.dequantize_output(hw, golden_output(hw, wl, inp), inp.sv)
    want, _ = _biased_matrix(wl, inp.q * inp.sq, inp.k * inp.sk, inp.v * inp.sv, slopes,
                             sinks=sinks, softcap=cap)
    v_range = np.ptp(inp.v * inp.sv)
    assert np.abs(got - want).max() <= 1e-3 * v_range


def test_far_keys_saturate_at_the_logit_floor():
    t = np.array([[0, 5, -7]], dtype=np.int64)
    am, ash = va.alibi_word(HW, [5.0])
    sp = nm.ScaleParams(c_m=1, c_sh=0, alibi_m=int(am[0]), alibi_sh=int(ash[0]))
    far = 1 << 30
    got = va.alibi_biased(HW, t, sp, np.array([0]), np.array([0, 1, far]), 0)
    assert got[0, 0] == 0 and got[0, 1] == 5 - va.alibi_bias(am[0], ash[0], 1)
    assert got[0, 2] == va.logit_floor(HW)


def test_bad_slopes_are_refused_by_name():
    wl = C.Workload(seq_q=8, seq_k=8, head_dim=16, heads=4, kv_heads=2)
    for bad, why in (([1.0, 2.0], "one for all heads"), ([math.inf], "finite"),
                     ([-0.5], "≥ 0"), ([1e6], "slopes <"), ("x", "a number")):
        with pytest.raises(ConfigError, match="alibi_slopes") as e:
            quantized_inputs(HW, wl, alibi_slopes=bad)
        assert why in str(e.value)
    with pytest.raises(ConfigError, match="NAME\\+alibi"):
        quantized_inputs(C.fpga(), wl, alibi_slopes=[0.5])


@pytest.mark.parametrize("name, words", [("tiny+alibi", 2), ("tiny+sinks+alibi", 3),
                                         ("fpga+alibi", 1), ("fpga+sinks+alibi", 2),
                                         ("asplos26+sinks+alibi", 1)])
def test_side_words_hold_multiplier_sink_slope_and_position(name, words):
    from attenio.base.config import SINK_M_BITS
    from attenio.contract.formats import side_word_bytes

    hw = C.preset(name)
    assert hw.q_side_words(True, True) == words
    cm, sb, e = hw.numerics.scale_mult_bits, hw.scale_word_bits, hw.exp_bits
    vals = [(40000 % (1 << cm), 13, -512, (1 << e) - 1, (1 << cm) - 1, 62, hw.max_seq_len - 1),
            (3, 62, 511, 1, 1 << (cm - 1), 0, 5)]
    cols = [np.array(c) for c in zip(*vals, strict=True)]
    raw = side_word_bytes(hw, cols[0], cols[1], (2,), sink_m=cols[2], sink_l=cols[3],
                          alibi_m=cols[4], alibi_sh=cols[5], alibi_pos=cols[6])
    assert raw.shape == (2, words * hw.macs_per_line * hw.element_bytes)
    for r, (c_m, c_sh, m0, l0, a_m, a_sh, pos) in zip(raw, vals, strict=True):
        x = int.from_bytes(r.tobytes(), "little")
        assert x & ((1 << cm) - 1) == c_m and (x >> cm) & 63 == c_sh
        at = sb
        if hw.sinks_unit:
            got_m = (x >> at) & ((1 << SINK_M_BITS) - 1)
            assert got_m - ((got_m >> (SINK_M_BITS - 1)) << SINK_M_BITS) == m0
            assert (x >> (at + SINK_M_BITS)) & ((1 << e) - 1) == l0
            at += SINK_M_BITS + e
        assert (x >> at) & ((1 << cm) - 1) == a_m and (x >> (at + cm)) & 63 == a_sh
        assert x >> (at + sb) == pos


def test_schedule_carries_the_slopes_and_validate_pairs_the_flags():
    from attenio.contract.isa import Instr, Op
    from attenio.contract.program import validate
    from attenio.sim.plan import default_scale

    wl = C.Workload(seq_q=20, seq_k=33, head_dim=8, heads=2, kv_heads=1, causal=True)
    hw = C.preset("tiny+alibi")
    plain = build_plan(hw, wl).schedule
    sch = build_plan(hw, wl, scale=default_scale(hw, wl, alibi_slopes=[0.5, 0.25])).schedule
    lq = next(i for i in sch.program if i.op == Op.LOAD_Q)
    assert lq.args["alibi"] == 1 and lq.args["row_scales"] == 1 and lq.args["sinks"] == 0
    assert lq.args["row_stride"] == (8 + 2 * hw.macs_per_line) * hw.element_bytes
    assert sch.alibi and not plain.alibi
    assert sch.traffic.reads["Q"] > plain.traffic.reads["Q"]
    prog = [Instr(i.op, {**i.args, "alibi": 0} if i.op == Op.COMPUTE else i.args,
                  i.pop_prev, i.pop_next, i.push_prev, i.push_next) for i in sch.program]
    with pytest.raises(ConfigError, match="COMPUTE alibi=0 differs from its LOAD_Q"):
        validate(prog, hw)
    # a non-causal run with a window's right edge is refused up front, not run without ALiBi
    two_sided = C.Workload(seq_q=20, seq_k=33, head_dim=8, heads=2, kv_heads=1,
                           window_left=4, window_right=4)
    with pytest.raises(ConfigError, match="window.*ALiBi"):
        build_plan(hw, two_sided, scale=default_scale(hw, two_sided, alibi_slopes=0.5))
