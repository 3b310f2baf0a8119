"""End-to-end accuracy: what a user gets from float tensors, against exact float64 attention
of those same float tensors, beside fp16 and bf16 attention of them.

The golden check (model/golden.py) holds the datapath to its contract on the *quantized*
inputs; this module measures the whole host flow, input quantization included:

    float Q, K, V → a quantization scheme → the bit-exact integer model → dequantize
                  → compare with float64 attention of the float Q, K, V

Schemes (what the host does before the accelerator sees integers; the datapath and the
program are the same for all of them, so the RTL is bit-exact with the model under each):

``tensor``
    one scale per tensor for Q, K and V (the plain host flow).
``smooth``
    per K/V head: K minus its per-channel mean over the keys (exact: it shifts each query's
    scores by one constant, which the softmax cancels, causal mask or not), then the channels'
    outliers split between Q and K by an exact diagonal rescaling ``Q·diag(c)``,
    ``K·diag(1/c)`` with ``c_j = sqrt(max|K_j| / max|Q_j|)`` (as SmoothQuant does between
    activations and weights; one ``c`` for all query heads that share the K head), and V
    quantized per channel (a scale per K/V head and channel: the output of channel j is in
    units of V's scale j, so the host dequantizes per channel). Q and K keep one scale each.
``rotate``
    K minus its per-channel mean, then Q and K both multiplied by one orthogonal matrix H
    (``(Q H)(K H)ᵀ = Q Kᵀ`` exactly; the normalized Hadamard matrix when d is a power of two,
    else a fixed random orthogonal one), which spreads a few outlier channels over all of
    them (as QuaRot does for LLM activations); V per channel as in ``smooth``.

Each scheme runs with Q quantized per tensor or per row (``q_rows``: one scale per query row,
after the scheme's transform; the hardware takes each row's softmax multiplier with the row,
``LOAD_Q.row_scales``), shown as ``rotate`` and ``rotate+rows``, and with K per tensor or per
block of keys (``k_block``: one scale per ``K_BLOCK`` keys, the way int8 attention kernels on
GPUs quantize K; the hardware takes each key's factor with its K row, ``LOAD_KV.key_scales``),
shown as ``rotate+kblk`` and ``rotate+rows+kblk``.

fp16 and bf16 attention are computed the way FlashAttention runs on a GPU: inputs rounded to the
format, scores, running max and sums in float32, P rounded to the format before ``P·V``, the
accumulator in float32, the output rounded to the format.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import bad
from attenio.model import numerics as nm
from attenio.model import reference as ref
from attenio.model.scales import output_unit

__all__ = ["DISTRIBUTIONS", "SCHEMES", "FORMATS", "Q_SCALES", "K_SCALES", "K_BLOCK",
           "make_inputs", "attention_lowp",
           "HostInputs", "quantize_scheme", "run_int", "rel_frobenius", "compare"]

DISTRIBUTIONS = ("gaussian", "uniform", "llm-outliers", "peaky")
SCHEMES = ("tensor", "smooth", "rotate")
FORMATS = ("fp16", "bf16")
Q_SCALES = ("tensor", "row")     # Q quantized with one scale, or one per query row
K_SCALES = ("tensor", "block")   # K quantized with one scale, or one per block of keys
# keys per K scale block (host choice; the hardware carries a factor per key, so the cost does
# not depend on it): 16 measured best on llm-outliers, N = 1024, d = 64 (docs/numerics.md)
K_BLOCK = 16

# llm-outliers: this many channels of Q and K carry outliers of OUTLIER_GAIN times the rest;
# then Q and K are scaled so the logits (q·k/√d) have a standard deviation of about LLM_SIGMA
OUTLIER_CHANNELS = 4
OUTLIER_GAIN = (20.0, 50.0)
LLM_SIGMA = 3.0
PEAKY_SIGMA = 64.0


def make_inputs(wl: Workload, dist: str, seed: int = 0,
                sigma: float | None = None) -> list[np.ndarray]:
    """Float Q, K, V of ``wl`` (shapes ``[batch, heads, seq_q, d]``, ``[batch, kv_heads, seq_k,
    d]``) from a built-in distribution (``DISTRIBUTIONS``). V is N(0, 1) except for
    ``uniform`` (U[-1, 1] throughout).

    ``llm-outliers``: Gaussian Q and K whose 4 outlier channels (the same in Q and K, as in
    LLM activations) are 20 to 50 times larger, scaled so the logits have σ ≈ 3. ``peaky``:
    Gaussian Q and K scaled so the logits have σ ≈ 64 (a near one-hot softmax). ``sigma``:
    Q and K of any class scaled by one common factor so the logits (``q·k/√d``, measured on
    the first 256 rows and keys) have that standard deviation instead.
    """
    if dist not in DISTRIBUTIONS:
        raise bad("dist", dist, f"choose one of: {', '.join(DISTRIBUTIONS)}")
    if sigma is not None and not (isinstance(sigma, (int, float)) and math.isfinite(sigma)
                                  and sigma > 0):
        raise bad("logit_sigma", sigma, "must be a positive finite number")
    q, k, v = ref.random_inputs(wl, "uniform" if dist == "uniform" else "gaussian", seed)
    d = wl.head_dim
    target = sigma
    if dist == "llm-outliers":
        rng = np.random.default_rng(seed + 1)
        ch = rng.choice(d, min(OUTLIER_CHANNELS, d), replace=False)
        gain = rng.uniform(*OUTLIER_GAIN, len(ch))
        q[..., ch] *= gain
        k[..., ch] *= gain
        target = target or LLM_SIGMA
    elif dist == "peaky":
        target = target or PEAKY_SIGMA
    if target is None:
        return [q, k, v]
    # logit σ of the inputs as drawn (from a sample of rows), then one common factor
    qs, ks = q[0, 0, :256], k[0, 0, :256]
    drawn = float(np.std(qs @ ks.T / math.sqrt(d))) or 1.0
    f = math.sqrt(target / drawn)
    return [q * f, k * f, v]


# ---- fp16 / bf16 attention (FlashAttention-style rounding) ----

def _round(x, fmt: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    if fmt == "fp16":
        return x.astype(np.float16).astype(np.float32)
    if fmt == "bf16":
        b = x.view(np.uint32).astype(np.uint64)
        b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16      # round to nearest even
        return b.astype(np.uint32).view(np.float32)
    raise bad("format", fmt, f"choose one of: {', '.join(FORMATS)}")


def _lowp_head(q, k, v, *, causal: bool, sm_scale=None, block: int = 1024,
               fmt: str, window=(-1, -1), softcap=None, sink=None, alibi=None) -> np.ndarray:
    d = q.shape[1]
    rnd = functools.partial(_round, fmt=fmt)
    return ref.streamed_head(rnd(q), rnd(k), rnd(v), causal=causal, block=block,
                             scale=1.0 / math.sqrt(d) if sm_scale is None else sm_scale,
                             dtype=np.float32, round_p=rnd, round_out=rnd, scale_scores=True,
                             window=window, softcap=softcap, sink=sink, alibi=alibi)


def attention_lowp(q, k, v, fmt: str, causal: bool = False, window=(-1, -1),
                   softcap: float | None = None, sinks=None, alibi_slopes=None) -> np.ndarray:
    """fp16 or bf16 attention of float ``q`` ``[b, h, nq, d]``, ``k``/``v`` ``[b, hk, nk, d]``
    (GQA when ``hk`` divides ``h``), as float64: the reference's streamed online softmax run
    in float32 with the format's roundings (``reference.streamed_head``)."""
    _round(np.zeros(1), fmt)                    # an unknown format: refused before the work
    return ref.attention(q, k, v, causal=causal, head=functools.partial(_lowp_head, fmt=fmt),
                         window=window, softcap=softcap, sinks=sinks,
                         alibi_slopes=alibi_slopes)


