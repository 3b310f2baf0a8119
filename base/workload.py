"""Workloads: one attention problem of one shape for the whole batch (:class:`Workload`, the
paper's experiment) and a batch of sequences of different lengths packed together
(:class:`VarlenWorkload`, FlashAttention's ``cu_seqlens``). Both say where each sequence lies in
the tensors (``segments()``), the one description the golden models, the schedule generator and
the DRAM image read; every field is validated on construction (``ConfigError`` naming the field,
the sequence and the value)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Protocol

from attenio.base.errors import bad
from attenio.base.fields import Serializable, check_bool, check_int

__all__ = ["Workload", "VarlenWorkload", "Segment", "MAX_LEN"]

MAX_LEN = 1 << 24      # the longest sequence a workload describes (the ISA's 24-bit key count)


class HardwareConfig(Protocol):
    """What a workload reads of the hardware (:class:`attenio.base.config.HardwareConfig`,
    whose module imports this one; this one imports nothing of it): its check of a workload."""

    def check_workload(self, wl) -> None: ...


class Segment(NamedTuple):
    """One sequence's place in the tensors: batch entry ``batch``; its query rows
    ``q0 … q0+seq_q−1`` and its keys ``k0 … k0+seq_k−1`` on the sequence axis."""

    batch: int
    q0: int
    seq_q: int
    k0: int
    seq_k: int

    @property
    def rows(self) -> slice:
        """The sequence's query rows on the sequence axis."""
        return slice(self.q0, self.q0 + self.seq_q)

    @property
    def keys(self) -> slice:
        """The sequence's keys on the sequence axis."""
        return slice(self.k0, self.k0 + self.seq_k)

    @property
    def diag(self) -> int:
        """``seq_k − seq_q``: the causal and window masks are aligned at the bottom right."""
        return self.seq_k - self.seq_q


class _HeadsAndMasks:
    """What both workloads say alike: their heads (GQA groups), window and paging."""

    LEGACY: ClassVar[tuple[str, ...]] = ("element_bytes",)   # the hardware's, not a workload's

    @property
    def group_size(self) -> int:
        """Query heads per K/V head (1 for multi-head, ``heads`` for MQA)."""
        return self.heads // self.kv_heads

    @property
    def window(self) -> tuple[int, int]:
        """The sliding window ``(left, right)``: query row i sees keys
        ``i + seq_k − seq_q − left … i + seq_k − seq_q + right`` (FlashAttention's
        ``window_size``; −1 unbounded; with ``causal`` also none past the diagonal)."""
        return self.window_left, self.window_right

    @property
    def windowed(self) -> bool:
        return self.window != (-1, -1)

    @property
    def d_qk(self) -> int:
        """Elements of a Q and a K row (``head_dim``)."""
        return self.head_dim

    @property
    def d_v(self) -> int:
        """Elements of a V and an O row: ``head_dim_v``, or ``head_dim`` when not given
        (contract/variant.py says what each layer does with the two)."""
        return self.head_dim if self.head_dim_v is None else self.head_dim_v


def _check_heads_and_masks(wl) -> None:
    """The fields both workloads share: head dims, heads, K/V heads dividing them, causal,
    the window's sides (≥ −1) and the page size."""
    check_int(wl, "head_dim", 1, 1024)
    if wl.head_dim_v is not None:
        check_int(wl, "head_dim_v", 1, 1024)
    check_int(wl, "heads", 1, 1 << 12)
    check_int(wl, "kv_heads", 1, 1 << 12)
    check_bool(wl, "causal")
    check_bool(wl, "lse")
    check_bool(wl, "v_in_k")
    if wl.v_in_k and wl.d_v > wl.head_dim:
        raise bad("head_dim_v", wl.d_v, f"with v_in_k V is the first head_dim_v columns of K: "
                  f"at most head_dim={wl.head_dim}")
    if wl.heads % wl.kv_heads:
        raise bad("kv_heads", wl.kv_heads, f"must divide heads={wl.heads}")
    for side in ("window_left", "window_right"):
        check_int(wl, side, -1, MAX_LEN)
    _check_page_size(wl)


