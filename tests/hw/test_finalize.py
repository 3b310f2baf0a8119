"""Finalize unit against model.numerics.finalize (ref/rtl pair)."""

import numpy as np

from attenio.base import config as C
from attenio.hw.finalize import Finalize
from attenio.model import numerics as nm

from .helpers import run_pipeline


def cases(cfg, count, seed):
    rng = np.random.default_rng(seed)
    q = cfg.macs_per_line
    out = []
    lim = 1 << (cfg.acc_bits - 1)
    while len(out) < count:
        l = int(rng.integers(1 << cfg.numerics.exp_frac_bits, 1 << (cfg.row_sum_bits - 1)))
        ratio = rng.uniform(-130, 130, q)  # a little past V's range: saturation too
        o = [int(np.floor(l * x)) for x in ratio]
        if max(abs(v) for v in o) < lim:  # registers the config can actually hold
            out.append((l, o))
    out.append((0, [5] * q))  # a row with no visible key
    out.append((1 << 16, [-(1 << 16) * 128] * q))
    return out


def ref_finalize(cfg, items):
    return [[int(v) for v in nm.finalize(cfg, np.array([o]), np.array([l]))[0]]
            for l, o in items]


def rtl_finalize(cfg, items):
    dut = Finalize(cfg)

    def put(ctx, item):
        l, o = item
        ctx.set(dut.i.payload, {"l": l, "o": o})

    return run_pipeline(dut, items, dut.i, dut.o, put, lambda p: [int(x) for x in p])


def test_finalize_matches_model():
    for cfg in (C.tiny(), C.fpga()):
        items = cases(cfg, 150, 4)
        assert rtl_finalize(cfg, items) == ref_finalize(cfg, items)


def test_finalize_words_apart():
    # words one at a time with idle cycles between: each lane's copy of the row's shift and
    # rounding position must come from its own word (hw/arith.kept_copies), not a neighbour's
    for cfg in (C.tiny(), C.fpga()):
        items = cases(cfg, 40, 5)
        gapped = [x for item in items for x in (item, None, None, None)]
        assert rtl_finalize(cfg, gapped) == ref_finalize(cfg, items)
