"""The golden check, stated once: quantize float inputs, run the bit-exact integer model, and
compare it with float64 attention of the same quantized inputs under the accuracy contract
(docs/numerics.md). The CLI's ``golden`` command, the RTL runner and the board self-test all
use these functions.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass

import numpy as np

from attenio.base.blocktable import BlockTable
from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import bad
from attenio.model import numerics as nm
from attenio.model import reference as ref
from attenio.model.scales import output_unit
from attenio.model.variants import check_alibi, with_alibi, with_sinks

__all__ = ["MAX_REL_BOUND", "MEAN_REL_BOUND", "GoldenInputs", "quantized_inputs",
           "multipliers", "golden_output", "error_vs_float", "logit_sigma", "within_bounds",
           "golden_check"]

# the accuracy contract: error against float64 attention of the quantized inputs, as a
# fraction of V's range
MAX_REL_BOUND = 1e-3
MEAN_REL_BOUND = 1e-4
# the log-sum-exp of a row's statistics (lse) against float64's: |Δ| ≤ this · (1 + |lse|)
# (the logits' rounding, 2^-15 in log2 units, plus the 16-bit multiplier's relative 2^-16 of
# the largest logit; measured ≤ 6.4e-5 on every class and preset, docs/numerics.md)
LSE_REL_BOUND = 2e-4


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
    sv: float | np.ndarray      # per tensor, or per K/V head and channel [b, hk, 1, d]
    # a paged cache as it lies: K, V (and per-key K scales) are the pool's rows, ``[1,
    # kv_heads, pages · page_size, d]``, and sequence i's keys are ``table.key_rows(i)``
    table: BlockTable | None = None
    # logit soft-capping: the cap c (logits c·tanh(logit/c)), or None
    softcap: float | None = None
    # attention sinks: one logit per query head (float64 [heads]), or None
    sinks: np.ndarray | None = None
    # ALiBi: one slope per query head (float64 [heads]), or None
    alibi_slopes: np.ndarray | None = None
    # V with one scale per key (``sv`` ``[batch, kv_heads, seq_k, 1]``, quantize_keys' scales,
    # carried in the V pages: ``value_scales``); the output is in units of twice the largest
    v_keys: bool = False

    def out_scale(self, wl: Workload):
        """What the output integers are in units of: V's scale, per query head and channel
        when V has one per K/V head and channel, twice the largest with ``v_keys``."""
        return output_unit(self.sv, self.v_keys, wl.heads // wl.kv_heads)

    def gathered(self, wl: Workload) -> GoldenInputs:
        """These inputs with a paged cache's keys gathered into the workload's own K/V
        tensors (``[batch, kv_heads, seq_k, ·]``): what the float64 reference reads (the
        integer model reads the pages where they lie)."""
        if self.table is None:
            return self
        t = self.table

        def gather(x):
            if np.ndim(x) == 0:
                return x                 # one scale for the tensor
            out = np.zeros((wl.batch, wl.kv_heads, wl.seq_k, x.shape[3]), dtype=x.dtype)
            for i, seg in enumerate(wl.segments()):
                out[seg.batch, :, seg.keys] = x[0][:, t.key_rows(i)]
            return out

        return dataclasses.replace(self, k=gather(self.k), v=gather(self.v), sk=gather(self.sk),
                                   sv=gather(self.sv) if self.v_keys else self.sv, table=None)


def quantized_inputs(hw: HardwareConfig, wl: Workload, dist: str = "gaussian",
                     seed: int = 0, q_rows: bool = False, k_block: int | None = None,
                     scheme: str = "tensor", floats=None,
                     sigma: float | None = None, table: BlockTable | None = None,
                     checked: bool = False,
                     softmax_scale: float | None = None,
                     softcap: float | None = None, sinks=None,
                     alibi_slopes=None, v_keys: bool = False) -> GoldenInputs:
    """Float Q, K, V of ``wl`` quantized to ``hw.data_bits`` the way the host does it: the
    built-in class ``dist`` with ``seed`` (:data:`accuracy.DISTRIBUTIONS`: ``gaussian``,
    ``uniform``, ``llm-outliers``, ``peaky``) or the user's ``floats`` (``[q, k, v]``), under
    the host ``scheme`` (``tensor``, ``smooth``, ``rotate``), Q per row with ``q_rows``, K per
    block of ``k_block`` keys if given (:func:`accuracy.quantize_scheme`); ``sigma``: the
    built-in inputs scaled to that logit standard deviation (:func:`accuracy.make_inputs`).
    With a block ``table`` (a paged cache) K and V are drawn for the pool's pages
    (``[1, kv_heads, pages · page_size, d]``), where the table says each sequence's keys lie:
    a page that two sequences share holds one set of keys. ``checked``: the caller has
    checked ``wl`` against ``hw`` already (a run plan's workload). ``softmax_scale`` replaces
    ``1/√d`` (FlashAttention's name): the same integers, Q's scale times ``softmax_scale · √d``,
    so the softmax multiplier the hardware carries applies it (and the float64 reference,
    which reads Q through its scale, computes ``softmax(softmax_scale · Q Kᵀ)``).
    ``softcap``: the logits' cap ``c`` (``c·tanh(logit/c)``), carried with the inputs;
    ``sinks``: attention sinks, one for all query heads or one per head (carried as
    ``[heads]``, model.variants.check_sinks); ``alibi_slopes``: ALiBi's slopes, likewise
    (model.variants.check_alibi); ``v_keys``: V with one scale per key
    (:func:`numerics.quantize_keys` with blocks of one; a paged cache's ``value_scales``).

    Raises ConfigError for a workload the hardware cannot run, an unknown ``dist`` or
    ``scheme``, a ``softmax_scale`` that is not positive and finite, a ``softcap`` the
    hardware cannot apply (model.scales.softcap_cap).
    """
    from attenio.model.accuracy import make_inputs, quantize_scheme

    if not checked:
        hw.check_workload(wl)
    if softcap is not None:
        nm.softcap_cap(hw, softcap)           # checks it before any work
    sinks = nm.check_sinks(hw, sinks, wl.heads)
    alibi_slopes = check_alibi(hw, alibi_slopes, wl.heads)
    if floats is not None:
        q, k, v = floats
    elif table is not None:
        pool = Workload(seq_q=wl.seq_q, seq_k=table.pages * table.page_size,
                        head_dim=wl.head_dim, heads=wl.heads, kv_heads=wl.kv_heads,
                        batch=wl.batch, head_dim_v=wl.head_dim_v)
        q, k, v = make_inputs(pool, dist, seed, sigma)
        k, v = k[:1], v[:1]
    else:
        q, k, v = make_inputs(wl, dist, seed, sigma)
    if wl.v_in_k:            # V is K's first d_v columns: the floats, and K's integers
        if scheme != "tensor" or k_block is not None:
            raise bad("v_in_k", True, "V read from K's rows takes K's one scale: use "
                      "scheme='tensor' and no k_block")
        v = np.asarray(k)[..., :wl.d_v]
    if v_keys and wl.v_in_k:
        raise bad("v_keys", True, "V read from K's rows takes K's scale")
    # (v_keys: V with a scale per key, what a paged cache's V pages carry)
    h = quantize_scheme(hw, q, k, v, scheme, q_rows=q_rows, k_block=k_block, v_keys=v_keys)
    if wl.v_in_k:
        h = dataclasses.replace(h, v=h.k[..., :wl.d_v], sv=h.sk)
    sq = h.sq
    if softmax_scale is not None:
        from attenio.contract.variant import variant_of

        sq = sq * variant_of(wl, softmax_scale).q_factor   # checks it: positive, finite
    return GoldenInputs(h.q, h.k, h.v, sq, h.sk, h.sv, table, softcap, sinks, alibi_slopes,
                        v_keys)


def multipliers(hw: HardwareConfig, wl: Workload, inp: GoldenInputs) -> nm.ScaleParams:
    """The softmax multipliers the host writes for ``inp``'s scales, worked out once for a
    run (its plan carries them): one pair for the tensor; with one Q scale per row (``inp.sq``
    ``[batch, heads, seq_q, 1]``) one pair per row, flat; with one K scale per key (``inp.sk``)
    each key's factor against twice the largest K scale, flat over ``inp.k``'s rows. With a
    cap (``inp.softcap``) the multipliers make ``x = logit/c`` and carry the cap
    (model.scales.softcap_cap). With sinks (``inp.sinks``) every row has its own word: its
    multiplier (one pair per row, each the tensor's with one Q scale) and its head's sink's
    start (model.variants.sink_state), flat like the rows; with ALiBi (``inp.alibi_slopes``)
    likewise, each row's word with its head's slope (model.variants.alibi_word)."""
    per_row = np.ndim(inp.sq) > 0
    per_key = np.ndim(inp.sk) > 0
    sk = inp.sk
    sq, cap = nm.capped(hw, inp.sq, inp.softcap)
    inp = dataclasses.replace(inp, sq=sq)
    if per_key:
        ks, sk = nm.key_reference(inp.sk)
    if per_row:
        sq = np.asarray(inp.sq, dtype=np.float64).reshape(wl.batch, wl.heads, wl.seq_q)
        sp = nm.softmax_scale_rows(hw, sq.reshape(-1), sk, wl.head_dim)
    else:
        sp = nm.softmax_scale(hw, inp.sq, sk, wl.head_dim)
    if per_key:
        sp = nm.with_key_scales(hw, sp, ks.reshape(-1), sk)
    if inp.v_keys:
        vs, ref_v = nm.key_reference(inp.sv)
        sp = nm.with_value_scales(hw, sp, vs.reshape(-1), ref_v)
    sp = with_sinks(hw, sp, inp.sinks, wl)
    sp = with_alibi(hw, sp, inp.alibi_slopes, wl)
    return sp if cap is None else dataclasses.replace(sp, cap=cap)


def golden_output(hw: HardwareConfig, wl: Workload, inp: GoldenInputs, *,
                  stepwise: bool = False, progress=None, ml: dict | None = None,
                  scale: nm.ScaleParams | None = None) -> np.ndarray:
    """The integer model's output: what the accelerator must write, bit for bit (``ml``: a
    dict that receives each row's statistics, what it writes after O with ``lse``).
    ``scale``: the run plan's multipliers for these inputs (then neither the workload nor
    the multipliers are worked out again); a paged cache's keys are read through
    ``inp.table`` where they lie."""
    return nm.attention_int(hw, wl, inp.q, inp.k, inp.v, inp.sq, inp.sk, stepwise=stepwise,
                            progress=progress, ml=ml, table=inp.table, plan_scale=scale,
                            softcap=inp.softcap, sinks=inp.sinks,
                            alibi_slopes=inp.alibi_slopes,
                            v_scale=inp.sv if inp.v_keys and scale is None else None)


def error_vs_float(hw: HardwareConfig, wl: Workload, out: np.ndarray,
                   inp: GoldenInputs) -> dict:
    """Error of the integer output ``out`` against float64 attention of the quantized inputs
    (``max_abs``, ``max_rel``, ``mean_rel`` … as :func:`reference.error_metrics`)."""
    unit = inp.out_scale(wl)             # (the pool's, before the keys are gathered)
    inp = inp.gathered(wl)
    exact = ref.attention_of(wl, inp.q * inp.sq, inp.k * inp.sk, inp.v * inp.sv,
                             softcap=inp.softcap, sinks=inp.sinks,
                             alibi_slopes=inp.alibi_slopes)
    return ref.error_metrics(nm.dequantize_output(hw, out, unit), exact, inp.v * inp.sv)


def lse_error(hw: HardwareConfig, wl: Workload, ml: dict, inp: GoldenInputs) -> dict:
    """The log-sum-exp of the statistics the datapath writes (``ml``: numerics.row_stats)
    against float64's on the same quantized inputs: ``lse_max_abs`` over the rows that see a
    key, and ``lse_rows_agree`` (a row sees no key in both, or in neither)."""
    got = nm.logsumexp(hw, ml["m"], ml["l"])
    inp = inp.gathered(wl)
    exact = ref.lse_of(wl, inp.q * inp.sq, inp.k * inp.sk, softcap=inp.softcap,
                       sinks=inp.sinks, alibi_slopes=inp.alibi_slopes)
    seen = np.isfinite(exact)
    err = np.abs(got[seen] - exact[seen])
    return {"lse_max_abs": float(err.max(initial=0.0)),
            "lse_max_rel": float((err / (1.0 + np.abs(exact[seen]))).max(initial=0.0)),
            "lse_rows_agree": bool((np.isfinite(got) == seen).all())}


def logit_sigma(wl: Workload, inp: GoldenInputs, rows: int = 256) -> float:
    """The standard deviation of the logits ``q·k/√d`` of the quantized inputs (natural units;
    the first ``rows`` queries and keys of batch 0, head 0): how far the softmax's inputs
    spread, which is what the datapath's errors grow with."""
    sq = inp.sq[0, 0, :rows] if isinstance(inp.sq, np.ndarray) else inp.sq
    sk = inp.sk[0, 0, :rows] if isinstance(inp.sk, np.ndarray) else inp.sk
    q = inp.q[0, 0, :rows] * sq
    k = inp.k[0, 0, :rows] * sk
    return float(np.std(q @ k.T / np.sqrt(wl.head_dim)))


def within_bounds(metrics: dict) -> bool:
    """The metrics meet the accuracy contract."""
    lse_ok = "lse_max_rel" not in metrics or (metrics["lse_max_rel"] <= LSE_REL_BOUND
                                               and metrics["lse_rows_agree"])
    return (metrics.get("max_rel", 1.0) <= MAX_REL_BOUND
            and metrics.get("mean_rel", 1.0) <= MEAN_REL_BOUND and lse_ok)


def golden_check(hw: HardwareConfig, wl: Workload, dist: str = "gaussian", seed: int = 0,
                 stepwise: bool = False, progress=None, *, scheme: str = "tensor",
                 q_rows: bool = False, k_block: int | None = None, floats=None,
                 sigma: float | None = None, table: BlockTable | None = None,
                 softmax_scale: float | None = None, softcap: float | None = None,
                 sinks=None, alibi_slopes=None) -> dict:
    """The whole sequence on the inputs of :func:`quantized_inputs` (the same arguments): the
    metrics, the two models' times (``t_int``, ``t_ref``), the softmax ``scale`` (``None``
    with per-row or per-key scales), the logits' ``logit_sigma`` and ``ok`` (within the
    bounds). ``table``: a paged cache's block table (the inputs are then its pool);
    ``softmax_scale``, ``softcap``, ``sinks`` and ``alibi_slopes`` as
    :func:`quantized_inputs`'s."""
    inp = quantized_inputs(hw, wl, dist, seed, q_rows=q_rows, k_block=k_block, scheme=scheme,
                           floats=floats, sigma=sigma, table=table, softmax_scale=softmax_scale,
                           softcap=softcap, sinks=sinks, alibi_slopes=alibi_slopes)
    t0 = time.perf_counter()
    ml = {}
    out = golden_output(hw, wl, inp, stepwise=stepwise, progress=progress, ml=ml)
    t_int = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = error_vs_float(hw, wl, out, inp)
    if wl.lse:
        m.update(lse_error(hw, wl, ml, inp))
    t_ref = time.perf_counter() - t0
    per_tensor = not (isinstance(inp.sq, np.ndarray) or isinstance(inp.sk, np.ndarray))
    m.update(t_int=t_int, t_ref=t_ref, logit_sigma=logit_sigma(wl, inp),
             scale=multipliers(hw, wl, dataclasses.replace(inp, sinks=None,
                                                            alibi_slopes=None))
             if per_tensor else None,
             ok=within_bounds(m))
    return m