@dataclass(frozen=True, kw_only=True)
class Workload(_HeadsAndMasks, Serializable):
    """One attention problem: ``O = softmax(Q Kᵀ/√d) V`` per (batch, head).

    Q is ``[batch, heads, seq_q, head_dim]``; K is ``[batch, kv_heads, seq_k, head_dim]`` and
    V ``[batch, kv_heads, seq_k, head_dim_v]`` (``head_dim_v`` None: ``head_dim``; O has V's
    head dim, ``d_v``); query head h reads K/V head ``h // (heads // kv_heads)`` (GQA/MQA). With
    ``causal``, query row i sees keys ``j ≤ i + seq_k - seq_q`` (aligned at the bottom right).
    """

    seq_q: int
    seq_k: int
    head_dim: int
    heads: int = 1
    kv_heads: int = 1
    batch: int = 1
    causal: bool = False
    window_left: int = -1
    window_right: int = -1
    page_size: int = 0
    # also write each row's softmax statistics (running max m and row sum ℓ: its
    # log-sum-exp, FlashAttention's softmax_lse), one word after the row's O
    lse: bool = False
    # V's (and O's) head dim when it is not Q·K's (DeepSeek's MLA: 192 and 128); None: equal
    head_dim_v: int | None = None
    # V is the first head_dim_v columns of K's own rows (DeepSeek's absorbed MLA decode: the
    # latent row is K, its first 512 elements V): there is no V tensor, K's rows are read once
    v_in_k: bool = False

    def __post_init__(self):
        check_int(self, "seq_q", 1, MAX_LEN)
        check_int(self, "seq_k", 1, MAX_LEN)
        check_int(self, "batch", 1, 1 << 16)
        _check_heads_and_masks(self)

    @classmethod
    def from_options(cls, hw: HardwareConfig | None, *, n: int, d: int, nk: int | None = None,
                     heads: int = 1, kv_heads: int | None = None, batch: int = 1,
                     causal: bool = False, window=(-1, -1), page_size: int = 0,
                     lse: bool = False, d_v: int | None = None,
                     v_in_k: bool = False) -> Workload:
        """The workload of the CLI's, the API's and explore's options, the one place they are
        read: ``nk`` defaults to ``n`` (self-attention) and ``kv_heads`` to ``heads``
        (multi-head) when ``None``, ``d_v`` (V's head dim) to ``d``; a 0 is refused like any
        value out of range, never read as the default. With ``hw``, elements are its size and
        the workload must fit it (:meth:`HardwareConfig.check_workload`)."""
        wl = cls(seq_q=n, seq_k=n if nk is None else nk, head_dim=d, heads=heads,
                 kv_heads=heads if kv_heads is None else kv_heads, batch=batch, causal=causal,
                 window_left=window[0], window_right=window[1], page_size=page_size,
                 lse=lse, head_dim_v=None if d_v == d else d_v, v_in_k=v_in_k)
        if hw is not None:
            hw.check_workload(wl)
        return wl

    @classmethod
    def square(cls, n: int, d: int, **kw) -> Workload:
        """A self-attention workload with ``seq_q = seq_k = n``."""
        return cls(seq_q=n, seq_k=n, head_dim=d, **kw)

    @property
    def sequences(self) -> int:
        """Independent sequences: the batch."""
        return self.batch

    def segments(self) -> list[Segment]:
        """Where each sequence lies in the tensors (:class:`Segment`): batch entry b, all of
        its rows and keys."""
        return [Segment(b, 0, self.seq_q, 0, self.seq_k) for b in range(self.batch)]

    def empty(self, i: int) -> bool:
        """A sequence of one shape is never empty (a varlen batch's may be)."""
        return False

    def sequence(self, i: int = 0) -> Workload:
        """Sequence ``i`` as a workload of its own (batch 1)."""
        return dataclasses.replace(self, batch=1)


