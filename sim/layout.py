"""Where a run's program and tensors lie in DRAM (``Layout.packed``): the schedule generator
emits addresses from it and the host image (sim/image.py) writes the bytes there."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attenio.config import HardwareConfig, Workload
from attenio.contract.rules import ENTRY_BYTES, PAGE_ALIGN_LOG2
from attenio.errors import bad

__all__ = ["Layout", "PagedCache", "check_block_tables"]


def _up(x: int, to: int = 4096) -> int:
    return -(-x // to) * to


@dataclass(frozen=True)
class PagedCache:
    """A paged K/V cache (``Workload.page_size`` > 0): pools of page slots and one block table
    per sequence.

    A slot of the K pool holds one page of ``page_size`` keys of every K/V head, head by head
    (head h's rows at ``h·page_size`` rows into the slot, so a head's rows in a page are
    contiguous); the V pool, right after it, the same for V at the same slot. Sequence i's
    page g lies in slot ``slots[i][g]``; its table (``table_start[i]`` entries into the tables
    region) holds each page's K address ``>> PAGE_ALIGN_LOG2``."""

    page_size: int
    pitch: int                       # bytes of a slot (a multiple of 64 and of the AXI word)
    slots: tuple[tuple[int, ...], ...]
    table_start: tuple[int, ...]
    n_slots: int

    @classmethod
    def place(cls, hw: HardwareConfig, wl, key_scales: bool = False, block_tables=None,
              seed: int = 0) -> PagedCache:
        """Page slots for ``wl``'s sequences: ``block_tables`` (one list of slot indices per
        sequence, FlashAttention's ``block_table``) or, by default, a seeded shuffle of
        ``0 … pages−1`` (pages anywhere in the pool, in no order)."""
        p = wl.page_size
        eb = hw.element_bytes
        row = max(hw.k_row_elements(wl.head_dim, key_scales), hw.row_elements(wl.head_dim)) * eb
        pitch = _up(wl.kv_heads * p * row, max(1 << PAGE_ALIGN_LOG2, hw.axi_data_bytes))
        need = [-(-seg.seq_k // p) for seg in wl.segments()]
        starts = [0]
        for n in need:
            starts.append(starts[-1] + n)
        if block_tables is None:
            perm = np.random.default_rng(seed).permutation(starts[-1])
            slots = tuple(tuple(int(x) for x in perm[a:b])
                          for a, b in zip(starts[:-1], starts[1:], strict=True))
            n_slots = starts[-1]
        else:
            slots = check_block_tables(block_tables, need)
            n_slots = 1 + max(max(t) for t in slots)
        return cls(p, pitch, slots, tuple(starts[:-1]), n_slots)

    def table_words(self, k_pool: int) -> np.ndarray:
        """Every sequence's table, one after another: the entries the tables region holds."""
        out = [(k_pool + s * self.pitch) >> PAGE_ALIGN_LOG2 for t in self.slots for s in t]
        return np.asarray(out, dtype="<u4")

    @property
    def table_bytes(self) -> int:
        return ENTRY_BYTES * sum(len(t) for t in self.slots)


def check_block_tables(tables, need: list[int], pages: int = 1 << 24,
                       what: str = "a page index") -> tuple[tuple[int, ...], ...]:
    """FlashAttention's ``block_table`` (a row of page indices per sequence) checked against
    the pages each sequence ``need``s and the ``pages`` there are: each row's first
    ``need[i]`` entries. Raises ConfigError naming the row or the entry."""
    if len(tables) != len(need):
        raise bad("block_table", f"{len(tables)} rows", f"one per sequence: {len(need)}")
    out = []
    for i, (row, n) in enumerate(zip(tables, need, strict=True)):
        row = [int(x) for x in row]
        if len(row) < n:
            raise bad(f"block_table[{i}]", f"{len(row)} pages", f"the sequence needs {n}")
        for g, x in enumerate(row[:n]):
            if not 0 <= x < pages:
                raise bad(f"block_table[{i}][{g}]", x, f"must be {what} in [0, {pages})")
        out.append(tuple(row[:n]))
    return tuple(out)


@dataclass(frozen=True)
class Layout:
    """Byte addresses of the program and the tensors in DRAM (all 4 KB aligned). A paged
    cache (``paged``) puts K's and V's page pools at ``k`` and ``v`` and the block tables at
    ``tables`` (between V and O, so a read window from 0 to O covers them)."""

    program: int
    q: int
    k: int
    v: int
    o: int
    end: int
    tables: int = 0
    paged: PagedCache | None = None

    @classmethod
    def packed(cls, hw: HardwareConfig, wl: Workload, program_bytes: int,
               row_scales: bool = False, key_scales: bool = False,
               block_tables=None) -> Layout:
        """Program, Q, K, V and O one after another, each region 4 KB aligned; with
        ``row_scales`` each Q row is followed by the word holding its multiplier, with
        ``key_scales`` each K row by the word holding its factor. A paged workload
        (``page_size`` > 0) has page pools for K and V (:class:`PagedCache`) and the block
        tables after V."""
        eb = hw.element_bytes
        dp = hw.row_elements(wl.head_dim)      # rows padded to whole words
        qb = wl.batch * wl.heads * wl.seq_q * hw.q_row_elements(wl.head_dim, row_scales) * eb
        paged = None
        if wl.page_size:
            paged = PagedCache.place(hw, wl, key_scales, block_tables)
            kb = vb = paged.n_slots * paged.pitch
        else:
            kb = wl.batch * wl.kv_heads * wl.seq_k * hw.k_row_elements(wl.head_dim, key_scales) \
                * eb
            vb = wl.batch * wl.kv_heads * wl.seq_k * dp * eb
        p = 0
        q = _up(p + program_bytes)
        k = _up(q + qb)
        v = _up(k + kb) if paged is None else k + kb    # the V pool: K's slots' distance on
        tables = o = _up(v + vb)
        if paged is not None:                   # the block tables, read like the inputs
            o = _up(tables + paged.table_bytes)
        end = _up(o + hw.o_bytes(wl))
        return cls(program=p, q=q, k=k, v=v, o=o, end=end, tables=tables, paged=paged)

    @cached_property
    def table_words(self) -> np.ndarray:
        """The tables region's entries (paged layouts)."""
        return self.paged.table_words(self.k)

    def entries(self, table: int, n: int) -> list[int]:
        """The ``n`` block-table entries from byte ``table`` (paged layouts)."""
        i = (table - self.tables) // ENTRY_BYTES
        return [int(x) for x in self.table_words[i:i + n]]
