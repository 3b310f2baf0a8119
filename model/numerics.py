"""Bit-exact integer model of the attention datapath: the contract the RTL meets bit for bit.

The datapath is split into the hardware's blocks, each a vectorized function an RTL unit test
can call on its own (the ``ref_`` side of a ref/rtl pair):

============== ===================================================================
block          function
============== ===================================================================
scale          :func:`scale` (``c_m, c_sh`` from the host's :mod:`attenio.model.scales`)
soft-cap       :func:`softcap` (``T·tanh(x)``; inside :func:`scale` when the run caps)
ALiBi          :func:`~attenio.model.variants.alibi_biased` (the bias, after the cap)
running max    :func:`running_max`
exp2           :func:`exp2`
rescale        :func:`rescale` (ℓ and O, by the same shift)
accumulate     :func:`accumulate`
reciprocal     :func:`reciprocal`
finalize       :func:`finalize`
============== ===================================================================

and composed twice into whole attention: :func:`attention_head_stepwise` walks the keys block
by block exactly as the hardware does, and :func:`attention_head` computes the identical
result with whole-matrix NumPy operations (fast enough for N = 4096 in about a second).
:func:`attention_int` runs a whole :class:`~attenio.base.config.Workload` (batch, heads, GQA,
causal). docs/numerics.md states every format and why nothing overflows.

All integers are int64; matrix products run in float64, exact because the config refuses
widths past 2**53 (see ``HardwareConfig.acc_bits``).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from attenio.base.config import HardwareConfig, VarlenWorkload, Workload
from attenio.base.errors import bad
from attenio.contract.formats import KEY_MANT_BITS, MAX_SHIFT, SCALE_SHIFT_MAX
from attenio.contract.rules import visible
from attenio.contract.tables import exp_table, recip_table
from attenio.model.divide import finalize, reciprocal  # (the finalize unit's blocks)
from attenio.model.scales import (  # noqa: F401  (the host side, re-exported)
    KEY_EXP_MAX,
    ScaleParams,
    check_int_tensor,
    dequantize,
    dequantize_output,
    key_factors,
    key_reference,
    quantize,
    quantize_keys,
    scale_array,
    softcap_cap,
    softcap_q_factor,
    softmax_scale,
    softmax_scale_rows,
    unit_scale,
    with_key_scales,
    with_value_scales,
)
from attenio.model.variants import (
    alibi_biased,
    alibi_word,
    capped,
    check_alibi,
    check_sinks,
    sink_state,
    softcap,
)

__all__ = [
    "ScaleParams", "softmax_scale", "softmax_scale_rows", "scale", "softcap", "running_max",
    "exp2", "exp_table", "rescale", "accumulate", "reciprocal", "recip_table", "finalize",
    "attention_head", "attention_head_stepwise", "attention_int", "quantize", "dequantize",
    "dequantize_output", "m_init", "row_start", "row_stats", "logsumexp",
]



def m_init(cfg: HardwareConfig) -> int:
    """Running-max reset value: ``-2**max_bits``, below every reachable ``floor(t / 2**F)``."""
    return -(1 << cfg.max_bits)


def scale(cfg: HardwareConfig, s, sp: ScaleParams) -> np.ndarray:
    """Scale block: integer score ``s`` (score_bits) to base-2 logit ``t`` (logit_bits, F frac).

    ``t = (s·c_m + 2**(c_sh-1)) >> c_sh``: round half up. With per-key factors the multiplier
    of row i and key j is ``c_m_i·k_hi_j`` (``k_hi`` = the top ``KEY_MANT_BITS`` bits of
    ``k_m``), exact, with the shift ``c_sh_i + k_e_j + KEY_MANT_BITS`` (capped at
    ``SCALE_SHIFT_MAX``, where the result is 0 either way): ``t`` is the rounded product of the
    exact factors, so a key's logit carries no error of its own however large it is. Latency in
    hardware: one multiplier and one adder stage. With a cap (``sp.cap``) the product is
    ``x = logit/c`` (``F + SOFTCAP_X_EXTRA`` fraction bits) and the logit is
    :func:`softcap` of it.
    """
    t = _scaled(cfg, s, sp)
    return t if sp.cap is None else softcap(cfg, t, sp.cap)


def _scaled(cfg: HardwareConfig, s, sp: ScaleParams) -> np.ndarray:
    s = np.asarray(s, dtype=np.int64)
    if sp.k_m is not None:  # per (row, key): c_m·k_hi exactly, shift c_sh + k_e + KB
        kb = KEY_MANT_BITS
        cm = np.asarray(sp.c_m, dtype=np.int64)
        sh = np.asarray(sp.c_sh, dtype=np.int64)
        if sp.per_row:
            cm, sh = cm[:, None], sh[:, None]
        k_hi = np.asarray(sp.k_m, dtype=np.int64) >> (cfg.numerics.scale_mult_bits - kb)
        c_eff = cm * k_hi[None, :]
        sh = np.minimum(sh + np.asarray(sp.k_e, dtype=np.int64)[None, :] + kb,
                        SCALE_SHIFT_MAX)
        return (s * c_eff + ((np.int64(1) << sh) >> 1)) >> sh
    if sp.per_row:          # one multiplier per row of s (rows, keys)
        cm = np.asarray(sp.c_m, dtype=np.int64)[:, None]
        sh = np.asarray(sp.c_sh, dtype=np.int64)[:, None]
        return (s * cm + ((np.int64(1) << sh) >> 1)) >> sh
    t = s * np.int64(sp.c_m)
    if sp.c_sh:
        t += np.int64(1 << (sp.c_sh - 1))
        t >>= sp.c_sh
    return t


# ---- running max ----

def running_max(cfg: HardwareConfig, m_old, t, valid=None):
    """Running-max block for one block of keys.

    Parameters
    ----------
    m_old : int64 array, shape (rows,)
        Integer running max (``m_init(cfg)`` before the first key).
    t : int64 array, shape (rows, keys)
        Logits of this block (F fraction bits).
    valid : bool array like ``t``, optional
        Causal mask; masked logits do not take part.

    Returns
    -------
    m_new : ``max(m_old, floor(max_valid(t) / 2**F))`` (``m_old`` if no key is valid)
    shift : ``m_new - m_old`` clamped to ``MAX_SHIFT``, the rescale of ℓ and O
    """
    t = np.asarray(t, dtype=np.int64)
    m_old = np.asarray(m_old, dtype=np.int64)
    floor_t = t >> cfg.numerics.logit_frac_bits
    if valid is not None:
        floor_t = np.where(valid, floor_t, m_init(cfg))
    m_new = np.maximum(m_old, floor_t.max(axis=-1))
    return m_new, np.minimum(m_new - m_old, MAX_SHIFT)


# ---- exp2 ----

def exp2_frac(cfg: HardwareConfig, yf) -> np.ndarray:
    """``2**(yf / 2**F)`` for ``yf`` in ``[0, 2**F)`` with PF fraction bits: in [2**PF, 2**(PF+1)).

    Piecewise-linear between table knots: the top ``exp_segments_log2`` bits of ``yf`` pick
    the segment, the remaining R bits interpolate with round-half-up.
    """
    n = cfg.numerics
    rbits = n.logit_frac_bits - n.exp_segments_log2
    lut = exp_table(n)
    # int32 halves the memory traffic of this, the model's hottest loop, whenever the
    # interpolation product provably fits (it does for every preset).
    dtype = np.int32 if (int(np.diff(lut).max()) << rbits) < (1 << 30) else np.int64
    base_t = lut[:-1].astype(dtype)
    delta_t = np.diff(lut).astype(dtype)
    yf = np.asarray(yf).astype(dtype, copy=False)
    seg = (yf >> rbits).astype(np.intp)  # take() wants native indices; converting once is cheaper
    r = yf & dtype((1 << rbits) - 1)
    acc = delta_t.take(seg) * r
    acc += dtype(1 << (rbits - 1))
    acc >>= rbits
    acc += base_t.take(seg)
    return acc


def exp2(cfg: HardwareConfig, y) -> np.ndarray:
    """exp2 block: ``p = 2**(y / 2**F)`` with PF fraction bits, for ``y < 2**F``.

    ``y = t - m·2**F`` (at most just under 1.0, since m is the floor of the max). Split into the
    integer part ``yi = y >> F ≤ 0`` and fraction ``yf``; ``p = round(exp2_frac(yf) / 2**-yi)``,
    with the shift saturated at PF+2 (where p is 0). Result: unsigned,
    ``exp_bits`` = PF+1 bits (an int32 array when that holds it, else int64).
    """
    n = cfg.numerics
    y = np.asarray(y, dtype=np.int64)
    if y.size and y.max() >= (1 << n.logit_frac_bits):
        raise ValueError("exp2 input must be below 2**logit_frac_bits (t above the running max)")
    sh = np.minimum(-(y >> n.logit_frac_bits), n.exp_frac_bits + 2)
    frac = exp2_frac(cfg, y & ((1 << n.logit_frac_bits) - 1))
    # round(frac / 2**sh), halves up, as ((2·frac >> sh) + 1) >> 1: one adder, no half table.
    frac <<= 1
    frac >>= sh.astype(frac.dtype)
    frac += 1
    frac >>= 1
    return frac


# ---- rescale and accumulate ----

def rescale(x, shift) -> np.ndarray:
    """Rescale block: ``x >> shift`` (arithmetic, floor), shift saturated at ``MAX_SHIFT``.

    Used for ℓ (shape (rows,)) and O (shape (rows, d), shift broadcast per row).
    """
    x = np.asarray(x, dtype=np.int64)
    shift = np.minimum(np.asarray(shift, dtype=np.int64), MAX_SHIFT)
    if x.ndim == shift.ndim + 1:
        shift = shift[..., None]
    return x >> shift


def _matmul_exact(a, b) -> np.ndarray:
    # float64 products are exact: the config bounds every partial sum below 2**53.
    return (np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)).astype(np.int64)


def accumulate(cfg: HardwareConfig, l_old, o_old, p, v, shift, pv=None):
    """Accumulate block: ``ℓ = (ℓ >> sh) + Σ_j p_j``, ``O = (O >> sh) + Σ_j p_j·v_j``.

    ``p`` is (rows, keys) from :func:`exp2` (zero where masked), ``v`` is (keys, d); ``pv``:
    the p values O takes instead (per-key V factors, :meth:`ScaleParams.value_scaled`).
    """
    l_new = rescale(l_old, shift) + np.asarray(p, dtype=np.int64).sum(axis=-1)
    o_new = rescale(o_old, shift) + _matmul_exact(p if pv is None else pv, v)
    return l_new, o_new


# ---- whole attention, one head ----

def _valid(rows: np.ndarray, keys: np.ndarray, seq_q: int, seq_k: int, causal: bool,
           window) -> np.ndarray | None:
    """Which keys each row sees (contract.rules.visible: bottom-right aligned, as FA-2 does),
    or None when the mask hides nothing."""
    return visible(keys[None, :], rows[:, None], seq_k - seq_q, causal, window)


def attention_head_stepwise(cfg: HardwareConfig, q, k, v, sp: ScaleParams,
                            causal: bool = False, peaks: dict | None = None,
                            window=(-1, -1), ml: dict | None = None) -> np.ndarray:
    """One head, key block by key block in the hardware's order (the readable reference).

    ``q`` (nq, d), ``k`` and ``v`` (nk, d) are integers within ``data_bits``. Returns the output
    integers (nq, d) with ``out_frac_bits`` fraction bits in V's units. If ``peaks`` is a dict,
    it receives the largest magnitude each register reached (``score``, ``logit``, ``max``,
    ``exp``, ``row_sum``, ``acc``), which the width tests hold against the config. If ``ml``
    is a dict, it receives each row's final running max ``m`` and row sum ``l``
    (:func:`row_stats`: what a run with ``lse`` writes).
    """
    q, k, v = (np.asarray(x, dtype=np.int64) for x in (q, k, v))
    nq, nk = q.shape[0], k.shape[0]
    kb = cfg.softmax_block
    f = cfg.numerics.logit_frac_bits
    m, l = row_start(cfg, sp, nq)
    o = np.zeros((nq, v.shape[1]), dtype=np.int64)     # O has V's head dim
    rows = np.arange(nq)
    seen = dict.fromkeys(("score", "logit", "max", "exp", "row_sum", "acc"), 0)
    for j0 in range(0, nk, kb):
        kk, vv = k[j0:j0 + kb], v[j0:j0 + kb]
        s = _matmul_exact(q, kk.T)
        t = scale(cfg, s, sp.keys(slice(j0, j0 + kb)))
        t = alibi_biased(cfg, t, sp, rows, np.arange(j0, j0 + len(kk)), nk - nq)
        valid = _valid(rows, np.arange(j0, j0 + len(kk)), nq, nk, causal, window)
        if valid is None:
            valid = np.ones(t.shape, dtype=bool)
        m, shift = running_max(cfg, m, t, valid)
        y = np.where(valid, t - (m[:, None] << f), -(1 << 40))
        p = np.where(valid, exp2(cfg, y), 0)
        pv = sp.keys(slice(j0, j0 + kb)).value_scaled(cfg, p)
        l, o = accumulate(cfg, l, o, p, vv, shift, pv)
        if peaks is not None:
            for name, x in (("score", s), ("logit", t), ("exp", p), ("row_sum", l), ("acc", o),
                            ("max", np.where(l > 0, m, 0))):
                seen[name] = max(seen[name], int(np.abs(x).max(initial=0)))
    if peaks is not None:
        peaks.update(seen)
    if ml is not None:
        ml.update(row_stats(cfg, m, l))
    return finalize(cfg, o, l)


def row_start(cfg: HardwareConfig, sp: ScaleParams, nq: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's running max and row sum before its first key: ``m_init`` and 0, or with
    sinks (``sp.sink_m``, ``sp.sink_l``: model.variants.sink_state) the sink's, as if it were
    a key of its own ahead of the rest with no value."""
    if sp.sink_m is None:
        return np.full(nq, m_init(cfg), dtype=np.int64), np.zeros(nq, dtype=np.int64)
    return (np.broadcast_to(np.asarray(sp.sink_m, dtype=np.int64), (nq,)).copy(),
            np.broadcast_to(np.asarray(sp.sink_l, dtype=np.int64), (nq,)).copy())


