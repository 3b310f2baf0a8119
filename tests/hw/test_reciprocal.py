"""Reciprocal unit against model.numerics.reciprocal (ref/rtl pair)."""

import numpy as np

from attenio.base import config as C
from attenio.hw.reciprocal import Reciprocal
from attenio.model import numerics as nm

from .helpers import run_pipeline


def ref_reciprocal(cfg, ls):
    r, e = nm.reciprocal(cfg, np.array(ls, dtype=np.int64))
    return [(int(a), int(b) if x else 0) for a, b, x in zip(r, e, ls, strict=True)]


def rtl_reciprocal(cfg, ls):
    dut = Reciprocal(cfg)
    return run_pipeline(dut, ls, dut.i, dut.o, lambda ctx, v: ctx.set(dut.i.payload, v),
                        lambda p: (int(p.r), int(p.e)))


def test_reciprocal_matches_model():
    cfg = C.tiny()
    rng = np.random.default_rng(3)
    top = (1 << cfg.row_sum_bits) - 1
    ls = [0, 1, 2, 3, 1 << 16, (1 << 17) - 1, top, top - 1]
    ls += [int(x) for x in rng.integers(1, top, 300)]
    ls += [int(x) for x in rng.integers(1 << 16, 1 << 22, 100)]
    assert rtl_reciprocal(cfg, ls) == ref_reciprocal(cfg, ls)
