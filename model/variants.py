"""The integer model of what an attention variant adds to the datapath, bit-exact with the RTL
like the rest of :mod:`attenio.model.numerics` (which re-exports them): the soft-capping unit
(Gemma 2's ``c·tanh(s/c)``, hw/softmax.py) and the attention sinks' start of each row's
softmax (gpt-oss; the host works it out, the row's side word carries it), and ALiBi's bias
(a per-head slope times the query-key distance, subtracted after the scale and the cap; the
slope rides in the row's side words, the distance comes from the positions the mask uses)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attenio.base.config import SINK_M_BITS, HardwareConfig
from attenio.base.errors import bad
from attenio.contract.formats import (
    SCALE_SHIFT_MAX,
    SOFTCAP_SEG_LOG2,
    SOFTCAP_X_EXTRA,
    SOFTCAP_X_INT,
    SOFTCAP_Y_BITS,
)
from attenio.contract.tables import tanh_table
from attenio.model.scales import ScaleParams, softcap_cap, softcap_q_factor

__all__ = ["softcap", "capped", "check_sinks", "sink_state", "with_sinks", "check_alibi",
           "alibi_slopes_standard", "alibi_word", "alibi_bias", "alibi_biased", "with_alibi",
           "logit_floor"]


def softcap(cfg: HardwareConfig, x, cap: int) -> np.ndarray:
    """Soft-capping block: ``x`` (``x/2**XF = logit/c``, XF = F + ``SOFTCAP_X_EXTRA``) to the
    base-2 logit of ``c·tanh(logit/c)``: ``t = ±((y·T + 2**(Y−1)) >> Y)``, the sign of x,
    where ``T`` is the cap (``softcap_cap``) and ``y ≈ tanh|x|·2**Y`` is interpolated
    between the knots of :func:`~attenio.contract.tables.tanh_table` (``|x|`` of
    ``SOFTCAP_X_INT`` integer bits: the top ``SOFTCAP_SEG_LOG2`` bits pick the segment, the
    R below interpolate with round-half-up); ``|x| ≥ 2**SOFTCAP_X_INT`` takes the last knot.
    Odd (``softcap(−x) = −softcap(x)``), ``|t| ≤ T``; error bound in docs/numerics.md.
    Hardware: six pipeline stages (hw/softmax.py).
    """
    xf = cfg.numerics.logit_frac_bits + SOFTCAP_X_EXTRA
    rbits = xf + SOFTCAP_X_INT - SOFTCAP_SEG_LOG2
    lut = tanh_table()
    x = np.asarray(x, dtype=np.int64)
    a = np.abs(x)
    sat = a >= (np.int64(1) << (xf + SOFTCAP_X_INT))
    a = np.where(sat, 0, a)
    seg = (a >> rbits).astype(np.intp)
    r = a & ((np.int64(1) << rbits) - 1)
    y = lut[:-1].take(seg) + ((np.diff(lut).take(seg) * r + (np.int64(1) << (rbits - 1)))
                              >> rbits)
    y = np.where(sat, lut[-1], y)
    t = (y * np.int64(cap) + (np.int64(1) << (SOFTCAP_Y_BITS - 1))) >> SOFTCAP_Y_BITS
    return np.where(x < 0, -t, t)


def capped(cfg: HardwareConfig, q_scale, softcap: float | None):
    """Q's scale (a scalar, or one per row) and the cap ``T`` a soft-capped run's multipliers
    are worked out from: the scale times :func:`~attenio.model.scales.softcap_q_factor` (the
    score stage then makes ``x = logit/c``) and ``softcap_cap``; unchanged and ``None``
    without a cap. Raises ConfigError for a cap the hardware cannot apply."""
    if softcap is None:
        return q_scale, None
    return q_scale * softcap_q_factor(cfg, softcap), softcap_cap(cfg, softcap)


def _per_head(name: str, values, heads: int) -> np.ndarray:
    """``values`` (a number, or one per query head) as a flat float64 array of 1 or ``heads``
    values; ConfigError naming ``name`` otherwise."""
    try:
        a = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise bad(name, values, "a number or one number per query head") from None
    if a.size not in (1, heads):
        raise bad(name, f"{a.size} values", f"one for all heads or one per query head ({heads})")
    return a


def check_sinks(cfg: HardwareConfig, sinks, heads: int) -> np.ndarray | None:
    """``sinks`` (a number, or one per query head: FlashInfer's and gpt-oss's ``sinks``) as
    float64 ``[heads]``, or ``None`` for none. Raises ConfigError for a count that is neither
    1 nor ``heads``, a value that is not finite or whose running-max start does not fit the
    side word (``|sink| ≲ 354``), or a config without the sinks unit."""
    if sinks is None:
        return None
    a = _per_head("sinks", sinks, heads)
    if not np.isfinite(a).all():
        raise bad("sinks", sinks, "finite logits (a sink of -inf is no sink: leave it out)")
    if not cfg.sinks_unit:
        raise bad("sinks", sinks, "this config carries no sinks: take a preset's NAME+sinks "
                  "(e.g. fpga+sinks) or set sinks_unit = true")
    lim = ((1 << (SINK_M_BITS - 1)) - 1) / math.log2(math.e)
    if np.abs(a).max() >= lim:
        raise bad("sinks", float(a[np.abs(a).argmax()]),
                  f"|sink| < {lim:.4g} (its running-max start fits {SINK_M_BITS} signed bits)")
    return np.broadcast_to(a, (heads,)).copy()


def sink_state(cfg: HardwareConfig, sinks) -> tuple[np.ndarray, np.ndarray]:
    """Each sink's start of a row's softmax, what a key of logit ``sink`` leaves behind as a
    row's first key: the base-2 logit ``t = ⌊sink·log2(e)·2**F + ½⌋``, the running max
    ``m0 = t >> F`` and the row sum ``ℓ0 = exp2(t − m0·2**F)`` (E fraction bits, in
    ``[2**E, 2**(E+1))``). Int64 arrays shaped like ``sinks``."""
    from attenio.model.numerics import exp2_frac

    f = cfg.numerics.logit_frac_bits
    t = np.floor(np.asarray(sinks, dtype=np.float64) * math.log2(math.e) * 2.0 ** f
                 + 0.5).astype(np.int64)
    m0 = t >> f
    return m0, exp2_frac(cfg, t - (m0 << f)).astype(np.int64)


def _rowwise(sp: ScaleParams, rows: tuple[int, int, int]) -> ScaleParams:
    """``sp`` with one multiplier per Q row, flat over ``rows`` (the tensor's pair repeated:
    the same logits), as rows with side words carry them."""
    if sp.per_row:
        return sp
    return dataclasses.replace(sp, c_m=np.full(rows, sp.c_m, dtype=np.int64).ravel(),
                               c_sh=np.full(rows, sp.c_sh, dtype=np.int64).ravel())


def with_sinks(cfg: HardwareConfig, sp: ScaleParams, sinks, wl) -> ScaleParams:
    """A run's multipliers with its ``sinks`` (``[heads]``, checked): every Q row of ``wl``
    gets its own side word, so one pair for the tensor becomes one per row, flat over
    ``[batch, heads, seq_q]`` (the same numbers: the same logits), beside its head's sink's
    start (:func:`sink_state`). ``sp`` unchanged without sinks."""
    if sinks is None:
        return sp
    rows = (wl.batch, wl.heads, wl.seq_q)
    sp = _rowwise(sp, rows)
    m0, l0 = sink_state(cfg, sinks)
    return dataclasses.replace(
        sp, sink_m=np.broadcast_to(m0.reshape(1, -1, 1), rows).ravel(),
        sink_l=np.broadcast_to(l0.reshape(1, -1, 1), rows).ravel())


# ---- ALiBi ----

def alibi_slopes_standard(heads: int) -> np.ndarray:
    """The standard ALiBi slopes of ``heads`` query heads (Press et al., "Train Short, Test
    Long", ICLR 2022: the geometric sequence ``2**(−8i/n)``, i = 1 … n, for n a power of two;
    otherwise those of the power of two below, then every other one of twice that), float64
    ``[heads]``."""
    if isinstance(heads, bool) or not isinstance(heads, (int, np.integer)) or heads < 1:
        raise bad("heads", heads, "a positive number of query heads")

    def pow2(n):
        return [2.0 ** (-8.0 * (i + 1) / n) for i in range(n)]

    n = 1 << (int(heads).bit_length() - 1)
    out = pow2(n)
    if n < heads:
        out += pow2(2 * n)[0::2][:heads - n]
    return np.array(out, dtype=np.float64)


def check_alibi(cfg: HardwareConfig, slopes, heads: int) -> np.ndarray | None:
    """``slopes`` (a number, or one per query head: FlashAttention's ``alibi_slopes``) as
    float64 ``[heads]``, or ``None`` for none. Raises ConfigError for a count that is neither
    1 nor ``heads``, a slope that is negative or not finite, one too large for the slope's
    word (``slope·log2(e)·2**F < 2**scale_mult_bits``), or a config without the ALiBi
    unit."""
    if slopes is None:
        return None
    a = _per_head("alibi_slopes", slopes, heads)
    if not np.isfinite(a).all() or (a < 0).any():
        raise bad("alibi_slopes", slopes, "finite slopes ≥ 0 (the bias −slope·|i − j| "
                  "lowers a logit with its distance, as FlashAttention's alibi_slopes)")
    if not cfg.alibi_unit:
        raise bad("alibi_slopes", slopes, "this config has no ALiBi unit: take a preset's "
                  "NAME+alibi (e.g. fpga+alibi) or set alibi_unit = true")
    lim = ((1 << cfg.numerics.scale_mult_bits) - 0.5) / (
        math.log2(math.e) * 2.0 ** cfg.numerics.logit_frac_bits)
    if a.max() >= lim:
        raise bad("alibi_slopes", float(a.max()), f"slopes < {lim:.4g} (the slope's word "
                  f"holds slope·log2(e)·2**F in {cfg.numerics.scale_mult_bits} bits)")
    return np.broadcast_to(a, (heads,)).copy()


def alibi_word(cfg: HardwareConfig, slopes) -> tuple[np.ndarray, np.ndarray]:
    """Each slope as the hardware carries it, a scale word: ``alibi_m / 2**alibi_sh ≈
    slope·log2(e)·2**F`` (the bias of one unit of distance in logit LSBs) with ``alibi_m``
    normalized into ``[2**(CM−1), 2**CM)`` (relative error ≤ ``2**−CM``) and the shift at most
    ``SCALE_SHIFT_MAX``; a slope of 0 (or below the word's resolution) is ``(0, 0)``.
    Int64 arrays shaped like ``slopes`` (checked: :func:`check_alibi`)."""
    n = cfg.numerics
    cm = n.scale_mult_bits
    c = np.asarray(slopes, dtype=np.float64) * math.log2(math.e) * 2.0 ** n.logit_frac_bits
    with np.errstate(divide="ignore"):
        sh = np.where(c > 0, cm - 1 - np.floor(np.log2(np.where(c > 0, c, 1.0))), 0)
    sh = np.clip(sh, 0, SCALE_SHIFT_MAX).astype(np.int64)
    m = np.floor(c * 2.0 ** sh + 0.5).astype(np.int64)
    over = m >= (1 << cm)                 # rounding carried into a new bit
    m = np.where(over & (sh > 0), (m + 1) >> 1, m)
    sh = np.where(over & (sh > 0), sh - 1, sh)
    m = np.minimum(m, (1 << cm) - 1)
    return m, np.where(m > 0, sh, 0)


def alibi_bias(alibi_m, alibi_sh, rel) -> np.ndarray:
    """ALiBi's bias magnitude of a distance ``rel`` (``|i + diag − j|``, ≥ 0) in logit LSBs:
    ``(alibi_m·rel + 2**(alibi_sh−1)) >> alibi_sh`` (round half up; 0 for a 0 slope), the
    amount the unit subtracts. Int64, broadcast."""
    am = np.asarray(alibi_m, dtype=np.int64)
    sh = np.asarray(alibi_sh, dtype=np.int64)
    return (am * np.asarray(rel, dtype=np.int64) + ((np.int64(1) << sh) >> 1)) >> sh


def logit_floor(cfg: HardwareConfig) -> int:
    """The lowest logit the datapath holds, ``−2**(logit_bits−1)``: a biased logit below it
    saturates there (its key's weight is 0 unless every key of its row is as far: see
    docs/numerics.md, "ALiBi")."""
    return -(1 << (cfg.logit_bits - 1))


def alibi_biased(cfg: HardwareConfig, t, sp: ScaleParams, rows, keys, diag: int):
    """The logits ``t`` (rows × keys, after the scale and the cap) less ALiBi's bias of row
    ``rows[r]`` and key ``keys[c]`` (positions in their sequence, ``diag = seq_k − seq_q``),
    saturated at :func:`logit_floor`; ``t`` unchanged without ALiBi (``sp.alibi_m``)."""
    if sp.alibi_m is None:
        return t
    am, ash = np.asarray(sp.alibi_m, dtype=np.int64), np.asarray(sp.alibi_sh, dtype=np.int64)
    if am.ndim:
        am, ash = am[:, None], ash[:, None]
    rel = np.abs(np.asarray(rows, dtype=np.int64)[:, None] + diag
                 - np.asarray(keys, dtype=np.int64)[None, :])
    return np.maximum(np.asarray(t, dtype=np.int64) - alibi_bias(am, ash, rel),
                      logit_floor(cfg))


def with_alibi(cfg: HardwareConfig, sp: ScaleParams, slopes, wl) -> ScaleParams:
    """A run's multipliers with ALiBi's ``slopes`` (``[heads]``, checked): every Q row of
    ``wl`` gets its own side words (as with sinks), each with its head's slope's word
    (:func:`alibi_word`) and its position in its sequence, flat over ``[batch, heads,
    seq_q]``. ``sp`` unchanged without."""
    if slopes is None:
        return sp
    rows = (wl.batch, wl.heads, wl.seq_q)
    sp = _rowwise(sp, rows)
    am, ash = alibi_word(cfg, slopes)
    pos = np.zeros(wl.seq_q, dtype=np.int64)
    for seg in wl.segments():
        pos[seg.rows] = np.arange(seg.seq_q)
    return dataclasses.replace(
        sp, alibi_m=np.broadcast_to(am.reshape(1, -1, 1), rows).ravel(),
        alibi_sh=np.broadcast_to(ash.reshape(1, -1, 1), rows).ravel(),
        alibi_pos=np.broadcast_to(pos.reshape(1, 1, -1), rows).ravel())
