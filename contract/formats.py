"""Numeric limits and word formats the hardware and the host share: the shift caps, the scale
word that follows a Q row (its multiplier) or a K row (its factor) in DRAM, and the statistics
word that follows an O row with ``lse``.

The integer model, the host image, the RTL's layouts and the program's validation read these;
none restates them.
"""

from __future__ import annotations

import numpy as np

from attenio.base.config import KEY_MANT_BITS, SCALE_EXP_BITS, SINK_M_BITS, HardwareConfig

__all__ = ["MAX_SHIFT", "SHIFT_BITS", "SCALE_SHIFT_MAX", "SCALE_EXP_BITS", "KEY_MANT_BITS",
           "SOFTCAP_X_EXTRA", "SOFTCAP_X_INT", "SOFTCAP_SEG_LOG2", "SOFTCAP_Y_BITS",
           "SOFTCAP_CAP_BITS", "SINK_M_BITS",
           "scale_word", "scale_word_bytes", "factor_slot", "sink_word_bytes", "side_word_bytes",
           "pack_fields", "stats_word_bytes", "stats_of_words"]

# The largest shift any rescale of ℓ and O applies. ℓ and O are at most 53 bits wide (config),
# so a shift of 62 already clears them (or leaves -1 for a negative O, as a hardware arithmetic
# shifter saturated at its width does); it also keeps int64 shifts well defined.
MAX_SHIFT = 62
# the shift's field (the P buffer, the P V stage): 6 bits hold 0 … MAX_SHIFT
SHIFT_BITS = MAX_SHIFT.bit_length()
# The softmax multiplier's shift c_sh (and c_sh + k_e with per-key factors): a 6-bit field,
# capped so the rounding constant 2**(sh-1) fits int64.
SCALE_SHIFT_MAX = 62
assert SCALE_SHIFT_MAX < 1 << SCALE_EXP_BITS

# Logit soft-capping (docs/numerics.md, "Soft-capping"): with the cap on, the score stage's
# multiplier makes x = logit/c with logit_frac_bits + SOFTCAP_X_EXTRA fraction bits (the
# same multiply, another factor), the soft-capping unit takes tanh|x| from a piecewise-linear
# table over [0, 2**SOFTCAP_X_INT) in 2**SOFTCAP_SEG_LOG2 segments (the last knot beyond), in
# SOFTCAP_Y_BITS fraction bits, and multiplies it by the cap T = round(c·log2(e)·2**F), a
# COMPUTE field of SOFTCAP_CAP_BITS: t = ±round(T·tanh|x|), the base-2 logit of c·tanh(logit/c).
SOFTCAP_X_EXTRA = 6
SOFTCAP_X_INT = 3
SOFTCAP_SEG_LOG2 = 10
SOFTCAP_Y_BITS = 20
SOFTCAP_CAP_BITS = 24


def scale_word(hw: HardwareConfig, mant, exp):
    """The scale word of mantissa ``mant`` (``c_m`` or ``k_m``, the low ``scale_mult_bits``
    bits) and exponent ``exp`` (``c_sh`` or ``k_e``, the :data:`SCALE_EXP_BITS` above): an
    ``int`` for integers, ``uint64`` for arrays (docs/isa.md, ``LOAD_Q.row_scales``,
    ``LOAD_KV.key_scales``)."""
    cm = hw.numerics.scale_mult_bits
    if isinstance(mant, (int, np.integer)) and isinstance(exp, (int, np.integer)):
        return int(mant) | int(exp) << cm
    return (np.asarray(mant, dtype=np.uint64)
            | (np.asarray(exp, dtype=np.uint64) << np.uint64(cm)))


def factor_slot(hw: HardwareConfig, k_m, k_e) -> np.ndarray:
    """A paged cache's K factors as their slots (``uint16``; docs/isa.md, "Paged K/V"): the
    mantissa's top :data:`KEY_MANT_BITS` (the datapath reads no others), then ``k_e``'s
    :data:`SCALE_EXP_BITS`."""
    k_hi = np.asarray(k_m, dtype=np.uint64) >> np.uint64(hw.numerics.scale_mult_bits
                                                          - KEY_MANT_BITS)
    return (k_hi | np.asarray(k_e, dtype=np.uint64) << np.uint64(KEY_MANT_BITS)).astype("<u2")


def scale_word_bytes(hw: HardwareConfig, mant, exp, shape: tuple[int, ...]) -> np.ndarray:
    """:func:`scale_word` of arrays as the bytes of a DRAM word of ``macs_per_line`` elements,
    shaped ``shape + (word bytes,)``."""
    nb = hw.macs_per_line * hw.element_bytes
    words = scale_word(hw, np.asarray(mant), np.asarray(exp)).astype("<u8").reshape(shape)
    raw = words.view(np.uint8).reshape(*shape, 8)
    return np.pad(raw, [(0, 0)] * len(shape) + [(0, max(0, nb - 8))])[..., :nb]


def sink_word_bytes(hw: HardwareConfig, c_m, c_sh, sink_m, sink_l,
                    shape: tuple[int, ...]) -> np.ndarray:
    """A Q row's side words with a sink (``LOAD_Q.sinks``): :func:`side_word_bytes` with the
    sink's fields and no ALiBi slope."""
    return side_word_bytes(hw, c_m, c_sh, shape, sink_m=sink_m, sink_l=sink_l)


