"""Shared prefixes read once (issue #46): decode sequences whose block tables begin with the
same pages (prefix caching) share one tile per K/V head. The tile holds every sharing
sequence's query heads as its rows; its first part streams the shared pages once for all of
them, then one part per sequence streams that sequence's own pages to its rows alone
(``COMPUTE.select``), each continuing the rows' online softmax (``COMPUTE.cont``): one softmax
over the shared and own keys, in the order the sequence's table lists them, so every row's
result is the one its own decode gives (the integer datapath's result does not depend on how
many keys a step takes). docs/dataflows.md, "Shared prefixes"."""

from __future__ import annotations

from typing import NamedTuple

from attenio.base.blocktable import BlockTable
from attenio.base.config import HardwareConfig, VarlenWorkload
from attenio.contract.rules import ENTRY_BYTES, PageWalk
from attenio.model import io_analysis as io

__all__ = ["SharedTile", "shared_runs", "can_share", "run_traffic"]

HEADS_MAX = 255        # a tile's heads field (8 bits): the sequences one shared tile holds


class SharedTile(NamedTuple):
    """One shared tile: K/V head ``hk``, sequences ``first … first + len(own) − 1`` (their
    query rows consecutive in Q and O), ``keys`` shared keys (whole pages), and each
    sequence's own keys after them."""

    first: int
    hk: int
    keys: int
    own: tuple[int, ...]

    @property
    def seqs(self) -> int:
        return len(self.own)

    @property
    def instructions(self) -> int:
        """LOAD_Q, a LOAD_KV and COMPUTE for the shared keys and for each sequence with keys
        of its own, FINALIZE, STORE_O."""
        return 4 + 2 * (1 + sum(1 for k in self.own if k))


def can_share(wl, dataflow: str, alibi: bool) -> str | None:
    """Why ``wl`` cannot read shared prefixes once (``None``: it can): a paged varlen decode
    (one query a sequence) on the attenio dataflow, no window, no ALiBi (whose distance a
    shared part would measure from one sequence's position)."""
    if dataflow != "attenio":
        return f"the {dataflow} dataflow"
    if not isinstance(wl, VarlenWorkload) or not wl.page_size:
        return "not a paged varlen batch"
    if any(q != 1 for q in wl.seqlens_q):
        return "not a decode batch (one query a sequence)"
    if wl.window_left >= 0 or wl.window_right >= 0:
        return "a sliding window"
    if alibi:
        return "ALiBi"
    return None


def shared_runs(hw: HardwareConfig, wl: VarlenWorkload, table: BlockTable
                ) -> list[tuple[int, int, int]]:
    """Runs of consecutive sequences whose tables begin with the same pages: (first sequence,
    sequences, shared pages), each run at least two sequences sharing at least one whole page
    (a page every member fills: ``pages · page_size`` ≤ each one's keys). A group longer than
    a tile holds (:data:`HEADS_MAX` sequences, ``tile_rows`` query rows) is cut into runs of
    near-equal length (each reads the prefix once, its shared part's compute hiding the
    other's reads better than one full run and a short one). Sequences in no run keep their
    own tiles."""
    cap = max(1, min(HEADS_MAX, hw.tile_rows // wl.group_size))
    out = []
    i, n = 0, table.sequences
    while i < n:
        j = i + 1
        while j < n and _shared_pages(wl, table, i, j, j + 1):
            j += 1
        if j - i < 2:
            i += 1
            continue
        k = -(-(j - i) // cap)
        cuts = [i + (j - i) * c // k for c in range(k + 1)]
        for a, b in zip(cuts, cuts[1:], strict=False):
            if b - a >= 2:
                out.append((a, b - a, _shared_pages(wl, table, a, a + 1, b)))
        i = j
    return out


def _shared_pages(wl, table: BlockTable, first: int, lo: int, hi: int) -> int:
    """Whole pages sequences ``lo … hi−1`` share with sequence ``first`` (and it with them),
    each filled by every one of them."""
    page = wl.page_size
    out = table.cache_lens[first] // page
    for j in range(lo, hi):
        out = min(out, _common(table.used(first), table.used(j)), table.cache_lens[j] // page)
    return out


def _common(a, b) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def run_traffic(hw: HardwareConfig, wl: VarlenWorkload, runs, table: BlockTable,
                side: bool = False, key_scales: bool = False,
                row_scales: bool = False, value_scales: bool = False) -> io.Traffic:
    """The closed form of the traffic of ``runs``' shared tiles: per K/V head, every
    sequence's Q rows once and its O rows (with ``lse`` its statistics' words), the shared
    keys' K and V rows once, each sequence's own keys' once, and the block-table words each
    ``LOAD_KV`` reads (the shared walk from the first sequence's row, each own walk from its
    row's entry past the shared pages; ``contract.rules.PageWalk``). ``side``: the Q rows
    carry their side words (sinks); ``key_scales``: each page's K factor words (``KF``);
    ``row_scales``: each Q row its multiplier's word; ``value_scales``: its V factor words
    (``VF``, as many)."""
    page, g = wl.page_size, wl.group_size
    fg = io.factor_group(hw, wl, key_scales or value_scales)
    q_side = io._q_side(hw, side, row_scales)
    fnames = [n for n, on in (("KF", key_scales), ("VF", value_scales)) if on]
    reads = {"Q": 0, "K": 0, "V": 0, **dict.fromkeys(fnames, 0)}
    writes = {"O": 0, **({"LSE": 0} if wl.lse else {})}
    words = 0

    def walk(start: int, keys: int) -> int:
        return PageWalk(ENTRY_BYTES * start, keys, page.bit_length() - 1,
                        hw.axi_data_bytes).words

    for first, n, pages in runs:
        keys = pages * page + sum(wl.seqlens_k[i] - pages * page
                                  for i in range(first, first + n))
        reads["Q"] += n * g * (wl.head_dim + q_side)
        reads["K"] += keys * wl.head_dim
        reads["V"] += 0 if wl.v_in_k else keys * wl.d_v
        for f_ in fnames:       # every walk starts on a page, whose groups lie whole in it
            reads[f_] += hw.macs_per_line * (-(-pages * page // fg) + sum(
                -(-(wl.seqlens_k[i] - pages * page) // fg) for i in range(first, first + n)))
        writes["O"] += n * g * wl.d_v
        if wl.lse:
            writes["LSE"] += n * g * hw.macs_per_line
        words += walk(table.table_start(first), pages * page) + sum(
            walk(table.table_start(i) + pages, wl.seqlens_k[i] - pages * page)
            for i in range(first, first + n) if wl.seqlens_k[i] > pages * page)
    t = io._make(hw, reads, writes).scaled(wl.kv_heads)
    return io.Traffic(t.reads, t.writes, t.read_bytes + wl.kv_heads * words * hw.axi_data_bytes,
                      t.write_bytes)
