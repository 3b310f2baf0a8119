"""The attention variant's one home (contract/variant.py): what a layer's attention changes,
read by the workload's check, the reference, the closed form, the plan and the API; separate
Q·K and V head dims carried through every layer and refused, by name, where they are not built
yet."""

from __future__ import annotations

import math

import numpy as np
import pytest

import attenio
from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.contract.variant import STAGES, Variant, variant_of
from attenio.model import io_analysis as io
from attenio.model import reference as ref
from attenio.sim.plan import build_plan

RNG = np.random.default_rng(3)


def test_the_default_variant_is_the_papers():
    v = variant_of(C.Workload.square(64, 128))
    assert v.textbook and v.head_dim_qk == v.head_dim_v == 128
    assert v.scale == 1 / math.sqrt(128) and v.unbuilt() == []
    # Gemma 2 27B scales by 1/√144 with d = 128: the variant carries it
    g = variant_of(C.Workload.square(64, 128), softmax_scale=144 ** -0.5)
    assert g.scale == 144 ** -0.5 and not g.textbook
    assert set(STAGES) >= {"score", "softmax", "pv", "finalize", "traffic", "program"}


@pytest.mark.parametrize("field,value", [("softmax_scale", 0.0), ("softmax_scale", math.inf),
                                         ("head_dim_v", 0), ("score_transform", "softcap")])
def test_bad_variants_name_the_field(field, value):
    kw = {"head_dim_qk": 64, "head_dim_v": 64, field: value}
    with pytest.raises(ConfigError, match=rf"^{field}="):
        Variant(**kw)


def test_separate_head_dims_through_the_workload():
    wl = C.Workload(seq_q=9, seq_k=20, head_dim=192, head_dim_v=128)     # MLA prefill dims
    assert (wl.d_qk, wl.d_v) == (192, 128)
    assert C.Workload.from_dict(wl.to_dict()) == wl and wl.sequence().d_v == 128
    vl = C.VarlenWorkload(seqlens_q=[3, 4], seqlens_k=[5, 6], head_dim=16, head_dim_v=8)
    assert vl.sequence(1).d_v == 8 and C.VarlenWorkload.from_dict(vl.to_dict()) == vl
    assert variant_of(wl).unbuilt() == []          # LOAD_KV.dv, COMPUTE.dv: built
    with pytest.raises(ConfigError, match=r"^head_dim_v=0"):
        C.Workload(seq_q=1, seq_k=1, head_dim=8, head_dim_v=0)


def test_unequal_head_dims_run_and_past_the_limit_are_refused():
    wl = C.Workload(seq_q=8, seq_k=8, head_dim=16, head_dim_v=8)
    for hw in (C.tiny(), C.fpga(), C.asplos26()):
        hw.check_workload(wl)
    prog = build_plan(C.tiny(), wl).schedule.program
    assert {i.args.get("dv") for i in prog if i.op.name in ("LOAD_KV", "COMPUTE")} == {8}
    assert {i.d for i in prog if i.op.name in ("FINALIZE", "STORE_O")} == {8}
    with pytest.raises(ConfigError, match=r"^head_dim_v=65 .*max_head_dim"):
        C.tiny().check_workload(C.Workload(seq_q=8, seq_k=8, head_dim=16, head_dim_v=65))
    # the API: V narrower than Q and K, against the float64 reference we did not quantize
    q, k = RNG.standard_normal((2, 8, 16)), RNG.standard_normal((2, 8, 16))
    v = RNG.standard_normal((2, 8, 8))
    got = attenio.attention(q, k, v, preset="tiny", layout="bhsd")
    want = attenio.reference_attention(q, k, v, layout="bhsd")
    assert got.shape == (2, 8, 8)
    assert np.abs(got - want).max() < 0.02 * np.ptp(v)


def test_reference_takes_separate_head_dims():
    # softmax(Q Kᵀ/√d_qk) V with V narrower than Q and K, written out here
    q, k = RNG.standard_normal((3, 6, 24)), RNG.standard_normal((1, 10, 24))
    v = RNG.standard_normal((1, 10, 8))
    got = attenio.reference_attention(q, k, v, causal=True, layout="bhsd")
    assert got.shape == (3, 6, 8)
    for h in range(3):
        s = q[h] @ k[0].T / math.sqrt(24)
        s = np.where(np.arange(10)[None, :] <= np.arange(6)[:, None] + 4, s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        assert np.allclose(got[h], p @ v[0] / p.sum(axis=1, keepdims=True))
    wl = C.VarlenWorkload(seqlens_q=[2, 4], seqlens_k=[3, 7], head_dim=24, head_dim_v=8)
    out = ref.attention_of(wl, q[None, :, :6], k[None], v[None])
    assert out.shape == (1, 3, 6, 8)


def test_closed_form_counts_v_and_o_at_their_own_head_dim():
    hw = C.asplos26()
    same = io.workload_traffic(hw, C.Workload.square(4096, 128))
    mla = io.workload_traffic(hw, C.Workload(seq_q=4096, seq_k=4096, head_dim=128,
                                             head_dim_v=64))
    eb = hw.element_bytes
    # Q and K as before; each V read and the O write at half the width
    v_reads = (same.read_bytes - 4096 * 128 * eb) // 2       # K's and V's equal shares
    assert same.read_bytes - mla.read_bytes == v_reads // 2
    assert same.write_bytes - mla.write_bytes == 4096 * 64 * hw.out_element_bytes
