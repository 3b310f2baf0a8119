"""ComputeCore against the integer model, whole tiles, streams with random gaps."""

import numpy as np
import pytest

from attenio import config as C
from attenio.model import numerics as nm

from .core_tb import ref_core, rtl_core

TINY = C.tiny()


def data(nq, nk, d, seed, dist="gaussian"):
    rng = np.random.default_rng(seed)
    draw = {"gaussian": rng.standard_normal, "pm1": lambda s: rng.choice([-1.0, 1.0], s)}[dist]
    (qi, sq), (ki, sk), (vi, _) = (nm.quantize(draw(s), 8)
                                   for s in ((nq, d), (nk, d), (nk, d)))
    return qi, ki, vi, nm.softmax_scale(TINY, sq, sk, d)


@pytest.mark.parametrize("nq,nk,d,causal,seed", [
    (1, 1, 1, False, 0),
    (5, 9, 3, False, 1),
    (16, 16, 8, True, 2),
    (20, 33, 16, False, 3),
    (70, 12, 5, False, 4),     # two tiles, the second of 6 rows
    (40, 24, 7, True, 5),      # seq_q > seq_k: rows that see no key
])
def test_core_bit_exact(nq, nk, d, causal, seed):
    q, k, v, sp = data(nq, nk, d, seed)
    np.testing.assert_array_equal(rtl_core(TINY, q, k, v, sp, causal, seed=seed),
                                  ref_core(TINY, q, k, v, sp, causal))


def test_core_full_scale_inputs():
    q, k, v, sp = data(12, 20, 9, 7, "pm1")
    np.testing.assert_array_equal(rtl_core(TINY, q, k, v, sp, seed=7, p_idle=0.5,
                                           p_backpressure=0.5),
                                  ref_core(TINY, q, k, v, sp))


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("field,value,match", [
    ("mac_lines", 3, r"mac_lines=3 .*power of two"),
    ("softmax_block", 2, r"softmax_block=2"),
    ("exp_lanes", 2, r"exp_lanes=2"),
])
def test_unsupported_parameters_are_refused(field, value, match):
    from attenio.hw.core import ComputeCore

    cfg = C.replace(TINY, **{field: value})
    if field == "mac_lines":
        cfg = C.replace(cfg, exp_lanes=3)
    with pytest.raises(C.ConfigError, match=match):
        ComputeCore(cfg)


def test_core_converts_to_verilog():
    from attenio.hw.build import to_verilog
    from attenio.hw.core import ComputeCore

    text = to_verilog(ComputeCore(TINY), "attenio_core")
    assert "module attenio_core" in text and "kv__payload" in text
