"""Attention sinks (issue #45): the float64 reference against the score matrix with the sink as
one more column written out here, the integer model's two forms bit-identical with a sink, the
sink's start of the softmax being what a key of that logit leaves behind, the side words'
bits, the golden check within the accuracy contract, and bad sinks refused by name."""

import math

import numpy as np
import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.contract.formats import SINK_M_BITS, sink_word_bytes
from attenio.contract.isa import Instr, Op
from attenio.contract.program import validate
from attenio.model import numerics as nm
from attenio.model import reference as ref
from attenio.model.golden import golden_check, golden_output, quantized_inputs
from attenio.sim.plan import build_plan, default_scale

from .score_matrix import visible_matrix

HW = C.preset("fpga+sinks")


def _extra_column(wl, q, k, v, sinks):
    """softmax over [the masked scores, the sink] with the sink's column dropped before P·V,
    one head at a time from the full score matrix (a formulation apart from the streamed
    online softmax of model/reference.py); its log-sum-exp beside."""
    out = np.zeros(q.shape[:3] + (v.shape[3],))
    lse = np.full(q.shape[:3], -np.inf)
    g = wl.heads // wl.kv_heads
    seen, _ = visible_matrix(wl)
    for b in range(wl.batch):
        for h in range(wl.heads):
            s = q[b, h] @ k[b, h // g].T / math.sqrt(wl.head_dim)
            s = np.concatenate([np.where(seen, s, -np.inf),
                                np.full((wl.seq_q, 1), sinks[h])], axis=1)
            e = np.exp(s - s.max(axis=1, keepdims=True))
            p = e / e.sum(axis=1, keepdims=True)
            out[b, h] = p[:, :-1] @ v[b, h // g]
            lse[b, h] = s.max(axis=1) + np.log(e.sum(axis=1))
    return out, lse


@pytest.mark.parametrize("causal, window", [(False, (-1, -1)), (True, (-1, -1)),
                                            (False, (5, 2)), (True, (3, 0))])
def test_reference_is_the_score_matrix_with_a_sink_column(causal, window):
    wl = C.Workload(seq_q=23, seq_k=41, head_dim=12, heads=4, kv_heads=2, causal=causal,
                    window_left=window[0], window_right=window[1])
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal(s) * 2 for s in ((1, 4, 23, 12), (1, 2, 41, 12),
                                                    (1, 2, 41, 12)))
    sinks = np.array([0.0, 2.5, -3.0, 6.0])
    want, want_lse = _extra_column(wl, q, k, v, sinks)
    got = ref.attention_of(wl, q, k, v, sinks=sinks, block=8)
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(ref.lse_of(wl, q, k, sinks=sinks), want_lse, atol=1e-12)
    # and it is not plain attention: every row's weights shrink by the sink's share
    assert np.abs(ref.attention_of(wl, q, k, v) - got).max() > 1e-2


def test_sink_start_is_what_a_key_of_that_logit_leaves():
    f = HW.numerics.logit_frac_bits
    sinks = np.array([-20.0, -1.3, 0.0, 0.4, 7.77, 300.0])
    m0, l0 = nm.sink_state(HW, sinks)
    t = np.floor(sinks * math.log2(math.e) * 2 ** f + 0.5).astype(np.int64)
    m, shift = nm.running_max(HW, np.full(len(t), nm.m_init(HW)), t[:, None])
    np.testing.assert_array_equal(m0, m)
    np.testing.assert_array_equal(l0, nm.exp2(HW, t - (m << f)))
    e = HW.numerics.exp_frac_bits
    assert ((l0 >= 1 << e) & (l0 < 2 << e)).all()
    # in nats: ln 2 · (m0 + log2 ℓ0 − E) is the sink to within the exp table's error (7e-5)
    np.testing.assert_allclose(nm.logsumexp(HW, m0, l0), sinks, atol=1e-4)


@pytest.mark.parametrize("name", ["tiny+sinks", "fpga+sinks", "asplos26+sinks"])
def test_side_words_hold_multiplier_and_sink(name):
    hw = C.preset(name)
    raw = sink_word_bytes(hw, np.array([40000, 3]), np.array([13, 62]), np.array([-512, 511]),
                          np.array([1 << hw.numerics.exp_frac_bits, (2 << 16) - 1]), (2,))
    assert raw.shape == (2, hw.q_side_words(True, True) * hw.macs_per_line * hw.element_bytes)
    x = [int.from_bytes(r.tobytes(), "little") for r in raw]
    cm, sb = hw.numerics.scale_mult_bits, hw.scale_word_bits
    for word, (c_m, c_sh, m0, l0) in zip(x, [(40000, 13, -512, 1 << 16),
                                            (3, 62, 511, (2 << 16) - 1)], strict=True):
        assert word & ((1 << cm) - 1) == c_m and (word >> cm) & 63 == c_sh
        got_m = (word >> sb) & ((1 << SINK_M_BITS) - 1)
        assert got_m - ((got_m >> (SINK_M_BITS - 1)) << SINK_M_BITS) == m0
        assert word >> (sb + SINK_M_BITS) == l0
    assert hw.q_side_words(True, True) == (2 if name.startswith("tiny") else 1)


@pytest.mark.parametrize("wl", [
    C.Workload(seq_q=37, seq_k=61, head_dim=16, heads=4, kv_heads=2, causal=True),
    C.Workload(seq_q=30, seq_k=30, head_dim=16, heads=4, kv_heads=1, window_left=3,
               window_right=0, causal=True, lse=True),
    C.VarlenWorkload(seqlens_q=[1, 1, 1], seqlens_k=[40, 9, 0], head_dim=16, heads=4,
                     kv_heads=1, page_size=8, lse=True),
])
def test_both_integer_forms_agree_with_sinks(wl):
    inp = quantized_inputs(HW, wl, seed=4, sigma=3.0, sinks=[-2.0, 0.5, 4.0, 9.0])
    a, b = {}, {}
    out = golden_output(HW, wl, inp, ml=a)
    np.testing.assert_array_equal(out, golden_output(HW, wl, inp, stepwise=True, ml=b))
    np.testing.assert_array_equal(a["m"], b["m"])
    np.testing.assert_array_equal(a["l"], b["l"])
    # the run plan's per-row multipliers and sinks give the same integers
    np.testing.assert_array_equal(out, golden_output(
        HW, wl, inp, scale=build_plan(HW, wl, scale=nm_scale(wl, inp)).scale))


def nm_scale(wl, inp):
    from attenio.model.golden import multipliers
    return multipliers(HW, wl, inp)


@pytest.mark.parametrize("name, sinks, sigma", [
    ("tiny+sinks", [1.0, -0.5], 1.0), ("fpga+sinks", [8.0, -4.0], 4.0),
    ("asplos26+sinks", [0.25, 3.0], 2.0), ("fpga+sinks+softcap", [2.0, 2.0], 6.0)])
def test_golden_within_the_contract(name, sinks, sigma):
    wl = C.Workload(seq_q=256, seq_k=256, head_dim=64, heads=2, kv_heads=1, causal=True,
                    lse=True)
    m = golden_check(C.preset(name), wl, sigma=sigma, sinks=sinks,
                     softcap=30.0 if "softcap" in name else None)
    assert m["ok"], m


def test_sink_that_dominates_drives_the_output_to_zero():
    wl = C.Workload(seq_q=64, seq_k=64, head_dim=32, causal=True)
    inp = quantized_inputs(HW, wl, seed=1, sinks=[40.0])
    out = nm.dequantize_output(HW, golden_output(HW, wl, inp), inp.sv)
    assert np.abs(out).max() < 1e-12 * np.abs(inp.v * inp.sv).max() + 1e-9


def test_bad_sinks_are_refused_by_name():
    wl = C.Workload(seq_q=8, seq_k=8, head_dim=16, heads=4, kv_heads=2)
    for bad, why in (([1.0, 2.0], "one for all heads"), ([math.inf], "finite"),
                     ([math.nan] * 4, "finite"), ([400.0], "|sink| <"), ("x", "a number")):
        with pytest.raises(ConfigError, match="sinks") as e:
            quantized_inputs(HW, wl, sinks=bad)
        assert why in str(e.value)
    with pytest.raises(ConfigError, match="NAME\\+sinks"):
        quantized_inputs(C.fpga(), wl, sinks=[1.0])
    with pytest.raises(ConfigError, match="sinks"):
        default_scale(C.fpga(), wl, sinks=0.5)


def test_schedule_counts_the_side_words_and_validate_pairs_the_flags():
    wl = C.Workload(seq_q=20, seq_k=33, head_dim=8, heads=2, kv_heads=1, causal=True)
    hw = C.preset("tiny+sinks")
    plain = build_plan(hw, wl).schedule
    sunk = build_plan(hw, wl, scale=default_scale(hw, wl, sinks=[1.0, 2.0])).schedule
    lq = next(i for i in sunk.program if i.op == Op.LOAD_Q)
    assert lq.args["sinks"] == 1 and lq.args["row_scales"] == 1
    assert lq.args["row_stride"] == (8 + 2 * hw.macs_per_line) * hw.element_bytes
    assert sunk.total_cycles >= plain.total_cycles
    prog = [Instr(i.op, {**i.args, "sinks": 0} if i.op == Op.COMPUTE else i.args,
                  i.pop_prev, i.pop_next, i.push_prev, i.push_next) for i in sunk.program]
    with pytest.raises(ConfigError, match="COMPUTE sinks=0 differs from its LOAD_Q"):
        validate(prog, hw)