def row_stats(cfg: HardwareConfig, m, l) -> dict:
    """A row's softmax statistics as the finalize unit writes them with ``lse``: the running
    max ``m`` (``m_init`` for a row that saw no key) and the row sum ``l``."""
    l = np.asarray(l, dtype=np.int64)
    return {"m": np.where(l > 0, np.asarray(m, dtype=np.int64), m_init(cfg)), "l": l}


def logsumexp(cfg: HardwareConfig, m, l) -> np.ndarray:
    """The natural log-sum-exp of a row's scaled scores from its statistics (FlashAttention's
    ``softmax_lse``): ``ln 2 · (m + log2 ℓ − E)``, E = ``exp_frac_bits`` (each key adds
    ``2**(t/2**F − m)`` in E fraction bits to ℓ); −inf for a row that saw no key."""
    l = np.asarray(l, dtype=np.float64)
    with np.errstate(divide="ignore"):
        return np.log(2.0) * (np.asarray(m, dtype=np.float64) + np.log2(l)
                              - cfg.numerics.exp_frac_bits)


def _chunk_rows(nq: int, nk: int) -> int:
    # About 2**22 scores per chunk: tens of MB of temporaries however long the sequence.
    return max(1, min(nq, (1 << 22) // max(nk, 1)))


def attention_head(cfg: HardwareConfig, q, k, v, sp: ScaleParams,
                   causal: bool = False, progress=None, window=(-1, -1),
                   ml: dict | None = None) -> np.ndarray:
    """One head, bit-identical to :func:`attention_head_stepwise`, vectorized.

    The running max of every (row, key block) is a cumulative maximum; rescales happen only
    where it rises, so the keys between two rises (a *segment*) add up with one matrix product
    and the recurrence ``O = (O >> sh) + Z`` runs once per segment instead of once per block.
    Rises cluster at the start of the keys (they are records of a running maximum), so every
    segment but each row's last is short: those are summed over their key range only, and all
    rows' last segments together take one full-width product.
    """
    q, k, v = (np.asarray(x, dtype=np.int64) for x in (q, k, v))
    nq, nk = q.shape[0], k.shape[0]
    kb = cfg.softmax_block
    f = cfg.numerics.logit_frac_bits
    nblk = -(-nk // kb)
    pad = nblk * kb - nk
    kf = k.astype(np.float64)
    vf = v.astype(np.float64)
    out = np.empty((nq, v.shape[1]), dtype=np.int64)       # O has V's head dim
    m_all = np.empty(nq, dtype=np.int64)
    l_all = np.empty(nq, dtype=np.int64)
    minit = m_init(cfg)
    sinks = sp.sink_m is not None
    step = _chunk_rows(nq, nk)
    keys = np.arange(nk)

    def per_key(blockwise):  # (rows, blocks) -> (rows, keys)
        return blockwise if kb == 1 else np.repeat(blockwise, kb, axis=1)[:, :nk]

    def run_chunk(r0: int) -> None:
        rows = np.arange(r0, min(nq, r0 + step))
        nr = len(rows)
        t = scale(cfg, (q[rows].astype(np.float64) @ kf.T).astype(np.int64), sp.take(rows))
        t = alibi_biased(cfg, t, sp.take(rows), rows, keys, nk - nq)
        valid = _valid(rows, keys, nq, nk, causal, window)
        # floor is monotonic, so the max is taken on t and floored once per block.
        ft = t if valid is None else np.where(valid, t, minit << f)
        if pad:
            ft = np.pad(ft, ((0, 0), (0, pad)), constant_values=minit << f)
        bmax = ft.reshape(nr, nblk, kb).max(axis=2) if kb > 1 else ft
        m_run = np.maximum.accumulate(bmax, axis=1)
        m_run >>= f
        m0, l = row_start(cfg, sp.take(rows), nr)
        if sinks:
            np.maximum(m_run, m0[:, None], out=m_run)
        shift = np.empty_like(m_run)
        shift[:, 0] = m_run[:, 0] - m0
        np.subtract(m_run[:, 1:], m_run[:, :-1], out=shift[:, 1:])
        np.minimum(shift, MAX_SHIFT, out=shift)  # per block, as running_max gives it
        y = t - (per_key(m_run) << f)
        if valid is not None:
            y = np.where(valid, y, -(1 << 40))
        p = exp2(cfg, y)  # masked keys come out 0: their y is far below the max
        pp = sp.value_scaled(cfg, p)      # what O takes (p itself without V factors)

        def masked(keep, rsel, cols):
            """p and O's p where ``keep``, else 0: (ℓ's, O's)."""
            pk = np.where(keep, p[rsel, cols], 0)
            return pk, (pk if pp is p else np.where(keep, pp[rsel, cols], 0))

        rises = shift > 0
        nseg = rises.sum(axis=1)  # 0 only for a row that sees no key
        # Block where each row's last segment starts; earlier segments end before it.
        last_blk = nblk - 1 - np.argmax(rises[:, ::-1], axis=1)
        o = np.zeros((nr, v.shape[1]), dtype=np.int64)
        if sinks:
            # with a sink the first keys may not raise the max: the keys before a row's first
            # rise add to its sink's ℓ unshifted (without one they are masked, their p is 0)
            first = np.where(nseg > 0, np.argmax(rises, axis=1), nblk) * kb
            hi = min(nk, int(first.max(initial=0)))
            pk, ppk = masked(keys[None, :hi] < first[:, None], slice(None), slice(0, hi))
            l = l + pk.sum(axis=1)
            o = _matmul_exact(ppk, vf[:hi])
        if nseg.max(initial=0) > 1:
            seg = np.cumsum(rises, axis=1, dtype=np.int32)
            for s_id in range(1, int(nseg.max())):
                sel = np.nonzero(nseg > s_id)[0]
                blk_first = np.argmax(seg[sel] == s_id, axis=1)
                blk_end = np.argmax(seg[sel] > s_id, axis=1)  # exists: s_id is not the last
                lo, hi = int(blk_first.min()) * kb, min(nk, int(blk_end.max()) * kb)
                in_seg = per_key(seg[sel])[:, lo:hi] == s_id
                pk, ppk = masked(in_seg, sel, slice(lo, hi))
                sh = shift[sel, blk_first]
                l[sel] = rescale(l[sel], sh) + pk.sum(axis=1)
                o[sel] = rescale(o[sel], sh) + _matmul_exact(ppk, vf[lo:hi])
        has = nseg > 0
        start = np.where(has, last_blk * kb, nk)
        # Z_last = all keys minus the keys before each row's last segment (a short prefix).
        head = int(start.max(initial=0))
        pk, ppk = masked(keys[None, :head] < start[:, None], slice(None), slice(0, head))
        sh = np.where(has, shift[np.arange(nr), last_blk], 0)
        l = rescale(l, sh) + (p.sum(axis=1) - pk.sum(axis=1))
        o = rescale(o, sh) + (_matmul_exact(pp, vf) - _matmul_exact(ppk, vf[:head]))
        out[rows] = finalize(cfg, o, l)
        m_all[rows], l_all[rows] = m_run[:, -1], l

    starts = range(0, nq, step)
    done = [0]
    lock = threading.Lock()

    def chunk(r0: int) -> None:
        run_chunk(r0)
        if progress is not None:
            with lock:
                done[0] += 1
                progress(done[0] / len(starts))

    if len(starts) == 1:
        chunk(0)
    else:
        # NumPy releases the GIL inside its loops, so chunks run in parallel on the cores.
        with ThreadPoolExecutor(max_workers=min(len(starts), os.cpu_count() or 1)) as pool:
            list(pool.map(chunk, starts))
    if ml is not None:
        ml.update(row_stats(cfg, m_all, l_all))
    return out


# ---- whole workload ----

def attention_int(cfg: HardwareConfig, wl: Workload | VarlenWorkload, q, k, v, q_scale,
                  k_scale: float, *, stepwise: bool = False, progress=None,
                  ml: dict | None = None, table=None,
                  plan_scale: ScaleParams | None = None,
                  softcap: float | None = None, sinks=None,
                  alibi_slopes=None, v_scale=None) -> np.ndarray:
    """Integer attention for a whole workload, exactly as the accelerator computes it (each
    sequence of a :class:`VarlenWorkload` on its own rows and keys, ``wl.segments()``).

    Parameters
    ----------
    q : int array ``[batch, heads, seq_q, head_dim]``
    k, v : int arrays ``[batch, kv_heads, seq_k, head_dim]``; with ``table`` (a paged cache,
        :class:`attenio.base.blocktable.BlockTable`) the pool's rows ``[1, kv_heads, pages ·
        page_size, head_dim]``, sequence i's keys read where ``table.key_rows(i)`` says
        they lie (no copy of the cache is gathered)
    q_scale, k_scale : per-tensor scales of q and k (V's scale does not enter the datapath);
        ``q_scale`` may instead be one scale per query row, ``[batch, heads, seq_q, 1]`` (the
        per-row multipliers of :func:`softmax_scale_rows`), and ``k_scale`` one per key,
        ``[batch, kv_heads, seq_k, 1]`` (per-block K scales, :func:`quantize_keys`; twice the
        largest over the tensor is the reference and each key carries its factor,
        :func:`key_factors`; with ``table``, one per pool row)
    stepwise : use the block-by-block model instead of the vectorized one (same result)
    progress : ``progress(fraction)`` after each head, if given
    ml : if a dict, it receives ``m`` and ``l``, int64 ``[batch, heads, seq_q]``: each row's
        softmax statistics (:func:`row_stats`; :func:`logsumexp` turns them into the LSE)
    plan_scale : the multipliers a run plan made of these scales (one pair, or per row
        ``[batch·heads·seq_q]`` and per key ``[batch·kv_heads·keys]`` as the DRAM image
        carries them): taken instead of working them out again, and ``wl`` taken as checked
    softcap : the logits' cap ``c`` (``c·tanh(logit/c)``; with ``plan_scale``, its own)
    sinks : one attention sink per query head (or one for all), each row's softmax started
        from its head's (:func:`~attenio.model.variants.sink_state`; with ``plan_scale``, its
        own per row)
    alibi_slopes : ALiBi's slope per query head (or one for all): each logit less
        ``slope·|i + diag − j|`` (:func:`~attenio.model.variants.alibi_biased`; with
        ``plan_scale``, its own per row)
    v_scale : one V scale per key, ``[batch, kv_heads, seq_k, 1]`` like ``k_scale`` (a
        paged cache's ``value_scales``: each key's p times its factor before ``P V``,
        :meth:`ScaleParams.value_scaled`; with ``plan_scale``, its own)

    Returns
    -------
    int64 array ``[batch, heads, seq_q, head_dim]`` with ``out_frac_bits`` fraction bits in
    units of V's LSB (with ``v_scale``, of twice the largest: :func:`key_reference`);
    :func:`dequantize_output` turns it into real values.

    Raises
    ------
    ConfigError
        A workload the hardware cannot run, or tensors whose shape, dtype or range do not match.
    """
    cap = sink = alibi = None
    if plan_scale is None:
        cfg.check_workload(wl)
        q_scale, cap = capped(cfg, q_scale, softcap)
        sinks = check_sinks(cfg, sinks, wl.heads)
        sink = None if sinks is None else sink_state(cfg, sinks)
        alibi_slopes = check_alibi(cfg, alibi_slopes, wl.heads)
        alibi = None if alibi_slopes is None else alibi_word(cfg, alibi_slopes)
    b, h, hk, nq, nk, d = wl.batch, wl.heads, wl.kv_heads, wl.seq_q, wl.seq_k, wl.head_dim
    kb, kn = (1, table.pages * table.page_size) if table is not None else (b, nk)
    q = check_int_tensor("q", q, (b, h, nq, d), cfg.data_bits)
    k = check_int_tensor("k", k, (kb, hk, kn, d), cfg.data_bits)
    v = check_int_tensor("v", v, (kb, hk, kn, wl.d_v), cfg.data_bits)
    rows_q = np.ndim(q_scale) > 0
    if rows_q:
        qs = scale_array("q_scale", q_scale, (b, h, nq))
    keys_k = np.ndim(k_scale) > 0
    if keys_k:
        ks, sk = key_reference(scale_array("k_scale", k_scale, (kb, hk, kn)))
    else:
        sk = k_scale
    if v_scale is not None:
        if not cfg.value_scales_unit:
            raise bad("v_scale", "one per key", "this config has no V factor unit: take a "
                      "preset's NAME+vscales or set value_scales_unit = true")
        vs, sv = key_reference(scale_array("v_scale", v_scale, (kb, hk, kn)), "v_scale")
    if plan_scale is not None:
        sp = plan_scale
    elif not rows_q:
        sp = softmax_scale(cfg, q_scale, sk, d)
    out = np.empty((b, h, nq, wl.d_v), dtype=np.int64)
    stats = {"m": np.empty((b, h, nq), dtype=np.int64), "l": np.empty((b, h, nq), dtype=np.int64)}
    g = wl.group_size
    units = [(i, seg, hi) for i, seg in enumerate(wl.segments()) for hi in range(h)]
    for n0, (i, seg, hi) in enumerate(units):
        bi, rq = seg.batch, seg.rows
        if seg.seq_q == 0:          # no queries: nothing to compute
            continue
        if seg.seq_k == 0:          # an empty cache: its rows see no key (0, m_init, ℓ = 0)
            out[bi, hi, rq] = 0
            stats["m"][bi, hi, rq], stats["l"][bi, hi, rq] = m_init(cfg), 0
            continue
        # where the sequence's keys lie: its own span, or its pages in the pool
        kbi, rk = (0, table.key_rows(i)) if table is not None else (bi, seg.keys)
        if plan_scale is not None:
            sp = unit_scale(plan_scale, wl, bi, hi, rq, kbi, hi // g, rk, kn)
        else:
            if rows_q:
                sp = softmax_scale_rows(cfg, qs[bi, hi, rq], sk, d)
            if keys_k:
                sp = with_key_scales(cfg, sp, ks[kbi, hi // g, rk], sk)
            if v_scale is not None:
                sp = with_value_scales(cfg, sp, vs[kbi, hi // g, rk], sv)
            sp = sp if cap is None else dataclasses.replace(sp, cap=cap)
            if sink is not None:
                sp = dataclasses.replace(sp, sink_m=int(sink[0][hi]), sink_l=int(sink[1][hi]))
            if alibi is not None:
                sp = dataclasses.replace(sp, alibi_m=int(alibi[0][hi]),
                                         alibi_sh=int(alibi[1][hi]))
        args = (cfg, q[bi, hi, rq], k[kbi, hi // g, rk], v[kbi, hi // g, rk], sp, wl.causal)
        one = {}
        if stepwise:
            out[bi, hi, rq] = attention_head_stepwise(*args, window=wl.window, ml=one)
        else:
            out[bi, hi, rq] = attention_head(*args, progress=None if progress is None else (
                lambda f, n0=n0: progress((n0 + f) / len(units))), window=wl.window, ml=one)
        stats["m"][bi, hi, rq], stats["l"][bi, hi, rq] = one["m"], one["l"]
        if progress is not None:
            progress((n0 + 1) / len(units))
    if ml is not None:
        ml.update(stats)
    return out