def side_word_bytes(hw: HardwareConfig, c_m, c_sh, shape: tuple[int, ...], *, sink_m=None,
                    sink_l=None, alibi_m=None, alibi_sh=None, alibi_pos=None) -> np.ndarray:
    """A Q row's full side words (``LOAD_Q.sinks`` or ``LOAD_Q.alibi``), from bit 0: the
    multiplier's scale word (:attr:`~HardwareConfig.scale_word_bits`); with ``sinks_unit``
    the sink's running-max start ``sink_m`` (two's complement, :data:`SINK_M_BITS`) and its
    row-sum start ``sink_l`` (``exp_bits``), 0 where ``None``; with ``alibi_unit`` the ALiBi
    slope's scale word (``alibi_m`` in the low ``scale_mult_bits``, ``alibi_sh`` above) and
    the row's position in its sequence ``alibi_pos`` (``max_seq_len``'s bit length), 0 where
    ``None``. As the bytes of ``hw.q_side_words(True, True)`` words, shaped ``shape +
    (bytes,)``; fields broadcast to ``shape``."""
    cm = hw.numerics.scale_mult_bits
    fields = [(c_m, cm), (c_sh, SCALE_EXP_BITS)]
    if hw.sinks_unit:
        fields += [(0 if sink_m is None else sink_m, SINK_M_BITS),
                   (0 if sink_l is None else sink_l, hw.exp_bits)]
    if hw.alibi_unit:
        fields += [(0 if alibi_m is None else alibi_m, cm),
                   (0 if alibi_sh is None else alibi_sh, SCALE_EXP_BITS),
                   (0 if alibi_pos is None else alibi_pos, hw.position_bits)]
    nb = hw.q_side_words(True, True) * hw.macs_per_line * hw.element_bytes
    return pack_fields(fields, shape, nb)


def pack_fields(fields, shape: tuple[int, ...], nbytes: int) -> np.ndarray:
    """Integer fields ``[(values, bits), …]`` (each broadcast to ``shape``; a negative value
    as its two's complement) packed from bit 0 in order, little-endian, into ``nbytes``
    bytes each: ``shape + (nbytes,)`` uint8 (a field of ``prod(shape)`` values is taken
    flat). Any total width (the side words may pass 64 bits)."""
    n = int(np.prod(shape, dtype=np.int64))
    cols = []
    for val, width in fields:
        v = np.asarray(val, dtype=np.int64)
        v = v.reshape(-1) if v.size == n else np.broadcast_to(v, shape).reshape(-1)
        raw = v.astype("<i8").view(np.uint8).reshape(n, 8)
        cols.append(np.unpackbits(raw, axis=1, bitorder="little")[:, :width])
    bits = np.concatenate(cols, axis=1) if cols else np.zeros((n, 0), dtype=np.uint8)
    if bits.shape[1] > 8 * nbytes:
        raise ValueError(f"{bits.shape[1]} bits of fields do not fit {nbytes} bytes")
    bits = np.pad(bits, ((0, 0), (0, 8 * nbytes - bits.shape[1])))
    return np.packbits(bits, axis=1, bitorder="little").reshape(*shape, nbytes)


def _stats_halves(hw: HardwareConfig) -> tuple[int, int]:
    """Bytes of an output word and of each half of a statistics word."""
    hb = hw.stats_half_bits // 8
    return 2 * hb, hb


def stats_word_bytes(hw: HardwareConfig, m, l) -> np.ndarray:
    """The statistics word after an O row (``lse``): the row sum ``ℓ`` in the low half of the
    output word (unsigned), the running max ``m`` in the high half (two's complement, sign
    extended); arrays ``m``, ``l`` of one shape as bytes ``shape + (word bytes,)``
    (docs/isa.md, ``STORE_O.lse``)."""
    nb, hb = _stats_halves(hw)
    m, l = np.asarray(m, dtype=np.int64), np.asarray(l, dtype=np.int64)
    out = np.zeros(m.shape + (nb,), dtype=np.uint8)
    k = min(8, hb)
    lo = l.astype("<u8").view(np.uint8).reshape(m.shape + (8,))
    hi = m.astype("<i8").view(np.uint8).reshape(m.shape + (8,))
    out[..., :k] = lo[..., :k]
    out[..., hb:hb + k] = hi[..., :k]
    if hb > 8:                               # the sign of m fills the rest of its half
        out[..., hb + 8:] = np.where(m < 0, 0xFF, 0)[..., None].astype(np.uint8)
    return out


def stats_of_words(hw: HardwareConfig, raw) -> tuple[np.ndarray, np.ndarray]:
    """``(m, l)`` of statistics words given as bytes ``(..., word bytes)``: the inverse of
    :func:`stats_word_bytes`."""
    nb, hb = _stats_halves(hw)
    raw = np.asarray(raw, dtype=np.uint8)
    k = min(8, hb)
    pad = [(0, 0)] * (raw.ndim - 1) + [(0, 8 - k)]
    lo = np.pad(raw[..., :k], pad).copy().view("<u8")[..., 0].astype(np.int64)
    hi = np.pad(raw[..., hb:hb + k], pad).copy().view("<u8")[..., 0].astype(np.int64)
    if k < 8:                                # sign-extend m from its k bytes
        hi = np.where(hi >= 1 << (8 * k - 1), hi - (1 << (8 * k)), hi)
    return hi, lo
