"""model/accuracy.py: the host schemes are exact transformations, the float formats round as
documented, the user's files are checked, and the measured ranking holds."""

import numpy as np
import pytest

from attenio.base import config as C
from attenio.base.errors import ConfigError
from attenio.model import accuracy as A
from attenio.model import numerics as nm
from attenio.model import reference as ref

WL = C.Workload.square(256, 32)


@pytest.mark.parametrize("scheme", ["smooth", "rotate"])
@pytest.mark.parametrize("causal", [False, True])
def test_scheme_transforms_leave_attention_unchanged(scheme, causal):
    # without quantization (64 bits) the transformed inputs give the same attention
    wl = C.Workload(seq_q=40, seq_k=72, head_dim=24, heads=4, kv_heads=2, causal=causal)
    q, k, v = A.make_inputs(wl, "llm-outliers", 1)
    hw = C.replace(C.fpga(), data_bits=16)
    h = A.quantize_scheme(hw, q, k, v, scheme)
    # undo the quantization with the scales: the float inputs the datapath effectively sees
    qf, kf, vf = h.q * h.sq, h.k * h.sk, h.v * h.sv
    exact = ref.attention(q, k, v, causal=causal)
    got = ref.attention(qf, kf, vf, causal=causal)
    assert A.rel_frobenius(got, exact) < 2e-3       # only 16-bit rounding is left


def test_rotation_is_orthogonal():
    for d in (1, 8, 24, 64, 59):
        h = A.rotation(d)
        np.testing.assert_allclose(h @ h.T, np.eye(d), atol=1e-12)


def test_formats_round_like_the_hardware_types():
    x = np.array([1.0 + 2 ** -9, 1.0 + 3 * 2 ** -9, 1.0 + 2 ** -12, 65504.0, 1e-8])
    # bf16 keeps 8 significant bits (round to nearest even), fp16 11
    np.testing.assert_array_equal(A._round(x, "bf16")[:3], [1.0, 1.0 + 2 ** -7, 1.0])
    np.testing.assert_array_equal(A._round(x, "fp16")[:4], [1.0 + 2 ** -9, 1.0 + 3 * 2 ** -9,
                                                            1.0, 65504.0])
    with pytest.raises(ConfigError, match="format"):
        A._round(x, "fp8")


def test_lowp_attention_is_close_and_ordered():
    q, k, v = A.make_inputs(WL, "gaussian", 0)
    exact = ref.attention(q, k, v)
    e16 = A.rel_frobenius(A.attention_lowp(q, k, v, "fp16"), exact)
    eb = A.rel_frobenius(A.attention_lowp(q, k, v, "bf16"), exact)
    assert 1e-5 < e16 < eb < 2e-2       # fp16 has 3 more mantissa bits than bf16


def test_all_zero_inputs_get_defined_scales():
    z = np.zeros((1, 1, 16, 8))
    for scheme in A.SCHEMES:
        for q_rows in (False, True):
            h = A.quantize_scheme(C.tiny(), z, z, z, scheme, q_rows=q_rows)
            assert np.all(np.isfinite(h.sv)) and np.all(h.sq > 0) and h.sk > 0
            assert np.shape(h.sq) == ((1, 1, 16, 1) if q_rows else ())
            out = A.run_int(C.tiny(), C.Workload.square(16, 8), h)
            assert np.all(out == 0)


def test_measured_ranking_on_outliers():
    # int16 beats fp16 and rotation brings int8 close to bf16 on outlier channels; per-tensor
    # int8 is several times worse than bf16 (docs/numerics.md, "End to end")
    q, k, v = A.make_inputs(WL, "llm-outliers", 0)
    rows = {(r["name"], r["scheme"]): r["rel_frobenius"] for r in A.compare(
        {"fpga": C.fpga(), "asplos26": C.asplos26()}, WL, q, k, v)}
    assert rows[("asplos26", "tensor")] < rows[("fp16", "")]
    assert rows[("fpga", "rotate")] < 0.6 * rows[("fpga", "tensor")]
    assert rows[("fpga", "tensor")] > 2 * rows[("bf16", "")]
    # per-row Q scales improve every scheme on these inputs
    for scheme in A.SCHEMES:
        assert rows[("fpga", scheme + "+rows")] < rows[("fpga", scheme)], scheme


