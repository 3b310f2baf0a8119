"""The golden check, stated once: quantize float inputs, run the bit-exact integer model, and
compare it with float64 attention of the same quantized inputs under the accuracy contract
(docs/numerics.md). The CLI's ``golden`` command, the RTL runner and the board self-test all
use these functions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from attenio.config import HardwareConfig, Workload
from attenio.model import numerics as nm
from attenio.model import reference as ref

__all__ = ["MAX_REL_BOUND", "MEAN_REL_BOUND", "GoldenInputs", "quantized_inputs",
           "golden_output", "error_vs_float", "within_bounds", "golden_check"]

# the accuracy contract: error against float64 attention of the quantized inputs, as a
# fraction of V's range
MAX_REL_BOUND = 1e-3
MEAN_REL_BOUND = 1e-4


@dataclass(frozen=True)
class GoldenInputs:
    """Quantized Q, K, V (integers) and their scales: per tensor, or for Q one per row
    (``sq`` of shape ``[batch, heads, seq_q, 1]``, carried with the Q rows: ``row_scales``)
    and for K one per key (``sk`` of shape ``[batch, kv_heads, seq_k, 1]``, equal within a
    block, carried with the K rows: ``key_scales``)."""

    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    sq: float | np.ndarray
    sk: float | np.ndarray
    sv: float


def quantized_inputs(hw: HardwareConfig, wl: Workload, dist: str = "gaussian",
                     seed: int = 0, q_rows: bool = False,
                     k_block: int | None = None) -> GoldenInputs:
    """Random Q, K, V of ``wl`` (``dist``, ``seed``) quantized to ``hw.data_bits`` per tensor,
    or with ``q_rows`` Q per row, with ``k_block`` K per block of that many keys
    (:func:`numerics.quantize_keys`).

    Raises ConfigError for a workload the hardware cannot run or an unknown ``dist``.
    """
    hw.check_workload(wl)
    q, k, v = ref.random_inputs(wl, dist, seed)
    qi, sq = nm.quantize(q, hw.data_bits, axis=3 if q_rows else None)
    (ki, sk), (vi, sv) = (nm.quantize(x, hw.data_bits) for x in (k, v))
    if k_block is not None:
        ki, sk = nm.quantize_keys(hw, k, k_block)
    return GoldenInputs(qi, ki, vi, sq, sk, sv)


def golden_output(hw: HardwareConfig, wl: Workload, inp: GoldenInputs, *,
                  stepwise: bool = False, progress=None) -> np.ndarray:
    """The integer model's output: what the accelerator must write, bit for bit."""
    return nm.attention_int(hw, wl, inp.q, inp.k, inp.v, inp.sq, inp.sk, stepwise=stepwise,
                            progress=progress)


def error_vs_float(hw: HardwareConfig, wl: Workload, out: np.ndarray,
                   inp: GoldenInputs) -> dict:
    """Error of the integer output ``out`` against float64 attention of the quantized inputs
    (``max_abs``, ``max_rel``, ``mean_rel`` … as :func:`reference.error_metrics`)."""
    exact = ref.attention_of(wl, inp.q * inp.sq, inp.k * inp.sk, inp.v * inp.sv)
    return ref.error_metrics(nm.dequantize_output(hw, out, inp.sv), exact, inp.v * inp.sv)


def within_bounds(metrics: dict) -> bool:
    """The metrics meet the accuracy contract."""
    return (metrics.get("max_rel", 1.0) <= MAX_REL_BOUND
            and metrics.get("mean_rel", 1.0) <= MEAN_REL_BOUND)


def golden_check(hw: HardwareConfig, wl: Workload, dist: str = "gaussian", seed: int = 0,
                 stepwise: bool = False, progress=None) -> dict:
    """The whole sequence on random inputs: the metrics, the two models' times (``t_int``,
    ``t_ref``), the softmax ``scale`` and ``ok`` (within the bounds)."""
    inp = quantized_inputs(hw, wl, dist, seed)
    t0 = time.perf_counter()
    out = golden_output(hw, wl, inp, stepwise=stepwise, progress=progress)
    t_int = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = error_vs_float(hw, wl, out, inp)
    t_ref = time.perf_counter() - t0
    m.update(t_int=t_int, t_ref=t_ref, scale=nm.softmax_scale(hw, inp.sq, inp.sk, wl.head_dim),
             ok=within_bounds(m))
    return m
