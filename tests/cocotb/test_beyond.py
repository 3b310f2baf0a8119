"""Beyond the paper, end to end on the RTL (issue #8): causal block skipping, grouped-query
attention and several keys per step, each bit-exact, with backpressure, and measured by the
hardware's own counters."""

import pytest

from attenio.base import config as C
from attenio.base.errors import ErrorCode
from attenio.verify.runner import simulate

from .test_top import TINY, check_run, workload


def _run(hw, wl, **kw):
    r = simulate(hw, wl, seed=4, log=lambda *a: None, **kw)
    assert r.done and r.error == ErrorCode.NONE and r.bit_exact, (r.error, r.mismatches)
    return r


def test_causal_skips_masked_blocks():
    """Causal: fewer K/V bytes and cycles than the full run, as the model predicts."""
    full, causal = workload(TINY, 256, 8), workload(TINY, 256, 8, causal=True)
    rf, rc = _run(TINY, full), _run(TINY, causal)
    check_run(TINY, causal, rc)
    # tiles of 64 rows see 64, 128, 192, 256 keys: 10/16 of the K/V traffic
    q_bytes = 256 * 8
    assert (rc.counters["bytes_rd"] - q_bytes) * 16 == (rf.counters["bytes_rd"] - q_bytes) * 10
    assert rc.cycles < 0.7 * rf.cycles


def test_gqa_reads_each_kv_head_once_per_group():
    """GQA with g = 4: K/V bytes read divided by 4 exactly (RTL counters). (8 queries against
    32 keys: a shape where packing the group's heads wins on cycles too, so the tiling keeps
    it; at 16 × 16 one head per tile is now 42 cycles faster and is what the tiling picks.)"""
    mha = workload(TINY, 8, 16, nk=32, heads=4)
    gqa = workload(TINY, 8, 16, nk=32, heads=4, kv_heads=1)
    rm, rg = _run(TINY, mha), _run(TINY, gqa)
    check_run(TINY, gqa, rg)
    assert rg.cycles < rm.cycles
    q_bytes = 4 * 8 * 16
    assert rm.counters["bytes_rd"] - q_bytes == 4 * (rg.counters["bytes_rd"] - q_bytes)


@pytest.mark.slow     # a model of its own (a config without the chains): make test-slow; the
# default suite has the same comparison at core level (tests/hw/test_core.py,
# test_several_keys_per_step_is_faster)
def test_several_keys_per_step_for_small_tiles():
    """One query row on 4 MAC lines: 4 keys per step against 1 (a config without the chains).
    The array does a quarter of the issue cycles; the run becomes bound by reading K/V (8 KB
    at 4 bytes a cycle) instead of by padded one-key steps."""
    one = C.replace(TINY, max_keys_per_step=1)
    wl = workload(TINY, 1, 16, nk=256)
    r1, r4 = _run(one, wl), _run(TINY, wl)
    check_run(TINY, wl, r4)
    check_run(one, wl, r1)
    assert r4.counters["pe_busy"] * 4 == r1.counters["pe_busy"]
    assert r4.cycles < 0.6 * r1.cycles


@pytest.mark.parametrize("shape", [
    {"n": 100, "d": 16, "causal": True},
    {"n": 16, "d": 8, "heads": 4, "kv_heads": 2, "causal": True},
    {"n": 2, "d": 8, "nk": 40},
])
def test_beyond_with_backpressure(shape):
    _run(TINY, workload(TINY, **shape), p_stall=0.3)


def test_host_schemes_run_bit_exact_and_rotation_beats_per_tensor():
    """The host schemes change only the integers the accelerator gets: the RTL is bit-exact
    with the model under each, and on outlier-heavy inputs the rotation scheme's end-to-end
    error against float64 attention of the float inputs is lower than per-tensor's."""
    from attenio.model import accuracy as A
    from attenio.model import numerics as nm
    from attenio.model import reference as ref
    from attenio.model.golden import GoldenInputs

    wl = workload(TINY, 48, 32, nk=80)
    q, k, v = A.make_inputs(wl, "llm-outliers", seed=3)
    exact = ref.attention(q, k, v)
    err = {}
    for scheme in ("tensor", "rotate"):
        h = A.quantize_scheme(TINY, q, k, v, scheme)
        r = simulate(TINY, wl, seed=3, log=lambda *a: None,
                     inputs=GoldenInputs(h.q, h.k, h.v, h.sq, h.sk, h.sv))
        assert r.done and r.error == ErrorCode.NONE and r.bit_exact, (scheme, r.mismatches)
        assert r.cycles == r.predicted_cycles
        err[scheme] = A.rel_frobenius(nm.dequantize_output(TINY, r.out, h.sv), exact)
    assert err["rotate"] < 0.8 * err["tensor"], err


# rows % 8 != 0 (the R-beat row count); two tiles (the next tile's rows and multipliers load
# during finalize); 2 keys per step; d = 64 (a row and its word: 17 words); in make test-slow
# also one tile of 48 rows and GQA packing
@pytest.mark.parametrize("shape", [
    {"n": 47, "d": 16, "nk": 30},
    {"n": 100, "d": 32, "causal": True},
    {"n": 2, "d": 8, "nk": 40},
    {"n": 40, "nk": 33, "d": 64},
    pytest.param({"n": 48, "d": 32, "nk": 80}, marks=pytest.mark.slow),
    pytest.param({"n": 24, "d": 8, "heads": 4, "kv_heads": 2}, marks=pytest.mark.slow),
])
def test_per_row_q_scales_run_bit_exact_and_cost_one_word_a_row(shape):
    """Q quantized with one scale per row: each row's multiplier comes with the row (one more
    word), the softmax applies it per lane. Bit-exact with the model, cycles equal to the
    schedule's, and the only extra traffic is that word per Q row."""
    from attenio.model.golden import quantized_inputs

    wl = workload(TINY, **shape)
    rows = quantized_inputs(TINY, wl, seed=9, q_rows=True)
    assert len(set(rows.sq.ravel().tolist())) > 1          # the rows' scales really differ
    r = _run(TINY, wl, inputs=rows)
    assert r.cycles == r.predicted_cycles
    assert r.counters["bytes_rd"] == r.predicted_read
    assert r.axi_violations == 0, r.axi_report
    per_tensor = _run(TINY, wl, inputs=quantized_inputs(TINY, wl, seed=9))
    word = TINY.macs_per_line * TINY.element_bytes
    q_rows = wl.batch * wl.heads * wl.seq_q
    assert r.counters["bytes_rd"] - per_tensor.counters["bytes_rd"] == q_rows * word


