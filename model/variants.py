"""The integer model of the blocks an attention variant adds to the score path, bit-exact
with the RTL like the rest of :mod:`attenio.model.numerics` (which re-exports them): the
soft-capping unit (Gemma 2's ``c·tanh(s/c)``, hw/softmax.py)."""

from __future__ import annotations

import numpy as np

from attenio.base.config import HardwareConfig
from attenio.contract.formats import (
    SOFTCAP_SEG_LOG2,
    SOFTCAP_X_EXTRA,
    SOFTCAP_X_INT,
    SOFTCAP_Y_BITS,
)
from attenio.contract.tables import tanh_table
from attenio.model.scales import softcap_cap, softcap_q_factor

__all__ = ["softcap", "capped"]


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