def _save(tmp_path, name, **arrays):
    p = tmp_path / name
    if name.endswith(".npz"):
        np.savez(p, **arrays)
    else:
        np.save(p, next(iter(arrays.values())))
    return str(p)


def test_load_qkv_accepts_ranks_2_to_4(tmp_path):
    rng = np.random.default_rng(0)
    f = _save(tmp_path, "x.npz", q=rng.standard_normal((2, 4, 10, 8)),
              k=rng.standard_normal((2, 2, 12, 8)), v=rng.standard_normal((2, 2, 12, 8)))
    (q, k, v), _ = A.load_qkv(npz=f)
    assert q.shape == (2, 4, 10, 8) and k.shape == (2, 2, 12, 8)
    paths = [_save(tmp_path, f"{n}.npy", x=rng.standard_normal((10, 8))) for n in "qkv"]
    (q, k, v), _ = A.load_qkv(q=paths[0], k=paths[1], v=paths[2])
    assert q.shape == (1, 1, 10, 8)


@pytest.mark.parametrize("arrays, match", [
    (dict(q=np.full((4, 8), np.nan), k=np.ones((4, 8)), v=np.ones((4, 8))),
     r"array q='NaN at index \(0, 0\)'.*finite"),
    (dict(q=np.ones((4, 8)), k=np.full((4, 8), np.inf), v=np.ones((4, 8))),
     r"array k='Inf at index"),
    (dict(q=np.ones((4, 8), dtype=np.int8), k=np.ones((4, 8)), v=np.ones((4, 8))),
     r"array q='int8' .*integers where float tensors"),
    (dict(q=np.ones(8), k=np.ones((4, 8)), v=np.ones((4, 8))), r"array q='shape \(8,\)'.*rank"),
    (dict(q=np.ones((4, 8)), k=np.ones((4, 8)), v=np.ones((5, 8))), r"arrays k, v='shapes"),
    (dict(q=np.ones((4, 6)), k=np.ones((4, 8)), v=np.ones((4, 8))), r"head dims 6, 8"),
    (dict(q=np.ones((3, 4, 8)), k=np.ones((2, 4, 8)), v=np.ones((2, 4, 8))),
     r"heads 3, 2.*multiple"),
    (dict(q=np.ones((4, 8)), k=np.ones((4, 8))), r"has no array v"),
])
def test_load_qkv_names_the_file_array_and_problem(tmp_path, arrays, match):
    f = _save(tmp_path, "bad.npz", **arrays)
    with pytest.raises(ConfigError, match=match) as e:
        A.load_qkv(npz=f)
    assert "bad.npz" in str(e.value)


def test_load_qkv_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="file not found"):
        A.load_qkv(npz=str(tmp_path / "none.npz"))
    junk = tmp_path / "junk.npz"
    junk.write_text("not numpy")
    with pytest.raises(ConfigError, match="not a NumPy"):
        A.load_qkv(npz=str(junk))
    with pytest.raises(ConfigError, match="missing: give all three"):
        A.load_qkv(q=str(junk))


def test_int_output_matches_manual_host_flow():
    # the tensor scheme is the plain host flow: quantize, attention_int, dequantize
    q, k, v = A.make_inputs(WL, "uniform", 2)
    hw = C.fpga()
    (qi, sq), (ki, sk), (vi, sv) = (nm.quantize(x, 8) for x in (q, k, v))
    manual = nm.dequantize_output(hw, nm.attention_int(hw, WL, qi, ki, vi, sq, sk), sv)
    got = A.run_int(hw, WL, A.quantize_scheme(hw, q, k, v, "tensor"))
    np.testing.assert_array_equal(got, manual)
