"""The host's side of the numerics: quantizing Q, K and V to the datapath's integers and the
softmax multiplier of their scales (``c_m``, ``c_sh``; per Q row and per key with their words
in DRAM). docs/numerics.md derives each format; :mod:`attenio.model.numerics` is the datapath
these feed.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from attenio.base.config import HardwareConfig
from attenio.base.errors import ConfigError, bad
from attenio.contract.formats import (
    KEY_MANT_BITS,
    SCALE_SHIFT_MAX,
    SOFTCAP_CAP_BITS,
    SOFTCAP_X_EXTRA,
)

__all__ = ["ScaleParams", "softmax_scale", "softmax_scale_rows", "key_factors", "key_reference",
           "with_key_scales", "with_value_scales", "quantize", "quantize_keys", "dequantize",
           "dequantize_output", "output_unit",
           "KEY_EXP_MAX", "softcap_cap", "softcap_q_factor", "check_int_tensor",
           "scale_array", "unit_scale"]


@dataclass(frozen=True)
class ScaleParams:
    """The softmax-scale multiplier the host writes: ``t = round(s · c_m / 2**c_sh)``.

    ``c_m / 2**c_sh`` approximates ``q_scale · k_scale · log2(e) / √d · 2**F``, so ``t`` is the
    base-2 logit with F fraction bits. One pair for the tile (``COMPUTE``'s fields), or with
    per-row Q scales one pair per query row (int arrays, :func:`softmax_scale_rows`; the
    hardware loads them with the Q rows).
    """

    c_m: int | np.ndarray
    c_sh: int | np.ndarray
    # per-key K scales: key j's factor f_j = k_m[j]·2**-(CM + k_e[j]) (K's scale of key j
    # over the reference scale the multiplier folds in; k_m normalized in [2**(CM-1), 2**CM)
    # with only its top KEY_MANT_BITS bits set, 0 ≤ k_e ≤ 62); row i's multiplier for key j is
    # then c_m_i·k_hi_j exactly (k_hi = k_m >> (CM − KEY_MANT_BITS)) with the shift
    # c_sh_i + k_e_j + KEY_MANT_BITS (:func:`scale`; the hardware carries (k_m, k_e) with the
    # K row)
    k_m: np.ndarray | None = None
    k_e: np.ndarray | None = None
    # logit soft-capping: the cap T = round(c·log2(e)·2**F) (:func:`softcap_cap`); the
    # multipliers above then make x = logit/c with SOFTCAP_X_EXTRA more fraction bits
    # (:func:`softcap_q_factor`) and the datapath's logit is ±round(T·tanh|x|)
    # (model.numerics.softcap). ``None``: no cap.
    cap: int | None = None
    # attention sinks: each row's start of the running max (``sink_m``) and of the row sum
    # (``sink_l``) instead of m_init and 0 (model.variants.sink_state; one for all rows, or
    # per row like c_m). ``None``: no sink.
    sink_m: int | np.ndarray | None = None
    sink_l: int | np.ndarray | None = None
    # ALiBi: each row's slope as a scale word, the bias of key j for row i being
    # ``−round(alibi_m·|i + diag − j| / 2**alibi_sh)`` logit LSBs (model.variants.alibi_word;
    # one for all rows, or per row like c_m). ``None``: no ALiBi.
    alibi_m: int | np.ndarray | None = None
    alibi_sh: int | np.ndarray | None = None
    # with per-row ALiBi words, each row's position in its sequence (the side words carry it:
    # the hardware measures the distance from it, however the tile packs its rows)
    alibi_pos: np.ndarray | None = None
    # per-key V scales (a paged cache's ``value_scales``): key j's V factor as k_m/k_e are
    # K's (``v_m`` of CM bits, only the top KEY_MANT_BITS set); the P V step multiplies key
    # j's p by it, ``floor(p·v_hi / 2**(KEY_MANT_BITS + v_e))`` (:func:`value_scaled`), ℓ sums
    # p unscaled
    v_m: np.ndarray | None = None
    v_e: np.ndarray | None = None

    @property
    def multiplier(self):
        if self.per_row:
            return np.asarray(self.c_m) / 2.0 ** np.asarray(self.c_sh)
        return self.c_m / 2.0 ** self.c_sh

    @property
    def side_words(self) -> bool:
        """Each Q row carries its full side words: a sink's start or an ALiBi slope."""
        return self.sink_m is not None or self.alibi_m is not None

    @property
    def per_row(self) -> bool:
        return np.ndim(self.c_m) > 0

    def take(self, rows) -> ScaleParams:
        """The multipliers of query ``rows`` (itself when it is one for all rows)."""
        sinks = {} if np.ndim(self.sink_m) == 0 else {
            "sink_m": np.asarray(self.sink_m)[rows], "sink_l": np.asarray(self.sink_l)[rows]}
        if np.ndim(self.alibi_m) > 0:
            sinks.update(alibi_m=np.asarray(self.alibi_m)[rows],
                         alibi_sh=np.asarray(self.alibi_sh)[rows],
                         alibi_pos=np.asarray(self.alibi_pos)[rows])
        if not self.per_row:
            return dataclasses.replace(self, **sinks) if sinks else self
        return dataclasses.replace(self, c_m=np.asarray(self.c_m)[rows],
                                   c_sh=np.asarray(self.c_sh)[rows], **sinks)

    def keys(self, sl) -> ScaleParams:
        """The multipliers for the keys ``sl`` (a slice or an index array; itself without
        per-key factors)."""
        out = self
        for m_, e_ in (("k_m", "k_e"), ("v_m", "v_e")):
            if getattr(self, m_) is not None:
                out = dataclasses.replace(out, **{m_: np.asarray(getattr(self, m_))[sl],
                                                  e_: np.asarray(getattr(self, e_))[sl]})
        return out

    def value_scaled(self, cfg: HardwareConfig, p) -> np.ndarray:
        """The p values P V multiplies V's rows by (``p`` (rows, keys) of these keys): each
        key's times its V factor, ``floor(p·v_hi / 2**(KEY_MANT_BITS + v_e))``, or ``p`` itself
        without per-key V scales."""
        if self.v_m is None:
            return p
        v_hi = np.asarray(self.v_m, dtype=np.int64) >> (cfg.numerics.scale_mult_bits
                                                        - KEY_MANT_BITS)
        sh = np.minimum(np.asarray(self.v_e, dtype=np.int64) + KEY_MANT_BITS, 62)
        return (np.asarray(p, dtype=np.int64) * v_hi) >> sh


def _check_softcap(cfg: HardwareConfig, softcap) -> float:
    if (isinstance(softcap, bool) or not isinstance(softcap, (int, float, np.floating))
            or not math.isfinite(softcap) or softcap <= 0):
        raise bad("softcap", softcap, "a positive finite cap c (logits c·tanh(logit/c); "
                  "Gemma 2: 50)")
    if not cfg.softcap_unit:
        raise bad("softcap", softcap, "this config has no soft-capping unit: take a "
                  "preset's NAME+softcap (e.g. fpga+softcap) or set softcap_unit = true (it "
                  "adds its pipeline's stages to the softmax's latency, docs/architecture.md)")
    return float(softcap)


def softcap_cap(cfg: HardwareConfig, softcap: float) -> int:
    """The cap ``T = round(c·log2(e)·2**F)`` the soft-capping unit multiplies ``tanh`` by:
    ``c`` in the logits' units, ``T`` in the base-2 logit's (COMPUTE's ``cap`` field).

    Raises ConfigError for a cap that is not positive and finite, a config without the
    unit (``softcap_unit``), or a cap whose ``T`` does not fit the field's
    ``SOFTCAP_CAP_BITS`` bits (and the logit's width)."""
    c = _check_softcap(cfg, softcap)
    t = round(c * math.log2(math.e) * 2.0 ** cfg.numerics.logit_frac_bits)
    top = min((1 << SOFTCAP_CAP_BITS) - 1, (1 << (cfg.logit_bits - 1)) - 1)
    if not 1 <= t <= top:
        lim = top / (math.log2(math.e) * 2.0 ** cfg.numerics.logit_frac_bits)
        raise bad("softcap", softcap, f"the cap must lie in (0, {lim:.4g}] (T = "
                  f"{t} must fit {SOFTCAP_CAP_BITS} bits)")
    return t


def softcap_q_factor(cfg: HardwareConfig, softcap: float) -> float:
    """What the scales' multiplier is multiplied by when the cap is on: the score stage then
    makes ``x = logit/c`` with ``F + SOFTCAP_X_EXTRA`` fraction bits instead of the base-2
    logit with F: ``2**SOFTCAP_X_EXTRA / (c·log2(e))``."""
    return 2.0 ** SOFTCAP_X_EXTRA / (_check_softcap(cfg, softcap) * math.log2(math.e))


def softmax_scale(cfg: HardwareConfig, q_scale: float, k_scale: float, head_dim: int,
                  sm_scale: float | None = None) -> ScaleParams:
    """Fold ``log2(e)``, ``1/√d`` (or ``sm_scale``) and the input scales into one multiplier.

    ``c_m`` is normalized into ``[2**(CM-1), 2**CM)`` (CM = ``scale_mult_bits``) so its relative
    error is at most ``2**-CM``.

    Raises
    ------
    ConfigError
        A scale that is not positive and finite, or a product of scales so large that one
        score LSB exceeds ``2**CM`` logit LSBs (or so small the multiplier underflows).
    """
    for name, value in (("q_scale", q_scale), ("k_scale", k_scale)):
        if not (isinstance(value, (int, float, np.floating)) and math.isfinite(value)
                and value > 0):
            raise bad(name, value, "must be a positive finite number")
    if sm_scale is None:
        sm_scale = 1.0 / math.sqrt(head_dim)
    n = cfg.numerics
    c = float(q_scale) * float(k_scale) * sm_scale * math.log2(math.e) * 2.0 ** n.logit_frac_bits
    cm_bits = n.scale_mult_bits
    top = (1 << cm_bits) - 1
    if not c * 2.0 ** SCALE_SHIFT_MAX >= 0.5:  # also catches underflow to 0
        raise bad("q_scale*k_scale", float(q_scale) * float(k_scale),
                  "too small: the softmax multiplier underflows to zero")
    sh = cm_bits - 1 - math.floor(math.log2(c))
    sh = min(sh, SCALE_SHIFT_MAX)
    if sh < 0:
        raise bad("q_scale*k_scale", float(q_scale) * float(k_scale),
                  f"too large: one score LSB would be {c:.3g} logit LSBs (at most {top})")
    c_m = round(c * 2.0 ** sh)
    if c_m > top:  # rounding reached 2**CM: renormalize
        sh -= 1
        c_m = round(c * 2.0 ** sh)
        if sh < 0 or c_m > top:
            raise bad("q_scale*k_scale", float(q_scale) * float(k_scale),
                      f"too large for a {cm_bits}-bit multiplier")
    if c_m == 0:
        raise bad("q_scale*k_scale", float(q_scale) * float(k_scale),
                  "too small: the softmax multiplier underflows to zero")
    return ScaleParams(c_m=int(c_m), c_sh=int(sh))


def softmax_scale_rows(cfg: HardwareConfig, q_scales, k_scale: float,
                       head_dim: int) -> ScaleParams:
    """:func:`softmax_scale` for each query row's own scale (``q_scales``, one per row): the
    per-row multipliers as int64 arrays. Raises ConfigError as :func:`softmax_scale` does,
    naming the row."""
    qs = np.asarray(q_scales, dtype=np.float64).reshape(-1)
    cm = np.empty(len(qs), dtype=np.int64)
    sh = np.empty(len(qs), dtype=np.int64)
    memo: dict[float, ScaleParams] = {}
    for i, x in enumerate(qs.tolist()):
        sp = memo.get(x)
        if sp is None:
            try:
                sp = memo[x] = softmax_scale(cfg, x, k_scale, head_dim)
            except ConfigError as e:
                raise ConfigError(f"q_scale of row {i}: {e}") from None
        cm[i], sh[i] = sp.c_m, sp.c_sh
    return ScaleParams(cm, sh)


def key_factors(cfg: HardwareConfig, k_scales, ref: float,
                name: str = "k_scale") -> tuple[np.ndarray, np.ndarray]:
    """Per-key K scales as the hardware takes them: each key's factor ``sk_j / ref`` (at most
    1/2: ``ref`` is at least twice the largest scale) as a mantissa ``k_m`` in
    ``[2**(CM-1), 2**CM)`` of :data:`KEY_MANT_BITS` significant bits and an exponent
    ``k_e ≥ 0``, ``sk_j / ref = k_m·2**-(CM + k_e)`` (exact for the scales of
    :func:`quantize_keys`; other scales are rounded to nearest, a relative change of up to
    ``2**-KEY_MANT_BITS``: quantize K with those scales to keep the contract).

    Raises ConfigError for a scale that is not positive and finite, above ``ref/2`` or below
    ``ref·2**-64`` (naming the key)."""
    ks = np.asarray(k_scales, dtype=np.float64).reshape(-1)
    cmb = cfg.numerics.scale_mult_bits
    r = ks / ref
    ok = np.isfinite(ks) & (ks > 0) & (r <= 0.5) & (r >= 2.0 ** -64)
    if not ok.all():
        j = int(np.argmax(~ok))
        raise bad(f"{name} of key {j}", float(ks[j]),
                  f"must be positive, finite and within [ref·2**-64, ref/2] (ref = {ref:.6g})")
    return _key_mant_exp(r, cmb, np.rint)


def _key_mant_exp(r, cmb: int, rounding) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_mant_exp` with :data:`KEY_MANT_BITS` significant bits, placed at the top of a
    ``cmb``-bit ``k_m`` (the low bits zero)."""
    k_m, k_e = _mant_exp(r, KEY_MANT_BITS, rounding)
    return k_m << (cmb - KEY_MANT_BITS), k_e


def _mant_exp(r, cmb: int, rounding) -> tuple[np.ndarray, np.ndarray]:
    """``r`` in (0, 1/2] as ``k_m·2**-(CM + k_e)``: ``k_m`` in ``[2**(CM-1), 2**CM)`` by
    ``rounding`` (np.rint or np.ceil), ``k_e ≥ 0``; a mantissa rounded up to ``2**CM`` becomes
    ``2**(CM-1)`` with the exponent one less."""
    mant, ex = np.frexp(r)                      # r = mant·2**ex, mant in [0.5, 1)
    k_m = rounding(mant * (1 << cmb)).astype(np.int64)
    k_e = (-ex).astype(np.int64)
    top = k_m == (1 << cmb)
    k_m = np.where(top, 1 << (cmb - 1), k_m)
    k_e = np.where(top, k_e - 1, k_e)
    return k_m, k_e


def key_reference(k_scales, name: str = "k_scale") -> tuple[np.ndarray, float]:
    """Per-key K scales (any shape) checked positive and finite, and the reference the
    softmax multiplier folds in: twice the largest. Raises ConfigError naming the first bad
    key by its index."""
    ks = np.asarray(k_scales, dtype=np.float64)
    bad_k = ~(np.isfinite(ks) & (ks > 0))
    if ks.size == 0 or bad_k.any():
        at = tuple(int(x) for x in np.argwhere(bad_k)[0]) if ks.size else ()
        where = (f"{name} of key {at[2]} (batch {at[0]}, kv head {at[1]})" if len(at) >= 3
                 else f"{name} at {at}")
        raise bad(where, float(ks[at]) if ks.size else None, "must be a positive finite number")
    return ks, 2.0 * float(ks.max())


def with_key_scales(cfg: HardwareConfig, sp: ScaleParams, k_scales, ref: float) -> ScaleParams:
    """``sp`` with the per-key factors of ``k_scales`` against ``ref`` (:func:`key_factors`);
    refuses a key whose shift ``c_sh + k_e`` passes 62."""
    k_m, k_e = key_factors(cfg, k_scales, ref)
    worst = int(np.max(sp.c_sh)) + int(k_e.max(initial=0))
    if worst > SCALE_SHIFT_MAX:
        j = int(np.argmax(k_e))
        raise bad(f"k_scale of key {j}", f"exponent {int(k_e[j])}",
                  f"too small beside the others: the shift c_sh + k_e = {worst} passes "
                  f"{SCALE_SHIFT_MAX}")
    return dataclasses.replace(sp, k_m=k_m, k_e=k_e)


def with_value_scales(cfg: HardwareConfig, sp: ScaleParams, v_scales,
                      ref: float) -> ScaleParams:
    """``sp`` with per-key V factors ``v_scales / ref`` (:func:`key_factors`' format: a
    paged cache's ``value_scales``; the output is then in units of ``ref``)."""
    v_m, v_e = key_factors(cfg, v_scales, ref, "v_scale")
    return dataclasses.replace(sp, v_m=v_m, v_e=v_e)


def quantize(x, bits: int, scale: float | None = None,
             axis: int | None = None) -> tuple[np.ndarray, float | np.ndarray]:
    """Symmetric quantization: ``x ≈ xi · scale`` with ``|xi| ≤ 2**(bits-1) - 1``.

    ``scale`` defaults to ``max|x| / (2**(bits-1) - 1)`` (1.0 for an all-zero tensor): one
    per tensor, or with ``axis`` one per slice along it (an array that broadcasts against
    ``x``: ``axis=2`` of ``[b, h, n, d]`` gives a scale per head and channel; an all-zero slice
    gets 1.0). Values beyond the range saturate. Returns ``(xi as int64, scale)``.
    """
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise bad("x", "non-finite values", "quantize needs finite inputs")
    if not isinstance(bits, int) or not 2 <= bits <= 32:
        raise bad("bits", bits, "must be an integer in [2, 32]")
    qmax = (1 << (bits - 1)) - 1
    if scale is None and axis is not None:
        amax = np.abs(x).max(axis=axis, keepdims=True)
        scale = np.where(amax > 0, amax / qmax, 1.0)
    elif scale is None:
        amax = float(np.max(np.abs(x))) if x.size else 0.0
        scale = amax / qmax if amax > 0 else 1.0
    if not np.all(np.isfinite(scale) & (np.asarray(scale) > 0)):
        raise bad("scale", scale, "must be a positive finite number")
    xi = np.clip(np.rint(x / scale), -qmax - 1, qmax).astype(np.int64)
    return xi, (float(scale) if np.ndim(scale) == 0 else scale)


# smallest block factor quantize_keys uses: a block under ref·2**-(KEY_EXP_MAX+1) gets that
# scale anyway (its integers are small; the shift c_sh + k_e stays within 62)
KEY_EXP_MAX = 24


def quantize_keys(cfg: HardwareConfig, k, block: int) -> tuple[np.ndarray, np.ndarray]:
    """K ``[batch, kv_heads, seq_k, d]`` quantized with one scale per block of ``block`` keys
    (blocks aligned to key 0), each a scale the hardware represents exactly: ``ref·k_m·2**-(CM
    + k_e)`` with ``ref`` twice the largest block's ``max|K|/(2**(B−1)−1)``, ``k_m`` in
    ``[2**(CM-1), 2**CM)`` of :data:`KEY_MANT_BITS` significant bits, rounded up (so no element
    clips; the block's scale grows by at most ``2**(1-KEY_MANT_BITS)``), and
    ``0 ≤ k_e ≤ KEY_EXP_MAX``. An
    all-zero block gets ``ref/2`` (its integers are 0). Returns ``(ki, scales)``, ``scales`` of
    shape ``[batch, kv_heads, seq_k, 1]`` (one per key, equal within a block), as
    :func:`attention_int` takes them."""
    if not isinstance(block, (int, np.integer)) or isinstance(block, bool) or block < 1:
        raise bad("k_block", block, "must be a positive number of keys")
    k = np.asarray(k, dtype=np.float64)
    if k.ndim != 4:
        raise bad("k.shape", k.shape, "expected [batch, kv_heads, seq_k, head_dim]")
    if not np.all(np.isfinite(k)):
        raise bad("k", "non-finite values", "quantize needs finite inputs")
    b, hk, nk, d = k.shape
    qmax = (1 << (cfg.data_bits - 1)) - 1
    cmb = cfg.numerics.scale_mult_bits
    nb = -(-nk // block)
    pad = np.pad(np.abs(k), ((0, 0), (0, 0), (0, nb * block - nk), (0, 0)))
    amax = pad.reshape(b, hk, nb, block * d).max(axis=3) / qmax      # [b, hk, nb]
    top = float(amax.max(initial=0.0))
    ref = 2.0 * top if top > 0 else 2.0
    r = np.where(amax > 0, amax / ref, 0.5)
    k_m, k_e = _key_mant_exp(np.maximum(r, 2.0 ** -(KEY_EXP_MAX + 1)), cmb, np.ceil)
    blk = ref * k_m * np.exp2(-(k_e + cmb))
    per_key = np.repeat(blk, block, axis=2)[:, :, :nk, None]
    ki = np.clip(np.rint(k / per_key), -qmax - 1, qmax).astype(np.int64)
    return ki, per_key


def dequantize(xi, scale: float) -> np.ndarray:
    """``xi · scale`` as float64."""
    return np.asarray(xi, dtype=np.float64) * scale


def output_unit(sv, per_key: bool, group: int):
    """What the output integers are in units of, from V's scales ``sv``: the scale itself, per
    query head and channel where V has one per K/V head and channel (``group`` query heads a
    K/V head), twice the largest with one per key (``per_key``: :func:`key_reference`)."""
    if per_key:
        return key_reference(sv, "v_scale")[1]
    if isinstance(sv, np.ndarray):        # per K/V head and channel → per query head
        return np.repeat(sv, group, axis=1)
    return sv


def dequantize_output(cfg: HardwareConfig, out, v_scale: float) -> np.ndarray:
    """Real values of the accelerator's output: ``out · v_scale · 2**-OF``."""
    return np.asarray(out, dtype=np.float64) * (v_scale * 2.0 ** -cfg.numerics.out_frac_bits)


def check_int_tensor(name: str, x, shape: tuple[int, ...], bits: int) -> np.ndarray:
    """``x`` as int64, refused by name unless it is an integer array of ``shape`` within
    ``bits`` signed bits (the datapath's integers, :func:`quantize`'s output)."""
    arr = np.asarray(x)
    if arr.shape != shape:
        raise bad(f"{name}.shape", arr.shape, f"expected {shape} from the workload")
    if not np.issubdtype(arr.dtype, np.integer):
        raise bad(f"{name}.dtype", str(arr.dtype), "must be an integer array (use quantize())")
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise bad(name, f"values in [{arr.min()}, {arr.max()}]",
                  f"must lie in [{lo}, {hi}] for data_bits={bits}")
    return arr.astype(np.int64)


def scale_array(name: str, x, shape: tuple[int, ...]) -> np.ndarray:
    """Scales given one per row or key, ``shape + (1,)`` or ``shape``, as float64 ``shape``."""
    a = np.asarray(x, dtype=np.float64)
    if a.shape not in (shape + (1,), shape):
        raise bad(f"{name}.shape", a.shape, f"expected a scalar or {shape + (1,)}")
    return a.reshape(shape)


def unit_scale(sp: ScaleParams, wl, bi: int, hi: int, rq: slice, kbi: int, hki: int, rk,
                kn: int) -> ScaleParams:
    """A whole run's multipliers (flat per row ``[b·h·seq_q]``, per key ``[kb·hk·kn]``)
    narrowed to one head of one sequence: its rows and its keys."""
    rows = (bi * wl.heads + hi) * wl.seq_q + np.arange(rq.start, rq.stop)
    keys = (kbi * wl.kv_heads + hki) * kn + (np.arange(rk.start, rk.stop)
                                             if isinstance(rk, slice) else rk)
    return sp.take(rows).keys(keys)        # each is itself where the scale is one for all
