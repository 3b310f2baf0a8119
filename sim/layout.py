"""Where a run's program and tensors lie in DRAM (``Layout.packed``): the schedule generator
emits addresses from it and the host image (sim/image.py) writes the bytes there."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attenio.base.blocktable import PAD, BlockTable
from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import bad
from attenio.contract.rules import ENTRY_BYTES, PAGE_ALIGN_LOG2

__all__ = ["Layout", "PagedCache", "block_table_for", "k_page_elements"]


def _up(x: int, to: int = 4096) -> int:
    return -(-x // to) * to


@dataclass(frozen=True)
class PagedCache:
    """A paged K/V cache (``Workload.page_size`` > 0): pools of page slots and the block
    table (:class:`attenio.base.blocktable.BlockTable`, the caller's or the seeded shuffle).

    A slot of the K pool holds one page of ``page_size`` keys of every K/V head, head by head
    (head h's rows at ``h·k_head`` bytes into the slot, so a head's rows in a page are
    contiguous; with K factors each group of rows after the word of their factors); the V
    pool, right after it, the same for V at the same slot. Sequence i's
    page g lies in slot ``slots[i][g]``; its table row (``table_start[i]`` entries into the
    tables region) holds each page's K address ``>> PAGE_ALIGN_LOG2`` (an unused entry,
    −1 in the caller's table, as all ones)."""

    page_size: int
    pitch: int                       # bytes of a slot (a multiple of 64 and of the AXI word)
    table: BlockTable
    k_head: int                      # bytes of a K/V head's K rows in a slot (and V's rows)
    v_head: int

    @classmethod
    def place(cls, hw: HardwareConfig, wl, table: BlockTable,
              key_scales: bool = False, value_scales: bool = False) -> PagedCache:
        """The slots of ``wl``'s pages as ``table`` places them. With ``key_scales`` a head's
        K rows in a page are led, each :meth:`~HardwareConfig.factor_group` of them, by the
        word of their factors (:func:`k_page_elements`); with ``value_scales`` its V rows
        likewise."""
        eb = hw.element_bytes
        k_head = k_page_elements(hw, wl.head_dim, wl.page_size, key_scales) * eb
        v_head = k_page_elements(hw, wl.d_v, wl.page_size, value_scales) * eb
        pitch = _up(wl.kv_heads * max(k_head, v_head),
                    max(1 << PAGE_ALIGN_LOG2, hw.axi_data_bytes))
        return cls(wl.page_size, pitch, table, k_head, v_head)

    @property
    def slots(self) -> tuple[tuple[int, ...], ...]:
        """Each sequence's pages, the ones it touches."""
        return tuple(self.table.used(i) for i in range(self.table.sequences))

    @property
    def table_start(self) -> tuple[int, ...]:
        return tuple(self.table.table_start(i) for i in range(self.table.sequences))

    @property
    def n_slots(self) -> int:
        return self.table.pages

    def table_words(self, k_pool: int) -> np.ndarray:
        """The tables region's entries: each row as the table lies (unused entries all ones)."""
        out = [(k_pool + s * self.pitch) >> PAGE_ALIGN_LOG2 if s != PAD else 0xFFFF_FFFF
               for r in self.table.image_rows() for s in r]
        return np.asarray(out, dtype="<u4")

    @property
    def table_bytes(self) -> int:
        return ENTRY_BYTES * self.table.entries


def k_page_elements(hw: HardwareConfig, d: int, page_size: int, key_scales: bool = False) -> int:
    """Elements of one K/V head's K rows (or V rows) in a page slot: ``page_size`` rows of
    :meth:`~HardwareConfig.row_elements`, with factors (``key_scales``, ``value_scales``) a
    word of them before each :meth:`~HardwareConfig.factor_group` of rows."""
    rows = page_size * hw.row_elements(d)
    if not key_scales:
        return rows
    return rows + page_size // hw.factor_group(page_size) * hw.macs_per_line


def block_table_for(wl, block_table=None, seed: int = 0) -> BlockTable:
    """The block table of a paged ``wl``: ``block_table`` (a :class:`BlockTable`, or the
    caller's rows, checked against the sequences' key counts) or the seeded shuffle."""
    lens = [seg.seq_k for seg in wl.segments()]
    if block_table is None:
        return BlockTable.shuffle(lens, wl.page_size, seed)
    if isinstance(block_table, BlockTable):
        if list(block_table.cache_lens) != lens or block_table.page_size != wl.page_size:
            raise bad("block_table", f"cache lengths {list(block_table.cache_lens)}, page "
                      f"size {block_table.page_size}", f"the workload's: {lens}, page size "
                      f"{wl.page_size}")
        return block_table
    return BlockTable.of(block_table, lens, wl.page_size)


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
    # Q and O rows position by position, a position's heads side by side ([batch, seq_q,
    # heads, row], as FlashAttention's tensors lie); head by head otherwise ([batch, heads,
    # seq_q, row]). Tiles whose heads interleave (COMPUTE.head_pos) then move a position's
    # rows in one burst.
    token_major: bool = False

    @classmethod
    def packed(cls, hw: HardwareConfig, wl: Workload, program_bytes: int,
               row_scales: bool = False, key_scales: bool = False,
               block_table: BlockTable | None = None, sinks: bool = False,
               token_major: bool = False, value_scales: bool = False) -> Layout:
        """Program, Q, K, V and O one after another, each region 4 KB aligned; with
        ``row_scales`` each Q row is followed by the word holding its multiplier (its side
        words with ``sinks``: :meth:`HardwareConfig.q_side_words`), with
        ``key_scales`` each K row by the word holding its factor. A paged workload
        (``page_size`` > 0) has page pools for K and V (:class:`PagedCache`, its pages as
        ``block_table`` places them: the caller's, or the seeded shuffle) and the block
        tables after V. ``token_major``: Q and O rows position by position (the field's
        comment)."""
        eb = hw.element_bytes
        dp = hw.row_elements(wl.d_v)           # V rows padded to whole words
        qb = wl.batch * wl.heads * wl.seq_q * hw.q_row_elements(wl.head_dim, row_scales,
                                                                      sinks) * eb
        paged = None
        if wl.page_size:
            paged = PagedCache.place(hw, wl, block_table_for(wl, block_table), key_scales,
                                     value_scales)
            kb = vb = paged.n_slots * paged.pitch
            vb = 0 if wl.v_in_k else vb     # V read from K's rows: no V pool
        else:
            kb = wl.batch * wl.kv_heads * wl.seq_k * hw.k_row_elements(wl.head_dim, key_scales) \
                * eb
            vb = 0 if wl.v_in_k else wl.batch * wl.kv_heads * wl.seq_k * dp * eb
        p = 0
        q = _up(p + program_bytes)
        k = _up(q + qb)
        v = _up(k + kb) if paged is None else k + kb    # the V pool: K's slots' distance on
        tables = o = _up(v + vb)
        if paged is not None:                   # the block tables, read like the inputs
            o = _up(tables + paged.table_bytes)
        end = _up(o + hw.o_bytes(wl))
        return cls(program=p, q=q, k=k, v=v, o=o, end=end, tables=tables, paged=paged,
                   token_major=token_major)

    @cached_property
    def table_words(self) -> np.ndarray:
        """The tables region's entries (paged layouts)."""
        return self.paged.table_words(self.k)

    def entries(self, table: int, n: int) -> list[int]:
        """The ``n`` block-table entries from byte ``table`` (paged layouts)."""
        i = (table - self.tables) // ENTRY_BYTES
        return [int(x) for x in self.table_words[i:i + n]]
