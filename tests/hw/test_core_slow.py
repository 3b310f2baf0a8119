"""Longer ComputeCore runs (make test-slow): a random sweep of shapes, and the PE-busy figure."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.model import numerics as nm

from .core_tb import ref_core, rtl_core

TINY = C.tiny()


def _data(nq, nk, d, seed):
    rng = np.random.default_rng(seed)
    (qi, sq), (ki, sk), (vi, _) = (nm.quantize(rng.standard_normal(s), 8)
                                   for s in ((nq, d), (nk, d), (nk, d)))
    return qi, ki, vi, nm.softmax_scale(TINY, sq, sk, d)


SWEEP = [(int(n), int(d), bool(c)) for n, d, c in zip(
    np.random.default_rng(2026).integers(1, 257, 6), np.random.default_rng(7).integers(1, 65, 6),
    [False, True, False, True, False, False], strict=True)] + [(256, 64, False), (1, 64, True)]


@pytest.mark.slow
@pytest.mark.parametrize("n,d,causal", SWEEP)
def test_core_random_sweep(n, d, causal):
    q, k, v, sp = _data(n, n, d, n * 100 + d)
    np.testing.assert_array_equal(rtl_core(TINY, q, k, v, sp, causal, seed=n),
                                  ref_core(TINY, q, k, v, sp, causal))


@pytest.mark.slow
def test_pe_busy_from_first_kv_to_last_output():
    """Target: PE array busy ≥ 95% from the first K row in to the last O row out (tiny preset,
    N = 128, d = 32, streams never stall). Prints the measured figure."""
    q, k, v, sp = _data(128, 128, 32, 11)
    st = {}
    out = rtl_core(TINY, q, k, v, sp, seed=1, p_idle=0.0, p_backpressure=0.0, stats=st)
    np.testing.assert_array_equal(out, ref_core(TINY, q, k, v, sp))
    busy = st["pe_busy"] / st["cycles"]
    print(f"\nPE busy {st['pe_busy']} of {st['cycles']} cycles = {busy:.2%}; counters {st}")
    assert busy >= 0.95
