"""The ECP5 block RAM's geometry, which the RTL's O banks (``HardwareConfig.obuf_slices``)
and the FPGA resource model (sim/cost.py) share."""

from __future__ import annotations

from attenio.base.config import HardwareConfig

__all__ = ["DP16KD_SHAPES", "dp16kd_shape", "obuf_slice_bits"]

# the (depth, width) shapes of a DP16KD block RAM that yosys's ECP5 mapping uses
DP16KD_SHAPES = ((16384, 1), (8192, 2), (4096, 4), (2048, 9), (1024, 18), (512, 36))


def dp16kd_shape(depth: int, width: int) -> tuple[int, int]:
    """The DP16KD shape that holds a ``depth × width`` memory in the fewest blocks."""
    return min(DP16KD_SHAPES, key=lambda s: -(-depth // s[0]) * -(-width // s[1]))


def obuf_slice_bits(hw: HardwareConfig) -> int:
    """Bits of one memory of an O bank: the bank's whole word (``macs_per_line`` ×
    ``acc_bits``), or with ``obuf_slices`` the width of :func:`dp16kd_shape` for the bank
    (one block RAM wide: the same blocks as the whole word, fpga: 19 memories of 18 bits)."""
    width = hw.macs_per_line * hw.acc_bits
    if not hw.obuf_slices:
        return width
    return dp16kd_shape(hw.row_groups * hw.words_per_row, width)[1]
