"""K/V caches with a scale per key (issue #46, 8-bit K/V): a paged cache keeps each key's K
factor in its page (a 16-bit slot), packed a factor group to a word before the group's rows (a paged
``LOAD_KV.key_scales``; docs/isa.md). On the RTL: bit-exact with the integer model, cycle-exact
with the schedule, its bytes read the closed form's (each factor word counted once), with
pages of one group and of several, blocks of one key and of several inside a group, and under
AXI backpressure."""

import dataclasses

import numpy as np
import pytest

from attenio.base import config as C
from attenio.contract.program import Op
from attenio.model.golden import golden_output, quantized_inputs
from attenio.verify.runner import simulate
from tests.cocotb.variant_models import EVERY_UNIT

# a 128-bit word (16 int8 elements): eight factors a word; a page of 16 keys has two groups
# and a step of two keys (GQA 2: two rows a step on four lines) reads a factor word every
# fourth block. Built with the V factors' unit too, so the K and the V factor tests share one
# model (a build is most of a test's time); the unit is off where V has one scale.
WIDE = C.replace(C.tiny(), macs_per_line=16, axi_data_bits=128, dram_bytes_per_cycle=16,
                 value_scales_unit=True)


def decode(lens, heads=4, kv_heads=2, d=16, page=8, **kw):
    return C.VarlenWorkload(seqlens_q=[1] * len(lens), seqlens_k=lens, head_dim=d,
                            heads=heads, kv_heads=kv_heads, page_size=page, **kw)


CASES = [
    # two groups a page, two keys a step; lengths that end mid-group and mid-page
    (WIDE, decode([29, 8, 14, 3, 40], page=16), 2),
    # pages of 2 keys (a group is the page), one query head a K/V head: two keys a step
    (WIDE, decode([9, 4, 6], heads=2, kv_heads=2, d=32, page=2), 2),
    # the fpga preset: four factors a 64-bit word, two groups a page of 8, one key a step,
    # d = 64, GQA 4
    (C.fpga(), decode([29, 8, 45], heads=8, kv_heads=2, d=64), 1),
    # tiny: two factors a 32-bit word, two keys a step (every block starts a group)
    (C.tiny(), decode([11, 6], page=4), 2),
]


@pytest.mark.parametrize("hw, wl, kps", CASES)
def test_packed_key_factors_bit_exact_cycle_exact_and_counted(hw, wl, kps):
    r = simulate(hw, wl, seed=4, log=lambda *a: None, q_rows=True, k_block=1)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles
    kvs = [i for i in r.schedule.program if i.op == Op.LOAD_KV]
    assert kvs and all(i.key_scales and i.paged and i.keys_per_step == kps for i in kvs)
    # bytes read: the counters', the timeline's and the closed form's agree, and the factor
    # words are one per group of keys a walk reads (each walk starts on a page)
    t = r.schedule.traffic
    assert r.counters["bytes_rd"] == r.schedule.read_bytes == t.read_bytes
    grp = hw.factor_group(wl.page_size)
    words = wl.kv_heads * sum(-(-n // grp) for n in wl.seqlens_k)
    assert t.reads["KF"] == words * hw.macs_per_line


def test_packed_key_factors_under_backpressure():
    wl = decode([21, 13], heads=4, kv_heads=1)
    r = simulate(WIDE, wl, seed=6, p_stall=0.3, log=lambda *a: None, q_rows=True, k_block=2)
    assert r.failures() == [], r.failures()
    assert r.counters["bytes_rd"] == r.schedule.traffic.read_bytes


# V with a scale per key too (LOAD_KV.value_scales): its factors packed in the V pages as K's
# are in the K pages, each key's p times its factor before P V
VWIDE = WIDE
V_CASES = [
    (VWIDE, decode([29, 8, 14, 3, 40], page=16), 2, True),
    # (a model of its own: make test-slow)
    pytest.param(C.preset("fpga+vscales"), decode([29, 8, 45], heads=8, kv_heads=2, d=64), 1,
                 True, marks=pytest.mark.slow),
    # V factors alone (K one scale), tiny (the variant tests' every-unit model, which has the
    # V factors' unit): every block starts a group
    (EVERY_UNIT, decode([11, 6], page=4), 2, False),
]


@pytest.mark.parametrize("hw, wl, kps, k_keys", V_CASES)
def test_packed_value_factors_bit_exact_cycle_exact_and_counted(hw, wl, kps, k_keys):
    inp = quantized_inputs(hw, wl, "gaussian", 5, q_rows=True, k_block=1 if k_keys else None,
                           v_keys=True)
    r = simulate(hw, wl, inputs=inp, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles
    kvs = [i for i in r.schedule.program if i.op == Op.LOAD_KV]
    assert kvs and all(i.value_scales and i.key_scales == int(k_keys)
                       and i.keys_per_step == kps for i in kvs)
    t = r.schedule.traffic
    assert r.counters["bytes_rd"] == r.schedule.read_bytes == t.read_bytes
    grp = hw.factor_group(wl.page_size)
    words = wl.kv_heads * sum(-(-n // grp) for n in wl.seqlens_k)
    assert t.reads["VF"] == words * hw.macs_per_line
    # the factors matter: the same integers with V's one scale give another output
    plain = golden_output(hw, wl, dataclasses.replace(inp, v_keys=False,
                                                      sv=float(np.max(inp.sv))))
    assert not np.array_equal(plain, r.golden)


def test_packed_value_factors_under_backpressure():
    wl = decode([21, 13], heads=4, kv_heads=1)
    inp = quantized_inputs(VWIDE, wl, "gaussian", 6, q_rows=True, k_block=2, v_keys=True)
    r = simulate(VWIDE, wl, inputs=inp, p_stall=0.3, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.counters["bytes_rd"] == r.schedule.traffic.read_bytes
