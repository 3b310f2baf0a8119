"""Exact attention in float64, streamed over key blocks so memory stays O(N·d).

This is the accuracy reference for the integer model: ``O = softmax(Q Kᵀ · scale) V`` with
batch, heads, grouped-query attention and causal masking. Scores are formed for one chunk of
query rows against one block of keys at a time and folded in with an online softmax (in float64
that is exact up to rounding), so N = 64K never materializes an N×N matrix.
"""

from __future__ import annotations

import math

import numpy as np

from attenio.base.errors import bad
from attenio.contract.rules import check_window, key_span, visible

__all__ = ["attention", "attention_head", "streamed_head", "error_metrics"]


def attention_head(q, k, v, *, causal: bool = False, sm_scale: float | None = None,
                   block: int = 1024, chunk: int = 1024, window=(-1, -1),
                   softcap: float | None = None, sink: float | None = None,
                   alibi: float | None = None) -> np.ndarray:
    """One head: ``q`` and ``k`` (nq, d), (nk, d), ``v`` (nk, dv); returns (nq, dv) float64
    (``dv`` may differ from ``d``: separate Q·K and V head dims, contract/variant.py).

    With ``causal``, row i sees keys ``j ≤ i + nk - nq``; with ``window = (left, right)``
    only keys ``i + nk − nq − left … i + nk − nq + right`` (−1: unbounded; FlashAttention's
    ``window_size``, contract.rules.visible); a row that sees no key returns 0. ``softcap``
    ``c``: each logit ``x`` becomes ``c·tanh(x/c)`` before the softmax (FlashAttention's
    ``softcap``, Gemma 2). ``sink``: an attention sink (gpt-oss), a logit that joins every
    row's softmax denominator and adds no value: ``O = Σ e^{s_j} v_j / (e^{sink} + Σ e^{s_j})``.
    ``alibi``: an ALiBi slope, ``−alibi·|i + nk − nq − j|`` added to each logit after the cap
    (FlashAttention's ``alibi_slopes``).
    Peak memory is about ``chunk·block + 3·chunk·d`` floats besides the inputs.
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    nq, d = q.shape
    nk = k.shape[0]
    if k.shape != (nk, d) or v.ndim != 2 or v.shape[0] != nk:
        raise bad("k/v shape", (k.shape, v.shape), f"expected k ({nk}, {d}) to match q "
                  f"{q.shape} and v ({nk}, any head dim)")
    scale = 1.0 / math.sqrt(d) if sm_scale is None else sm_scale
    return streamed_head(q, k, v, causal=causal, scale=scale, block=block, chunk=chunk,
                         window=window, softcap=softcap, sink=sink, alibi=alibi)


def streamed_head(q, k, v, *, causal: bool, scale: float, block: int = 1024,
                  chunk: int = 1024, dtype=np.float64, round_p=None, round_out=None,
                  scale_scores: bool = False, window=(-1, -1),
                  softcap: float | None = None, sink: float | None = None,
                  alibi: float | None = None) -> np.ndarray:
    """The online softmax every float attention here runs, over ``chunk`` query rows and
    ``block`` keys at a time, in ``dtype``. ``attention_head`` is its float64 use; the fp16
    and bf16 attention of model/accuracy.py runs it in float32 with ``round_p`` (P rounded to
    the format before ``P·V``), ``round_out`` (the output rounded) and ``scale_scores`` (the
    scores scaled after ``Q Kᵀ``, as GPU kernels do, instead of Q before it) and
    ``softcap`` (``c·tanh(s/c)`` of the scaled scores); ``sink``: each row's softmax starts
    from the sink's logit (running max ``sink``, sum 1, no value); ``alibi``: the slope of
    ALiBi's bias ``−alibi·|i + nk − nq − j|``, added after the cap. Returns float64.
    """
    nq, nk, dv = q.shape[0], k.shape[0], v.shape[1]
    window = check_window(window)
    scale = dtype(scale)
    neg = dtype(-np.inf)
    out = np.empty((nq, dv))
    for r0 in range(0, nq, chunk):
        qs = q[r0:r0 + chunk] if scale_scores else q[r0:r0 + chunk] * scale
        rows = np.arange(r0, r0 + len(qs))
        m = np.full(len(qs), neg if sink is None else dtype(sink), dtype=dtype)
        l = np.full(len(qs), 0 if sink is None else 1, dtype=dtype)
        acc = np.zeros((len(qs), dv), dtype=dtype)
        # only the keys some row of the chunk sees (causal and window skip the rest)
        first, end = key_span(int(rows[0]), int(rows[-1]), nk - nq, nk, causal, window)
        for j0 in range(first, end, block):
            s = qs @ k[j0:min(end, j0 + block)].T
            if scale_scores:
                s = s * scale
            if softcap is not None:
                s = dtype(softcap) * np.tanh(s / dtype(softcap))
            keys = np.arange(j0, j0 + s.shape[1])
            if alibi is not None:
                s = s - dtype(alibi) * np.abs(rows[:, None] + (nk - nq) - keys[None, :])
            seen = visible(keys[None, :], rows[:, None], nk - nq, causal, window)
            if seen is not None:
                s = np.where(seen, s, neg)
            m_new = np.maximum(m, s.max(axis=1))
            safe = np.where(np.isfinite(m_new), m_new, dtype(0))
            alpha = np.exp(np.where(np.isfinite(m), m - safe, neg))
            p = np.exp(s - safe[:, None])
            l = l * alpha + p.sum(axis=1, dtype=dtype)
            acc = acc * alpha[:, None] + \
                (p if round_p is None else round_p(p)) @ v[j0:j0 + s.shape[1]]
            m = m_new
        with np.errstate(invalid="ignore", divide="ignore"):
            res = acc / l[:, None]
        res = np.where(l[:, None] > 0, res, dtype(0))
        out[r0:r0 + len(qs)] = res if round_out is None else round_out(res)
    return out


def attention(q, k, v, *, causal: bool = False, sm_scale: float | None = None,
              block: int = 1024, head=None, window=(-1, -1),
              softcap: float | None = None, sinks=None, alibi_slopes=None) -> np.ndarray:
    """Exact attention for ``q`` [..., heads, nq, d] and ``k, v`` [..., kv_heads, nk, d].

    Two-dimensional inputs are one head. Query head h uses K/V head ``h // (heads/kv_heads)``.
    ``head(q, k, v, causal=, sm_scale=, block=, window=, softcap=)`` replaces
    :func:`attention_head` for each head (model/accuracy.py's fp16 and bf16 attention).
    ``window``, ``softcap``: see :func:`attention_head`; ``sinks``: one sink per query head
    (``[heads]``; :func:`attention_head`'s ``sink``), or None; ``alibi_slopes``: one ALiBi
    slope per query head (``[heads]``, or one for all; :func:`attention_head`'s ``alibi``).

    Raises
    ------
    ConfigError
        Shapes that do not agree (head dims, batch, or heads not a multiple of kv_heads).
    """
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    head = head or attention_head
    sink = {} if sinks is None else {"sink": None}
    if alibi_slopes is not None:
        sink["alibi"] = None
    if q.ndim == 2:
        if sinks is not None:
            sink["sink"] = float(np.asarray(sinks).reshape(-1)[0])
        if alibi_slopes is not None:
            sink["alibi"] = float(np.asarray(alibi_slopes).reshape(-1)[0])
        return head(q, k, v, causal=causal, sm_scale=sm_scale, block=block, window=window,
                    softcap=softcap, **sink)
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise bad("q.ndim", q.ndim, "expected 2 (one head) or 4 ([batch, heads, n, d]) dims "
                  f"for q, k and v (got {q.ndim}, {k.ndim}, {v.ndim})")
    b, h, nq, d = q.shape
    if k.shape[:3] != v.shape[:3]:
        raise bad("v.shape", v.shape, f"must equal k.shape {k.shape} but for its head dim")
    if k.shape[0] != b or k.shape[3] != d:
        raise bad("k.shape", k.shape, f"batch and head dim must match q.shape {q.shape}")
    hk = k.shape[1]
    if h % hk:
        raise bad("kv_heads", hk, f"must divide heads={h}")
    g = h // hk
    out = np.empty(q.shape[:3] + v.shape[3:])
    for bi in range(b):
        for hi in range(h):
            if sinks is not None:
                sink["sink"] = float(np.asarray(sinks).reshape(-1)[hi])
            if alibi_slopes is not None:
                a = np.asarray(alibi_slopes, dtype=np.float64).reshape(-1)
                sink["alibi"] = float(a[hi % a.size])
            out[bi, hi] = head(q[bi, hi], k[bi, hi // g], v[bi, hi // g],
                               causal=causal, sm_scale=sm_scale, block=block,
                               window=window, softcap=softcap, **sink)
    return out


def attention_of(wl, q, k, v, *, head=None, block: int = 1024,
                 softcap: float | None = None, sinks=None, alibi_slopes=None) -> np.ndarray:
    """Exact attention of workload ``wl`` (a ``Workload`` or a ``VarlenWorkload``) on its
    tensors: each sequence (``wl.segments()``) attends to its own keys under ``wl``'s causal
    and window masks, aligned at its own bottom right. ``head``, ``softcap``, ``sinks``,
    ``alibi_slopes`` as :func:`attention`."""
    q = np.asarray(q, dtype=np.float64)
    out = np.zeros(q.shape[:3] + (np.shape(v)[3],))       # O has V's head dim
    for seg in wl.segments():
        if seg.seq_q == 0 or seg.seq_k == 0:    # an empty sequence: its rows (if any) give 0
            continue
        b, rq, rk = seg.batch, seg.rows, seg.keys
        out[b:b + 1, :, rq] = attention(q[b:b + 1, :, rq], k[b:b + 1, :, rk], v[b:b + 1, :, rk],
                                        causal=wl.causal, window=wl.window, head=head,
                                        block=block, softcap=softcap, sinks=sinks,
                                        alibi_slopes=alibi_slopes)
    return out


def lse_of(wl, q, k, *, chunk: int = 512, softcap: float | None = None,
           sinks=None, alibi_slopes=None) -> np.ndarray:
    """Exact log-sum-exp of each query row's scaled scores ``q·k/√d`` under ``wl``'s masks
    (FlashAttention's ``softmax_lse``), ``[batch, heads, seq_q]``; −inf for a row that sees no
    key; ``softcap`` as :func:`attention_head`'s. With ``sinks`` (one per query head) the
    sink's term is in the sum (the softmax's denominator): a row of a sequence with keys that
    sees none of them has the sink's logit; a sequence with no keys at all stays −inf (its
    softmax never runs: the hardware streams it no key). ``alibi_slopes`` as
    :func:`attention`."""
    q, k = np.asarray(q, dtype=np.float64), np.asarray(k, dtype=np.float64)
    out = np.full(q.shape[:-1], -np.inf)
    g, scale = wl.heads // wl.kv_heads, 1.0 / math.sqrt(wl.head_dim)
    for seg in wl.segments():
        if seg.seq_q == 0 or seg.seq_k == 0:    # its rows (if any) see no key: −inf
            continue
        kk = k[seg.batch, :, seg.keys]
        keys = np.arange(seg.seq_k)
        for r0 in range(0, seg.seq_q, chunk):
            rows = np.arange(r0, min(seg.seq_q, r0 + chunk))
            seen = visible(keys[None, :], rows[:, None], seg.diag, wl.causal, wl.window)
            for h in range(wl.heads):
                s = q[seg.batch, h, seg.q0 + rows] @ kk[h // g].T * scale
                if softcap is not None:
                    s = softcap * np.tanh(s / softcap)
                if alibi_slopes is not None:
                    a = np.asarray(alibi_slopes, dtype=np.float64).reshape(-1)
                    s = s - a[h % a.size] * np.abs(rows[:, None] + seg.diag - keys[None, :])
                if seen is not None:
                    s = np.where(seen, s, -np.inf)
                if sinks is not None:
                    s = np.concatenate([s, np.full((len(s), 1), float(sinks[h]))], axis=1)
                mx = s.max(axis=1)
                safe = np.where(np.isfinite(mx), mx, 0.0)
                with np.errstate(divide="ignore"):
                    out[seg.batch, h, seg.q0 + rows] = safe + np.log(
                        np.exp(s - safe[:, None]).sum(axis=1))
    return out


def random_inputs(wl, dist: str = "gaussian", seed: int = 0) -> list[np.ndarray]:
    """Random float Q, K, V for a workload (``gaussian`` or ``uniform`` in [-1, 1]), shapes
    ``[batch, heads, seq_q, d]`` and ``[batch, kv_heads, seq_k, d]`` (V's last dim ``d_v``)."""
    rng = np.random.default_rng(seed)
    shapes = [(wl.batch, wl.heads, wl.seq_q, wl.head_dim),
              (wl.batch, wl.kv_heads, wl.seq_k, wl.head_dim),
              (wl.batch, wl.kv_heads, wl.seq_k, wl.d_v)]
    if dist == "gaussian":
        return [rng.standard_normal(s) for s in shapes]
    return [rng.uniform(-1.0, 1.0, s) for s in shapes]


def error_metrics(approx, exact, v) -> dict[str, float]:
    """Errors of ``approx`` against ``exact``, absolute and relative to V's value range.

    V's range is ``max(V) - min(V)``; for a constant V it falls back to ``max|V|`` (or 1), so
    the ratio stays defined. Returns max_abs, mean_abs, v_range, max_rel, mean_rel.
    """
    approx = np.asarray(approx, dtype=np.float64)
    exact = np.asarray(exact, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    err = np.abs(approx - exact)
    v_range = float(v.max() - v.min()) if v.size else 0.0
    if v_range == 0.0:
        v_range = float(np.abs(v).max()) if v.size and np.abs(v).max() > 0 else 1.0
    max_abs = float(err.max()) if err.size else 0.0
    mean_abs = float(err.mean()) if err.size else 0.0
    return {"max_abs": max_abs, "mean_abs": mean_abs, "v_range": v_range,
            "max_rel": max_abs / v_range, "mean_rel": mean_abs / v_range}
