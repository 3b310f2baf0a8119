"""Separate head dims for Q·K and for V on the RTL (issue #45): DeepSeek's MLA prefill shape
(Q·K wider than V) and the other way round, scaled down to the tiny and fpga presets, bit-exact
with the integer model, cycle-exact with the schedule (a P V step issues V's words, a Q Kᵀ step
K's, each padded alone) and within the contract of float64 attention of the unquantized inputs
with V of its own width: causal GQA with statistics, a window that leaves rows keyless, a paged
GQA decode batch with an empty cache, K quantized per block (each K row with its factor's word,
so V's stride differs from K's by more than the head dims), Q per row, and AXI backpressure;
and V read from K's own rows (MLA's absorbed decode, ``LOAD_KV.v_in_k``): K's rows read once,
no V bytes."""

import dataclasses

import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.contract.isa import Op, d_v_of
from attenio.sim.plan import build_plan
from attenio.verify.runner import simulate

TINY = C.tiny()

CASES = [
    # MLA prefill's 192/128 in small: V narrower than Q and K
    (C.Workload(seq_q=20, seq_k=33, head_dim=16, head_dim_v=8, heads=2, kv_heads=1,
                causal=True, lse=True), {}),
    # V wider than Q and K, a window that leaves the first rows with no key
    (C.Workload(seq_q=24, seq_k=16, head_dim=8, head_dim_v=20, heads=1, window_left=2,
                window_right=0, causal=True), {"q_rows": True}),
    # a paged GQA decode batch (heads packed, several keys a step) with an empty cache
    (C.VarlenWorkload(seqlens_q=[1] * 4, seqlens_k=[9, 30, 0, 17], head_dim=24, head_dim_v=8,
                      heads=2, kv_heads=1, page_size=4, lse=True), {}),
    # K with a factor's word a row: V's stride is K's less that word and the head dims' words
    (C.Workload(seq_q=12, seq_k=40, head_dim=20, head_dim_v=12, heads=2, kv_heads=2),
     {"k_block": 8}),
]


@pytest.mark.parametrize("wl, kw", CASES)
def test_v_of_its_own_head_dim_bit_exact_and_cycle_exact(wl, kw):
    r = simulate(TINY, wl, seed=4, log=lambda *a: None, **kw)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles
    assert r.out.shape[-1] == wl.d_v
    assert r.errors["max_rel"] <= 1e-3          # against float64 of V's own width
    prog = r.schedule.program
    assert {d_v_of(i) for i in prog if i.op in (Op.LOAD_KV, Op.COMPUTE)} == {wl.d_v}
    assert {i.d for i in prog if i.op == Op.LOAD_Q} == {wl.d_qk}


def test_head_dims_under_backpressure():
    wl = C.Workload(seq_q=16, seq_k=40, head_dim=12, head_dim_v=4, heads=2, kv_heads=1,
                    causal=True)
    r = simulate(TINY, wl, seed=3, p_stall=0.3, log=lambda *a: None)
    assert r.failures() == [], r.failures()


def test_fpga_preset_runs_mla_prefill_shape():
    """The fpga preset's whole accelerator (the default suite builds it): GQA 4/2, Q·K 96 and
    V 64 (MLA prefill's 192/128 halved), causal, two tiles of keys."""
    hw = C.fpga()
    wl = C.Workload(seq_q=40, seq_k=72, head_dim=96, head_dim_v=64, heads=4, kv_heads=2,
                    causal=True)
    r = simulate(hw, wl, seed=2, log=lambda *a: None)
    assert r.failures() == [], r.failures()
    assert r.cycles == r.predicted_cycles


# MLA's absorbed decode in small: V is the first d_v elements of each K row (LOAD_KV.v_in_k)
V_IN_K = [
    C.Workload(seq_q=4, seq_k=37, head_dim=24, head_dim_v=16, heads=4, kv_heads=1,
               v_in_k=True),
    # a paged MQA decode batch, d_v not a whole number of words (V's last word cut inside
    # the K row), an empty cache, statistics
    C.VarlenWorkload(seqlens_q=[1] * 4, seqlens_k=[9, 30, 0, 17], head_dim=20, head_dim_v=18,
                     heads=4, kv_heads=1, page_size=4, lse=True, v_in_k=True),
    # causal prefill, GQA
    C.Workload(seq_q=20, seq_k=33, head_dim=16, head_dim_v=12, heads=2, kv_heads=1,
               causal=True, v_in_k=True),
]


@pytest.mark.parametrize("wl", V_IN_K)
def test_v_read_from_k_rows_once(wl):
    r = simulate(TINY, wl, seed=6, log=lambda *a: None)
    assert r.failures() == [], r.failures()          # bytes read = the schedule's, too
    assert r.cycles == r.predicted_cycles
    assert r.errors["max_rel"] <= 1e-3
    # K's rows once, no V: the bytes read are those of the same run with V of its own less
    # every V row
    sch = build_plan(TINY, dataclasses.replace(wl, v_in_k=False)).schedule
    v_bytes = sum(i.keys for i in sch.program if i.op == Op.LOAD_KV) \
        * TINY.row_elements(wl.d_v) * TINY.element_bytes
    assert r.schedule.read_bytes == sch.read_bytes - v_bytes
    kv = [i for i in r.schedule.program if i.op == Op.LOAD_KV]
    assert kv and all(i.args["v_in_k"] == 1 for i in kv)


def test_v_in_k_under_backpressure():
    r = simulate(TINY, V_IN_K[0], seed=8, p_stall=0.3, log=lambda *a: None)
    assert r.failures() == [], r.failures()


def test_v_in_k_refusals_name_the_field():
    with pytest.raises(ConfigError, match=r"^head_dim_v=24 .*v_in_k"):
        C.Workload(seq_q=1, seq_k=8, head_dim=16, head_dim_v=24, v_in_k=True)
    wl = C.Workload(seq_q=4, seq_k=16, head_dim=16, head_dim_v=8, v_in_k=True)
    with pytest.raises(ConfigError, match=r"^v_in_k=True .*one scale"):
        simulate(TINY, wl, k_block=4, log=lambda *a: None)