@dataclass(frozen=True, kw_only=True)
class VarlenWorkload(_HeadsAndMasks, Serializable):
    """A batch of sequences of different lengths packed together, as FlashAttention's
    ``flash_attn_varlen_func`` takes them: sequence i has ``seqlens_q[i]`` query rows and
    ``seqlens_k[i]`` keys; the masks (``causal``, the window) apply per sequence, aligned at
    each one's bottom right; a row sees no key of another sequence.

    Tensors hold the sequences one after another on the sequence axis: Q is ``[1, heads,
    total_q, head_dim]`` (sequence i's rows at ``cu_seqlens_q[i] …``), K and V ``[1, kv_heads,
    total_k, head_dim]``; so ``batch``, ``seq_q`` and ``seq_k`` are those of the packed tensors
    (1, ``total_q``, ``total_k``), and ``segments()`` says where each sequence lies.
    """

    seqlens_q: tuple[int, ...]
    seqlens_k: tuple[int, ...]
    head_dim: int
    heads: int = 1
    kv_heads: int = 1
    causal: bool = False
    window_left: int = -1
    window_right: int = -1
    page_size: int = 0
    lse: bool = False          # as Workload.lse
    head_dim_v: int | None = None     # as Workload.head_dim_v
    v_in_k: bool = False              # as Workload.v_in_k

    def __post_init__(self):
        for name in ("seqlens_q", "seqlens_k"):
            value = getattr(self, name)
            if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
                raise bad(name, value, "must be a list of sequence lengths")
            object.__setattr__(self, name, tuple(value))
        if not self.seqlens_q:
            raise bad("seqlens_q", [], "must name at least one sequence")
        if len(self.seqlens_k) != len(self.seqlens_q):
            raise bad("seqlens_k", f"{len(self.seqlens_k)} lengths",
                      f"one per sequence: {len(self.seqlens_q)}, as seqlens_q")
        for name in ("seqlens_q", "seqlens_k"):
            for i, n in enumerate(getattr(self, name)):
                if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_LEN:
                    raise bad(f"{name}[{i}]", n, f"must be an integer in [0, {MAX_LEN}] (0: "
                              "an empty sequence, as FlashAttention takes one)")
            if sum(getattr(self, name)) == 0:
                raise bad(name, list(getattr(self, name)), "every sequence is empty: give at "
                          "least one " + ("query" if name == "seqlens_q" else "key"))
        _check_heads_and_masks(self)

    @classmethod
    def from_cu_seqlens(cls, cu_seqlens_q, cu_seqlens_k, **kw) -> VarlenWorkload:
        """From FlashAttention's cumulative lengths (``[0, n0, n0+n1, …]``, one more entry than
        sequences). Raises ConfigError naming the entry that does not start at 0 or increase."""
        lens = []
        for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
            cu = [int(x) for x in cu]
            if len(cu) < 2:
                raise bad(name, cu, "needs at least two entries: [0, length, …]")
            if cu[0] != 0:
                raise bad(f"{name}[0]", cu[0], "must be 0")
            for i in range(1, len(cu)):
                if cu[i] < cu[i - 1]:
                    raise bad(f"{name}[{i}]", cu[i],
                              f"must be at least {name}[{i - 1}] = {cu[i - 1]} (lengths ≥ 0)")
            lens.append([b - a for a, b in zip(cu[:-1], cu[1:], strict=True)])
        if len(lens[0]) != len(lens[1]):
            raise bad("cu_seqlens_k", f"{len(lens[1])} sequences",
                      f"as many as cu_seqlens_q: {len(lens[0])}")
        return cls(seqlens_q=lens[0], seqlens_k=lens[1], **kw)

    @classmethod
    def from_options(cls, hw: HardwareConfig | None, *, seqlens, d: int, nk=None,
                     heads: int = 1, kv_heads: int | None = None, causal: bool = False,
                     window=(-1, -1), page_size: int = 0, lse: bool = False,
                     d_v: int | None = None, v_in_k: bool = False) -> VarlenWorkload:
        """The workload of the CLI's and the API's options: ``seqlens`` query lengths, ``nk``
        key lengths (default: the same, self-attention), ``d_v`` V's head dim (default
        ``d``); with ``hw``, it must fit it."""
        wl = cls(seqlens_q=seqlens, seqlens_k=seqlens if nk is None else nk, head_dim=d,
                 heads=heads, kv_heads=heads if kv_heads is None else kv_heads, causal=causal,
                 window_left=window[0], window_right=window[1], page_size=page_size,
                 lse=lse, head_dim_v=None if d_v == d else d_v, v_in_k=v_in_k)
        if hw is not None:
            hw.check_workload(wl)
        return wl

    @staticmethod
    def _cumulative(lens) -> tuple[int, ...]:
        out = [0]
        for n in lens:
            out.append(out[-1] + n)
        return tuple(out)

    @property
    def cu_seqlens_q(self) -> tuple[int, ...]:
        return self._cumulative(self.seqlens_q)

    @property
    def cu_seqlens_k(self) -> tuple[int, ...]:
        return self._cumulative(self.seqlens_k)

    @property
    def batch(self) -> int:
        """The packed tensors' batch axis: 1."""
        return 1

    @property
    def sequences(self) -> int:
        return len(self.seqlens_q)

    @property
    def seq_q(self) -> int:
        """Query rows of the packed tensor: the sum of the sequences'."""
        return sum(self.seqlens_q)

    @property
    def seq_k(self) -> int:
        """Keys of the packed tensors: the sum of the sequences'."""
        return sum(self.seqlens_k)

    def segments(self) -> list[Segment]:
        cq, ck = self.cu_seqlens_q, self.cu_seqlens_k
        return [Segment(0, cq[i], nq, ck[i], nk)
                for i, (nq, nk) in enumerate(zip(self.seqlens_q, self.seqlens_k, strict=True))]

    def empty(self, i: int) -> bool:
        """Sequence ``i`` has no queries or no keys: no tile reads a key for it, its rows (if
        any) give 0 and an lse of −∞ (FlashAttention's), and it has no workload of its own."""
        return self.seqlens_q[i] == 0 or self.seqlens_k[i] == 0

    def sequence(self, i: int = 0) -> Workload:
        """Sequence ``i`` as a workload of its own (not for an :meth:`empty` one)."""
        if self.empty(i):
            raise bad(f"sequence {i}", (self.seqlens_q[i], self.seqlens_k[i]),
                      "an empty sequence has no workload of its own")
        return Workload(seq_q=self.seqlens_q[i], seq_k=self.seqlens_k[i],
                        head_dim=self.head_dim, heads=self.heads, kv_heads=self.kv_heads,
                        causal=self.causal,
                        window_left=self.window_left, window_right=self.window_right,
                        page_size=self.page_size, lse=self.lse, head_dim_v=self.head_dim_v,
                        v_in_k=self.v_in_k)