@pytest.mark.parametrize("k_block", [None, 4])
def test_per_row_q_and_per_key_k_scales_under_backpressure(k_block):
    from attenio.model.golden import quantized_inputs

    wl = workload(TINY, 70, 16, nk=50, causal=True)
    r = _run(TINY, wl, p_stall=0.4,
             inputs=quantized_inputs(TINY, wl, seed=2, q_rows=True, k_block=k_block))
    assert r.cycles >= r.predicted_cycles and r.axi_violations == 0


@pytest.mark.parametrize("scheme", ["tensor", "rotate"])
def test_per_key_scales_on_large_logits_hold_the_contract_on_the_rtl(scheme):
    """Issue #33's case on the RTL: outlier-heavy inputs with logits of σ = 300, Q per row and
    K per block of 4 keys: bit-exact with the integer model and within the contract (the RTL
    multiplies c_m by each key's factor exactly, as the model does)."""
    from attenio.model.golden import quantized_inputs

    wl = workload(TINY, 40, 32, nk=64)
    inp = quantized_inputs(TINY, wl, "llm-outliers", 3, q_rows=True, k_block=4, scheme=scheme,
                           sigma=300.0)
    r = _run(TINY, wl, inputs=inp)
    check_run(TINY, wl, r)
    assert r.errors and r.errors["max_rel"] < 2e-4 and r.errors["mean_rel"] < 1e-4, r.errors


@pytest.mark.parametrize("option,shown,bytes_note", [
    (["--q-scales", "row"], "q-scales=row", "multiplier's word"),
    (["--k-block", "4"], "k-block=4", "each K row with its factor's word"),
])
def test_simulate_command_runs_finer_scales(option, shown, bytes_note):
    from click.testing import CliRunner

    from attenio.app.cli import main

    res = CliRunner().invoke(main, ["simulate", "--preset", "tiny", "--n", "20", "--d", "8",
                                    *option])
    assert res.exit_code == 0, res.output
    assert shown in res.output and "bit-exact" in res.output
    assert bytes_note in res.output and "PASS" in res.output


def test_simulate_command_refuses_a_bad_k_block_in_one_line():
    from click.testing import CliRunner

    from attenio.app.cli import main

    bad = CliRunner().invoke(main, ["simulate", "--preset", "tiny", "--n", "20", "--d", "8",
                                    "--k-block", "0"])
    assert bad.exit_code == 2 and bad.output.startswith("error: k_block=0"), bad.output
    assert bad.output.count("\n") == 1


# rows % 8 != 0 with keys in blocks of 4 (a block's factor on each of its K rows); two causal
# tiles; 2 keys per step (two factors per step, one per ring copy); Q per row as well (both
# multipliers meet in the product); in make test-slow d = 64 (17 words a K row) and GQA
@pytest.mark.parametrize("shape,q_rows,block", [
    ({"n": 47, "d": 16, "nk": 30}, False, 4),
    ({"n": 100, "d": 32, "causal": True}, True, 8),
    ({"n": 2, "d": 8, "nk": 40}, True, 1),
    pytest.param({"n": 40, "nk": 33, "d": 64}, True, 16, marks=pytest.mark.slow),
    pytest.param({"n": 24, "d": 8, "heads": 4, "kv_heads": 2}, True, 2, marks=pytest.mark.slow),
])
def test_per_key_k_scales_run_bit_exact_and_cost_one_word_a_k_row(shape, q_rows, block):
    """K quantized with one scale per block of keys: each K row carries its factor (one more
    word), and each lane's multiplier is the row's times the key's. Bit-exact with the model,
    cycles equal to the schedule's, and the only extra traffic is one word per K row read."""
    from attenio.model.golden import quantized_inputs
    from attenio.sim.image import run_image

    wl = workload(TINY, **shape)
    keys = quantized_inputs(TINY, wl, seed=5, q_rows=q_rows, k_block=block)
    assert len(set(keys.sk.ravel().tolist())) > 1          # the blocks' scales really differ
    r = _run(TINY, wl, inputs=keys)
    assert r.cycles == r.predicted_cycles
    assert r.counters["bytes_rd"] == r.predicted_read
    assert r.axi_violations == 0, r.axi_report
    # the same run without the factors: its bytes as the schedule predicts them (which the
    # RTL's counters equal on every other run of the suite)
    plain = run_image(TINY, wl, quantized_inputs(TINY, wl, seed=5, q_rows=q_rows)).schedule
    word = TINY.macs_per_line * TINY.element_bytes
    program = run_image(TINY, wl, keys).schedule.program
    k_rows = sum(i.keys for i in program if i.op.name == "LOAD_KV")
    assert all(i.key_scales for i in program if i.op.name in ("LOAD_KV", "COMPUTE") and i.keys)
    assert r.counters["bytes_rd"] - plain.read_bytes == k_rows * word

