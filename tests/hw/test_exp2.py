"""Exp2 unit against model.numerics.exp2 (ref/rtl pair), every fraction and the edges."""

import numpy as np

from attenio.base import config as C
from attenio.hw.exp2 import Exp2
from attenio.model import numerics as nm

from .helpers import run_pipeline


def ref_exp2(cfg, ys):
    return [int(x) for x in nm.exp2(cfg, np.array(ys, dtype=np.int64))]


def rtl_exp2(cfg, ys):
    dut = Exp2(cfg)
    rng = np.random.default_rng(0)
    inputs = []
    for y in ys:  # random idle cycles between inputs
        if rng.random() < 0.2:
            inputs.append(None)
        inputs.append(y)
    return run_pipeline(dut, inputs, dut.i, dut.o,
                        lambda ctx, y: ctx.set(dut.i.payload, y), int)


def test_exp2_matches_model():
    cfg = C.tiny()
    f = cfg.numerics.logit_frac_bits
    rng = np.random.default_rng(1)
    ys = [(1 << f) - 1, 0, -1, -(1 << f), -(19 << f), -(18 << f) + 5, -(1 << 30)]
    ys += [int(v) for v in rng.integers(-(20 << f), 1 << f, 600)]
    ys += list(range(0, 1 << f, 97))  # fractions across every segment
    assert rtl_exp2(cfg, ys) == ref_exp2(cfg, ys)