MAX_PAGE = 1 << 15     # the ISA's 4-bit page_log2


def _check_page_size(wl) -> None:
    """``page_size``: 0 (K and V contiguous) or a power of two in [1, 2^15] (a paged cache)."""
    p = wl.page_size
    if isinstance(p, bool) or not isinstance(p, int) or p < 0 or p > MAX_PAGE or p & (p - 1):
        raise bad("page_size", p, f"must be 0 (a contiguous K/V cache) or a power of two in "
                  f"[1, {MAX_PAGE}] (keys per page)")


def workload_from_options(hw: HardwareConfig | None, *, n=None, d: int, nk=None,
                          heads: int = 1, kv_heads=None, batch=None, causal: bool = False,
                          seqlens=None, seqlens_k=None, window=(-1, -1), page_size: int = 0,
                          decode: bool = False, cache_lens=None, lse: bool = False,
                          d_v: int | None = None, v_in_k: bool = False,
                          flag=lambda name: name) -> Workload | VarlenWorkload:
    """The workload of the CLI's and the API's options, the one place they are chosen: one
    shape (``n``, ``nk``, ``batch``), a varlen batch (``seqlens``, ``seqlens_k``) or a decode
    batch (``decode`` with ``cache_lens``: ``n`` new queries a sequence, default 1, against
    caches of these lengths, a varlen batch of ``[n]·B`` and ``cache_lens``); a mix of them
    is refused, naming the option as ``flag(name)`` spells it (``--seqlens`` on the CLI)."""
    common = {"d": d, "heads": heads, "kv_heads": kv_heads, "causal": causal, "window": window,
              "page_size": page_size, "lse": lse, "d_v": d_v, "v_in_k": v_in_k}
    if decode or cache_lens is not None:
        if not decode or cache_lens is None:
            raise bad(flag("decode"), decode, f"give {flag('decode')} with "
                      f"{flag('cache_lens')} (each sequence's cache length)")
        for name, value in (("nk", nk), ("batch", batch), ("seqlens", seqlens),
                            ("seqlens_k", seqlens_k)):
            if value is not None:
                raise bad(flag(name), value, f"leave it out with {flag('decode')}: "
                          f"{flag('cache_lens')} gives each sequence's keys, {flag('n')} its "
                          "new queries")
        q = 1 if n is None else n
        return VarlenWorkload.from_options(hw, seqlens=[q] * len(cache_lens), nk=cache_lens,
                                           **common)
    if seqlens is None:
        if seqlens_k is not None:
            raise bad(flag("seqlens_k"), seqlens_k, f"give it with {flag('seqlens')}")
        if n is None:
            raise bad(flag("n"), None, f"give {flag('n')} (one length), {flag('seqlens')} "
                      f"(a varlen batch) or {flag('decode')} {flag('cache_lens')} (a decode "
                      "batch)")
        return Workload.from_options(hw, n=n, nk=nk, batch=1 if batch is None else batch,
                                     **common)
    for name, value in (("n", n), ("nk", nk), ("batch", batch)):
        if value is not None:
            raise bad(flag(name), value, f"leave it out with {flag('seqlens')}: the lengths "
                      f"give each sequence ({flag('seqlens_k')} their keys)")
    return VarlenWorkload.from_options(hw, seqlens=seqlens, nk=seqlens_k, **common)