# ---- the host flow under a scheme ----

@dataclass(frozen=True)
class HostInputs:
    """What the host hands the accelerator (integers and the Q/K scales the softmax multiplier
    folds in: Q's a scalar, or one per row ``[b, h, nq, 1]``; K's a scalar, or one per key
    ``[b, hk, nk, 1]``) and what it needs to read the output (V's scales: a scalar for
    ``tensor``, one per K/V head and channel ``[b, hk, 1, d]`` for the others)."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    sq: float | np.ndarray
    sk: float | np.ndarray
    sv: np.ndarray | float
    scheme: str
    # V with one scale per key (``sv`` ``[b, hk, nk, 1]``: a paged cache's ``value_scales``)
    v_keys: bool = False


def _migrate(q, k):
    """The exact Q·diag(c), K·diag(1/c) migration (per K/V head; ``c`` from the group's query
    heads)."""
    b, h = q.shape[:2]
    hk = k.shape[1]
    g = h // hk
    q, k = q.copy(), k.copy()
    for bi in range(b):
        for j in range(hk):
            qa = np.abs(q[bi, j * g:(j + 1) * g]).max(axis=(0, 1))
            ka = np.abs(k[bi, j]).max(axis=0)
            ok = (qa > 0) & (ka > 0)
            c = np.where(ok, np.sqrt(np.where(ok, ka, 1.0) / np.where(ok, qa, 1.0)), 1.0)
            q[bi, j * g:(j + 1) * g] *= c
            k[bi, j] /= c
    return q, k


def rotation(d: int) -> np.ndarray:
    """An orthogonal d × d matrix: the normalized Hadamard matrix for d a power of two, else
    the Q factor of a Gaussian matrix drawn with seed 0 (so the host and a test agree)."""
    if d & (d - 1) == 0:
        h = np.ones((1, 1))
        while h.shape[0] < d:
            h = np.block([[h, h], [h, -h]])
        return h / math.sqrt(d)
    qm, r = np.linalg.qr(np.random.default_rng(0).standard_normal((d, d)))
    return qm * np.sign(np.diag(r))


def quantize_scheme(hw: HardwareConfig, q, k, v, scheme: str,
                    q_rows: bool = False, k_block: int | None = None,
                    v_keys: bool = False) -> HostInputs:
    """Quantize float Q, K, V to ``hw.data_bits`` under ``scheme`` (``SCHEMES``), Q with one
    scale per row if ``q_rows``, K with one per block of ``k_block`` keys if given
    (:func:`numerics.quantize_keys`, after the scheme's transform), V with one per key if
    ``v_keys`` (blocks of one key). An all-zero tensor, row or channel gets scale 1 (its
    integers are 0); an all-zero K block its head's reference."""
    if scheme not in SCHEMES:
        raise bad("scheme", scheme, f"choose one of: {', '.join(SCHEMES)}")
    bits = hw.data_bits
    q_axis = 3 if q_rows else None
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    if scheme != "tensor":
        k = k - k.mean(axis=2, keepdims=True)      # both schemes: K minus its channel means
        if scheme == "smooth":
            q, k = _migrate(q, k)
        else:
            h = rotation(q.shape[-1])
            q, k = q @ h, k @ h
    qi, sq = nm.quantize(q, bits, axis=q_axis)
    ki, sk = nm.quantize(k, bits) if k_block is None else nm.quantize_keys(hw, k, k_block)
    # V per K/V head and channel, except for the plain per-tensor scheme
    if v_keys:
        vi, sv = nm.quantize_keys(hw, v, 1)
    else:
        vi, sv = nm.quantize(v, bits, axis=None if scheme == "tensor" else 2)
    return HostInputs(qi, ki, vi, sq, sk, sv, scheme, v_keys)


def run_int(hw: HardwareConfig, wl: Workload, inp: HostInputs, progress=None,
            ml: dict | None = None, table=None, softcap: float | None = None,
            sinks=None, alibi_slopes=None) -> np.ndarray:
    """The accelerator's output (the bit-exact integer model) read back as floats (``ml``:
    a dict that receives each row's statistics, as :func:`numerics.attention_int`;
    ``table``: K and V are a paged cache's pool, read through its block table; ``softcap``:
    the logits' cap; ``sinks``: one attention sink per query head; ``alibi_slopes``: ALiBi's
    slope per query head)."""
    out = nm.attention_int(hw, wl, inp.q, inp.k, inp.v, inp.sq, inp.sk, progress=progress,
                           ml=ml, table=table, softcap=softcap, sinks=sinks,
                           alibi_slopes=alibi_slopes, v_scale=inp.sv if inp.v_keys else None)
    return nm.dequantize_output(hw, out, output_unit(inp.sv, inp.v_keys, wl.group_size))


def rel_frobenius(approx, exact) -> float:
    """‖approx − exact‖_F / ‖exact‖_F (0 when both are 0)."""
    den = float(np.linalg.norm(exact))
    num = float(np.linalg.norm(np.asarray(approx) - np.asarray(exact)))
    return num / den if den else num


def compare(hws: dict[str, HardwareConfig], wl: Workload, q, k, v,
            schemes=SCHEMES, formats=FORMATS, progress=None,
            q_scales=Q_SCALES, k_scales=K_SCALES, k_block: int = K_BLOCK) -> list[dict]:
    """Every preset × scheme × Q scale granularity (``Q_SCALES``) × K scale granularity
    (``K_SCALES``, blocks of ``k_block`` keys) and every float format on one set of float
    inputs, against float64 attention of them. Rows: ``kind`` ("int" or "float"), ``name``,
    ``scheme`` (``+rows`` with Q per row, ``+kblk`` with K per block), ``q_scales``,
    ``k_scales``, ``bits``, ``max_abs``, ``rel_frobenius``, ``max_rel`` (max error over V's
    range)."""
    for g in q_scales:
        if g not in Q_SCALES:
            raise bad("q_scales", g, f"choose from: {', '.join(Q_SCALES)}")
    for g in k_scales:
        if g not in K_SCALES:
            raise bad("k_scales", g, f"choose from: {', '.join(K_SCALES)}")
    if not isinstance(k_block, int) or k_block < 1:
        raise bad("k_block", k_block, "must be a positive number of keys")
    exact = ref.attention(q, k, v, causal=wl.causal, window=wl.window)
    rows = []

    def row(kind, name, scheme, bits, approx, q_sc="", k_sc=""):
        e = ref.error_metrics(approx, exact, v)
        rows.append({"kind": kind, "name": name,
                     "scheme": scheme + ("+rows" if q_sc == "row" else "")
                     + ("+kblk" if k_sc == "block" else ""), "q_scales": q_sc,
                     "k_scales": k_sc, "k_block": k_block if k_sc == "block" else None,
                     "bits": bits,
                     "max_abs": e["max_abs"], "max_rel": e["max_rel"],
                     "rel_frobenius": rel_frobenius(approx, exact)})

    for name, hw in hws.items():
        wl_hw = wl
        hw.check_workload(wl_hw)
        for scheme in schemes:
            for g in q_scales:
                for kg in k_scales:
                    host = quantize_scheme(hw, q, k, v, scheme, q_rows=g == "row",
                                           k_block=k_block if kg == "block" else None)
                    row("int", name, scheme, hw.data_bits, run_int(hw, wl_hw, host, progress),
                        g, kg)
    for fmt in formats:
        row("float", fmt, "", 16, attention_lowp(q, k, v, fmt, wl.causal, wl.window))
    return rows


# ---- the user's own tensors ----

def _as_qkv_array(name: str, where: str, x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind in "iub":
        raise bad(f"{where} array {name}", str(x.dtype),
                  "integers where float tensors are expected (give the float activations; "
                  "the host quantizes them)")
    if x.dtype.kind != "f":
        raise bad(f"{where} array {name}", str(x.dtype), "a float array is expected")
    if not 2 <= x.ndim <= 4:
        raise bad(f"{where} array {name}", f"shape {x.shape}",
                  "rank 2 (seq, d), 3 (heads, seq, d) or 4 (batch, heads, seq, d)")
    if x.size == 0:
        raise bad(f"{where} array {name}", f"shape {x.shape}", "an empty array")
    bad_vals = ~np.isfinite(x)
    if bad_vals.any():
        kind = "NaN" if np.isnan(x).any() else "Inf"
        first = tuple(int(i) for i in np.argwhere(bad_vals)[0])
        raise bad(f"{where} array {name}", f"{kind} at index {first}",
                  "every value must be finite")
    while x.ndim < 4:
        x = x[None]
    return x.astype(np.float64)


def load_qkv(npz: str | None = None, q: str | None = None, k: str | None = None,
             v: str | None = None) -> tuple[list[np.ndarray], str]:
    """Float Q, K, V from one ``.npz`` (arrays named ``q``, ``k``, ``v``) or three ``.npy``
    files, as ``[batch, heads, seq, d]`` arrays (rank 2 and 3 arrays get leading axes of 1).
    Returns the arrays and a label for reports.

    Raises
    ------
    ConfigError
        A missing or unreadable file, a missing array, integer or non-float data, NaN or Inf,
        a rank outside 2…4, or shapes that do not form attention (d, batch or K/V lengths that
        differ, query heads not a multiple of K/V heads); each names the file and the array.
    """
    def read(path, what):
        from pathlib import Path
        p = Path(path)
        if not p.is_file():
            raise bad(what, path, "file not found")
        try:
            return np.load(p, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise bad(what, path, f"not a NumPy .npy/.npz file ({exc})") from None

    if npz is not None:
        if any(x is not None for x in (q, k, v)):
            raise bad("inputs", npz, "give either one .npz or --q/--k/--v .npy files, not both")
        data = read(npz, "inputs")
        if not hasattr(data, "files"):
            raise bad("inputs", npz, "a .npz archive with arrays q, k, v is expected")
        missing = [n for n in ("q", "k", "v") if n not in data.files]
        if missing:
            raise bad("inputs", npz, f"has no array {', '.join(missing)} (it has "
                      f"{', '.join(data.files) or 'none'})")
        arrays = [_as_qkv_array(n, npz, data[n]) for n in ("q", "k", "v")]
        label = npz
    else:
        paths = {"q": q, "k": k, "v": v}
        missing = [n for n, p in paths.items() if p is None]
        if missing:
            raise bad("inputs", ", ".join(f"--{n}" for n in missing),
                      "missing: give all three of --q, --k, --v (or one --inputs .npz)")
        arrays = []
        for n, p in paths.items():
            x = read(p, f"--{n}")
            if hasattr(x, "files"):
                raise bad(f"--{n}", p, "a .npy array is expected (a .npz goes to --inputs)")
            arrays.append(_as_qkv_array(n, p, x))
        label = "+".join(str(p) for p in paths.values())
    qa, ka, va = arrays
    where = label
    if ka.shape != va.shape:
        raise bad(f"{where} arrays k, v", f"shapes {ka.shape}, {va.shape}", "must be equal")
    if qa.shape[-1] != ka.shape[-1]:
        raise bad(f"{where} arrays q, k", f"head dims {qa.shape[-1]}, {ka.shape[-1]}",
                  "must be equal")
    if qa.shape[0] != ka.shape[0]:
        raise bad(f"{where} arrays q, k", f"batches {qa.shape[0]}, {ka.shape[0]}",
                  "must be equal")
    if qa.shape[1] % ka.shape[1]:
        raise bad(f"{where} arrays q, k", f"heads {qa.shape[1]}, {ka.shape[1]}",
                  "query heads must be a multiple of K/V heads")
    return arrays, label
