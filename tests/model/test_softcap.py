"""Logit soft-capping (issue #45): the integer unit against c·tanh(x/c) computed in float64, its
bound (docs/numerics.md, "Soft-capping"), the float reference against a score matrix written
out here, and the golden check within the accuracy contract."""

import math

import numpy as np
import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.contract.formats import SOFTCAP_X_EXTRA, SOFTCAP_X_INT, SOFTCAP_Y_BITS
from attenio.contract.tables import tanh_table
from attenio.model import numerics as nm
from attenio.model import reference as ref
from attenio.model.golden import MAX_REL_BOUND, MEAN_REL_BOUND, golden_check

HW = C.replace(C.fpga(), softcap_unit=True)
F = HW.numerics.logit_frac_bits
XF = F + SOFTCAP_X_EXTRA


def _bound(cap: int) -> float:
    """docs/numerics.md's bound in logit LSBs: the table's interpolation error (measured
    against tanh at 64 points a segment: the table's own claim) and its rounding, times T,
    plus the interpolation's and the product's roundings."""
    knots = tanh_table().astype(np.float64) / 2.0 ** SOFTCAP_Y_BITS
    x = np.linspace(0, 2.0 ** SOFTCAP_X_INT, 64 * (len(knots) - 1) + 1)
    pwl = np.interp(x, np.linspace(0, 2.0 ** SOFTCAP_X_INT, len(knots)), knots)
    table = float(np.max(np.abs(pwl - np.tanh(x))))
    return cap * (table + 2.0 ** -SOFTCAP_Y_BITS) + 0.5 + 1e-9


@pytest.mark.parametrize("c", [50.0, 30.0, 5.0, 1.0])
def test_unit_is_c_tanh_within_its_bound(c):
    cap = nm.softcap_cap(HW, c)
    x = np.concatenate([np.arange(-3000, 3000),
                        np.linspace(-2 ** (XF + 4), 2 ** (XF + 4), 20001).astype(np.int64)])
    got = nm.softcap(HW, x, cap)
    want = cap * np.tanh(x / 2.0 ** XF)                 # T·tanh(logit/c), in logit LSBs
    err = np.abs(got - want)
    assert err.max() <= _bound(cap)
    # in the logit's own units: c·tanh(s/c) within the bound's nats
    s = x / 2.0 ** XF * c                              # the logit x stands for
    got_nat = got / 2.0 ** F / math.log2(math.e)
    assert np.abs(got_nat - c * np.tanh(s / c)).max() <= _bound(cap) / 2 ** F + 1e-6 * c


def test_unit_is_odd_monotone_and_saturates_at_the_cap():
    cap = nm.softcap_cap(HW, 50.0)
    x = np.arange(0, 2 ** (XF + SOFTCAP_X_INT) + 5000, 997, dtype=np.int64)
    t = nm.softcap(HW, x, cap)
    np.testing.assert_array_equal(nm.softcap(HW, -x, cap), -t)
    assert (np.diff(t) >= 0).all() and t.max() <= cap and t[0] == 0
    far = nm.softcap(HW, np.array([2 ** (XF + 3), 2 ** 40, -2 ** 40]), cap)
    assert far[1] == far[0] and far[2] == -far[0] and cap - far[0] <= cap * 2e-5 + 1


def test_cap_is_checked_by_name():
    for bad in (0.0, -3.0, math.inf, math.nan, True):
        with pytest.raises(ConfigError, match=r"^softcap="):
            nm.softcap_cap(HW, bad)
    with pytest.raises(ConfigError, match=r"no soft-capping unit.*fpga\+softcap"):
        nm.softcap_cap(C.fpga(), 50.0)
    with pytest.raises(ConfigError, match=r"^softcap=1000000000.0 is invalid: the cap must "
                                          r"lie in \(0, "):
        nm.softcap_cap(HW, 1e9)


def test_reference_caps_the_scores_before_the_mask():
    """reference.attention_head with softcap against the whole score matrix written out here:
    scale, cap, causal mask at the bottom right, softmax, P·V."""
    rng = np.random.default_rng(3)
    nq, nk, d = 37, 70, 16
    q, k, v = (rng.standard_normal((n, d)) * 3 for n in (nq, nk, nk))
    c = 4.0
    s = q @ k.T / math.sqrt(d)
    s = c * np.tanh(s / c)
    s[np.arange(nk)[None, :] > np.arange(nq)[:, None] + nk - nq] = -np.inf
    p = np.exp(s - s.max(axis=1, keepdims=True))
    want = (p / p.sum(axis=1, keepdims=True)) @ v
    got = ref.attention_head(q, k, v, causal=True, softcap=c, block=16, chunk=8)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    plain = ref.attention_head(q, k, v, causal=True)
    assert np.abs(plain - want).max() > 0.1              # the cap changes these rows


@pytest.mark.parametrize("preset,sigma,c", [("fpga", 4.0, 50.0), ("fpga", 20.0, 5.0),
                                            ("asplos26", 20.0, 50.0), ("tiny", 4.0, 2.0)])
def test_golden_is_within_the_contract_with_a_cap(preset, sigma, c):
    hw = C.preset(preset + "+softcap")
    wl = C.Workload(seq_q=96, seq_k=160, head_dim=min(64, hw.max_head_dim), heads=2,
                    kv_heads=1, causal=True)
    m = golden_check(hw, wl, seed=1, sigma=sigma, softcap=c)
    assert m["ok"] and m["max_rel"] <= MAX_REL_BOUND and m["mean_rel"] <= MEAN_REL_BOUND
    assert m["scale"].cap == nm.softcap_cap(hw, c)


def test_preset_units():
    assert C.preset("fpga+softcap") == C.replace(C.fpga(), softcap_unit=True)
    assert not C.fpga().softcap_unit
    with pytest.raises(ConfigError, match=r"^preset='fpga\+rope' .*softcap"):
        C.preset("fpga+rope")
