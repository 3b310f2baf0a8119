"""The finalize unit's blocks of the integer datapath (:mod:`attenio.model.numerics` composes
them): the reciprocal of a row's sum ℓ and the output ``O / ℓ`` it scales, bit-exact with
hw/reciprocal.py and hw/finalize.py."""

from __future__ import annotations

import numpy as np

from attenio.base.config import HardwareConfig
from attenio.contract.tables import recip_table

__all__ = ["reciprocal", "finalize"]


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values (0 for 0), exact for all int64 values."""
    x = np.asarray(x, dtype=np.int64)
    out = np.zeros(x.shape, dtype=np.int64)
    work = x.copy()
    for step in (32, 16, 8, 4, 2, 1):
        big = work >= (np.int64(1) << step)
        out += np.where(big, step, 0)
        work = np.where(big, work >> step, work)
    return out + (work > 0)


def reciprocal(cfg: HardwareConfig, l):
    """Reciprocal block: ``1/ℓ ≈ r · 2**-(RF + e)`` for ℓ ≥ 1.

    ``e = floor(log2 ℓ)`` (a leading-one detector); the mantissa ``mn`` is ℓ normalized to
    ``[2**RF, 2**(RF+1))`` (truncated); a table seed ``r0`` indexed by the mantissa's top bits is
    refined by one Newton–Raphson step ``r = r0·(2 - mn·r0)`` with truncating shifts.

    Returns ``(r, e)`` as int64 arrays; ``r`` has ``recip_bits`` = RF+1 bits. For ℓ = 0 (a row
    with no visible key) returns ``r = 0``.
    """
    n = cfg.numerics
    rf = n.recip_frac_bits
    l = np.asarray(l, dtype=np.int64)
    e = np.maximum(_bit_length(l) - 1, 0)
    up = np.maximum(rf - e, 0)
    down = np.maximum(e - rf, 0)
    mn = (l << up) >> down
    idx = (mn >> (rf - n.recip_seed_log2)) - (1 << n.recip_seed_log2)
    idx = np.clip(idx, 0, (1 << n.recip_seed_log2) - 1)  # only ℓ = 0 falls outside
    r0 = recip_table(n)[idx]
    xr = (mn * r0) >> rf
    r = (r0 * ((2 << rf) - xr)) >> rf
    return np.where(l > 0, r, 0), e


def finalize(cfg: HardwareConfig, o, l) -> np.ndarray:
    """Finalize block: ``out = round(O / ℓ · 2**OF)``, saturated to ``out_bits`` signed.

    O is first shifted right by ``s = max(e - G, 0)`` so the multiplier is ``G + B + 1`` by
    ``RF + 1`` bits however long the sequence; then ``out = (O' · r + half) >> (RF + e - s - OF)``.
    Rows with ℓ = 0 (no visible key) give 0.
    """
    n = cfg.numerics
    o = np.asarray(o, dtype=np.int64)
    r, e = reciprocal(cfg, l)
    s = np.maximum(e - n.finalize_guard_bits, 0)
    k = n.recip_frac_bits + e - s - n.out_frac_bits  # ≥ 1 since G > OF
    op = o >> s[..., None]
    k2 = k[..., None]
    out = (op * r[..., None] + (np.int64(1) << (k2 - 1))) >> k2
    lim = 1 << (cfg.out_bits - 1)
    out = np.clip(out, -lim, lim - 1)
    return np.where((np.asarray(l) > 0)[..., None], out, 0)
