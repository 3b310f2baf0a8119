"""The integer model of what an attention variant adds to the datapath, bit-exact with the RTL
like the rest of :mod:`attenio.model.numerics` (which re-exports them): the soft-capping unit
(Gemma 2's ``c·tanh(s/c)``, hw/softmax.py) and the attention sinks' start of each row's
softmax (gpt-oss; the host works it out, the row's side word carries it)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from attenio.base.config import SINK_M_BITS, HardwareConfig
from attenio.base.errors import bad
from attenio.contract.formats import (
    SOFTCAP_SEG_LOG2,
    SOFTCAP_X_EXTRA,
    SOFTCAP_X_INT,
    SOFTCAP_Y_BITS,
)
from attenio.contract.tables import tanh_table
from attenio.model.scales import ScaleParams, softcap_cap, softcap_q_factor

__all__ = ["softcap", "capped", "check_sinks", "sink_state", "with_sinks"]


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


def check_sinks(cfg: HardwareConfig, sinks, heads: int) -> np.ndarray | None:
    """``sinks`` (a number, or one per query head: FlashInfer's and gpt-oss's ``sinks``) as
    float64 ``[heads]``, or ``None`` for none. Raises ConfigError for a count that is neither
    1 nor ``heads``, a value that is not finite or whose running-max start does not fit the
    side word (``|sink| ≲ 354``), or a config without the sinks unit."""
    if sinks is None:
        return None
    try:
        a = np.asarray(sinks, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise bad("sinks", sinks, "a number or one number per query head") from None
    if a.size not in (1, heads):
        raise bad("sinks", f"{a.size} values", f"one for all heads or one per query head "
                  f"({heads})")
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


def with_sinks(cfg: HardwareConfig, sp: ScaleParams, sinks, wl) -> ScaleParams:
    """A run's multipliers with its ``sinks`` (``[heads]``, checked): every Q row of ``wl``
    gets its own side word, so one pair for the tensor becomes one per row, flat over
    ``[batch, heads, seq_q]`` (the same numbers: the same logits), beside its head's sink's
    start (:func:`sink_state`). ``sp`` unchanged without sinks."""
    if sinks is None:
        return sp
    rows = (wl.batch, wl.heads, wl.seq_q)
    if not sp.per_row:
        sp = dataclasses.replace(sp, c_m=np.full(rows, sp.c_m, dtype=np.int64).ravel(),
                                 c_sh=np.full(rows, sp.c_sh, dtype=np.int64).ravel())
    m0, l0 = sink_state(cfg, sinks)
    return dataclasses.replace(
        sp, sink_m=np.broadcast_to(m0.reshape(1, -1, 1), rows).ravel(),
        sink_l=np.broadcast_to(l0.reshape(1, -1, 1), rows).ravel())
