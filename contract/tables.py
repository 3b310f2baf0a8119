"""The ROM tables the hardware and the integer model share: the exp2 unit's knots and the
reciprocal's seeds (docs/numerics.md derives both). The RTL loads them into its ROMs and the
model interpolates from them, so both compute from the same integers."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from attenio.base.config import Numerics
from attenio.contract.formats import SOFTCAP_SEG_LOG2, SOFTCAP_X_INT, SOFTCAP_Y_BITS

__all__ = ["exp_table", "recip_table", "tanh_table"]


@lru_cache(maxsize=16)
def exp_table(n: Numerics) -> np.ndarray:
    """The exp2 unit's table: ``round(2**(k/S + PF))`` for k = 0..S (S segments, S+1 knots).

    The last knot is exactly ``2**(PF+1)``; the hardware stores each base and the difference to
    the next knot (the slope).
    """
    segs = 1 << n.exp_segments_log2
    k = np.arange(segs + 1, dtype=np.float64)
    return np.rint(np.exp2(k / segs + n.exp_frac_bits)).astype(np.int64)


@lru_cache(maxsize=16)
def recip_table(n: Numerics) -> np.ndarray:
    """Reciprocal seeds: ``round(2**RF · 2 / (lo + hi))`` for each of the table's mantissa
    intervals ``[lo, hi)`` of [1, 2): the value that balances the seed's error at both ends."""
    size = 1 << n.recip_seed_log2
    k = np.arange(size, dtype=np.float64)
    return np.rint(2.0 ** (n.recip_frac_bits + 1) / (2.0 + (2.0 * k + 1.0) / size)).astype(np.int64)


@lru_cache(maxsize=1)
def tanh_table() -> np.ndarray:
    """The soft-capping unit's table: ``round(tanh(k·2**(XI − S)) · 2**Y)`` for k = 0..2**S
    (2**S segments over ``[0, 2**XI)``, XI = ``SOFTCAP_X_INT``, S = ``SOFTCAP_SEG_LOG2``, Y =
    ``SOFTCAP_Y_BITS``); the last knot is also the value of every ``|x| ≥ 2**XI``."""
    k = np.arange((1 << SOFTCAP_SEG_LOG2) + 1, dtype=np.float64)
    return np.rint(np.tanh(k * 2.0 ** (SOFTCAP_X_INT - SOFTCAP_SEG_LOG2))
                   * 2.0 ** SOFTCAP_Y_BITS).astype(np.int64)
