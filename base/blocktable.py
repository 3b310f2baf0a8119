"""A paged K/V cache's block table, the caller's (FlashAttention's ``block_table``, vLLM's) or
the seeded shuffle a run makes without one: which page of the pool holds page g of sequence
i's cache, validated once, and read by the layout, the program, the DRAM image, the closed-form
traffic and the integer model (none of them gathers the pages into a copy)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attenio.base.errors import ConfigError, bad

__all__ = ["BlockTable", "PAD", "MAX_PAGES", "load_block_table", "check_lengths"]

PAD = -1                # an unused trailing entry (vLLM pads its tables with −1)
MAX_PAGES = 1 << 24     # pages a pool may hold (the table entry's address bits / page pitch)


def _ints(name: str, values, lo: int, hi: int, what: str) -> list[int]:
    """``values`` as Python ints, each an integer in [lo, hi] (bools, floats and strings
    refused, naming the entry: a 0.7 is never truncated to 0)."""
    out = []
    for j, x in enumerate(values):
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
            raise bad(f"{name}[{j}]", x if not isinstance(x, np.generic) else x.item(),
                      f"must be an integer in [{lo}, {hi}] ({what})")
        if not lo <= int(x) <= hi:
            raise bad(f"{name}[{j}]", int(x), f"must be in [{lo}, {hi}] ({what})")
        out.append(int(x))
    return out


def _rows(name: str, table) -> list[list]:
    """A table as a list of rows (a 2-D array, or a list of lists of possibly unequal length)."""
    if isinstance(table, np.ndarray):
        if table.ndim != 2:
            raise bad(name, f"an array of shape {table.shape}",
                      "a 2-D array [sequences, pages] of page indices")
        return [list(r) for r in table]
    if isinstance(table, (str, bytes)) or not hasattr(table, "__len__"):
        raise bad(name, table, "a list of rows of page indices, one row per sequence")
    rows = []
    for i, r in enumerate(table):
        if isinstance(r, (str, bytes)) or not hasattr(r, "__len__"):
            raise bad(f"{name}[{i}]", r, "a row of page indices")
        rows.append(list(np.asarray(r).tolist()) if isinstance(r, np.ndarray) else list(r))
    return rows


def check_lengths(name: str, lens, hi: int, what: str) -> tuple[int, ...]:
    """Cache lengths: integers in [0, hi] (0: an empty cache; ``what`` says where ``hi``
    comes from)."""
    if isinstance(lens, np.ndarray):
        lens = lens.reshape(-1).tolist() if lens.dtype.kind in "iu" else list(lens.reshape(-1))
    if isinstance(lens, (str, bytes)) or not hasattr(lens, "__len__"):
        raise bad(name, lens, "a list of cache lengths, one per sequence")
    return tuple(_ints(name, lens, 0, hi, what))


@dataclass(frozen=True)
class BlockTable:
    """Sequence i's key j lies in page ``rows[i][j // page_size]`` of a pool of ``pages``
    pages, row ``j % page_size`` of it. ``rows`` are as given (their width, trailing −1
    entries and pages shared between sequences kept: prefix caching); a row holds at least
    the ``⌈cache_lens[i] / page_size⌉`` pages its sequence needs, each in [0, pages).
    ``source``: ``"caller"`` or ``"shuffle"`` (the seeded permutation a run makes without a
    table: each row exactly its pages, every page used once)."""

    rows: tuple[tuple[int, ...], ...]
    cache_lens: tuple[int, ...]
    page_size: int
    pages: int
    source: str = "caller"
    seed: int | None = None

    @classmethod
    def of(cls, table, cache_lens, page_size: int, pages: int | None = None,
           name: str = "block_table", what: str = "a page of the pool") -> BlockTable:
        """The caller's ``table`` checked against ``cache_lens`` (one per row) and a pool of
        ``pages`` pages (default: one more than its largest entry). Raises ConfigError naming
        the sequence, the entry and the valid range: a row count that disagrees with the
        lengths, a non-integer entry, a page outside the pool, a −1 where the sequence needs a
        page, too few pages for a length."""
        rows = _rows(name, table)
        lens = check_lengths("cache_seqlens", cache_lens, MAX_PAGES * page_size,
                             "keys in the sequence's cache")
        if len(rows) != len(lens):
            raise bad(name, f"{len(rows)} rows", f"one per sequence: {len(lens)} "
                      "(cache_seqlens has one length per sequence)")
        if pages is None:
            flat = [x for r in rows for x in r
                    if isinstance(x, (int, np.integer)) and not isinstance(x, bool)]
            pages = max(1, 1 + max(flat, default=0))
        out = []
        for i, (r, n) in enumerate(zip(rows, lens, strict=True)):
            need = -(-n // page_size)
            vals = _ints(f"{name}[{i}]", r, PAD, pages - 1, f"{what}, 0 … {pages - 1}, or "
                         f"{PAD} for an unused entry")
            if len(vals) < need:
                raise bad(f"{name}[{i}]", f"{len(vals)} pages", f"sequence {i} has "
                          f"{n} keys: it needs {need} pages of {page_size}")
            for g, x in enumerate(vals[:need]):
                if x == PAD:
                    raise bad(f"{name}[{i}][{g}]", x, f"sequence {i} needs page {g} (its keys "
                              f"{g * page_size} … {min(n, (g + 1) * page_size) - 1}): an "
                              f"entry in [0, {pages - 1}]")
            out.append(tuple(vals))
        return cls(tuple(out), lens, page_size, pages)

    @classmethod
    def shuffle(cls, cache_lens, page_size: int, seed: int = 0) -> BlockTable:
        """Each sequence's pages in a seeded shuffle of ``0 … pages−1`` (pages anywhere in the
        pool, in no order, none shared)."""
        need = [-(-n // page_size) for n in cache_lens]
        perm = np.random.default_rng(seed).permutation(sum(need)).tolist()
        rows, at = [], 0
        for n in need:
            rows.append(tuple(perm[at:at + n]))
            at += n
        return cls(tuple(rows), tuple(cache_lens), page_size, sum(need), "shuffle", seed)

    @property
    def sequences(self) -> int:
        return len(self.rows)

    def need(self, i: int) -> int:
        """Pages sequence ``i`` touches."""
        return -(-self.cache_lens[i] // self.page_size)

    def used(self, i: int) -> tuple[int, ...]:
        """The pages sequence ``i`` touches, in its key order."""
        return self.rows[i][:self.need(i)]

    @property
    def packed(self) -> bool:
        """The table lies in DRAM row after row of exactly the pages each sequence touches
        (the shuffle's); the caller's keeps its width, row i at ``i · width`` entries."""
        return self.source == "shuffle"

    @property
    def width(self) -> int:
        return max(len(r) for r in self.rows)

    def table_start(self, i: int) -> int:
        """Entry of the tables region where sequence ``i``'s row begins."""
        if self.packed:
            return sum(self.need(s) for s in range(i))
        return i * self.width

    @property
    def entries(self) -> int:
        """Entries the tables region holds."""
        return sum(self.need(s) for s in range(self.sequences)) if self.packed \
            else self.sequences * self.width

    def image_rows(self) -> list[list[int]]:
        """The rows as the tables region holds them (``PAD`` past a row's end)."""
        if self.packed:
            return [list(self.used(i)) for i in range(self.sequences)]
        return [list(r) + [PAD] * (self.width - len(r)) for r in self.rows]

    def key_rows(self, i: int) -> np.ndarray:
        """Sequence ``i``'s keys as rows of the pool (``page · page_size + offset``), in key
        order: where the integer model and the hardware read them."""
        j = np.arange(self.cache_lens[i])
        pages = np.asarray(self.used(i), dtype=np.int64)
        return pages[j // self.page_size] * self.page_size + j % self.page_size

    @property
    def shared_pages(self) -> int:
        """Pages that more than one sequence touches (prefix caching)."""
        seen: dict[int, int] = {}
        for i in range(self.sequences):
            for p in set(self.used(i)):
                seen[p] = seen.get(p, 0) + 1
        return sum(1 for c in seen.values() if c > 1)

    def to_dict(self) -> dict:
        """What a report records: the table as given, the cache lengths, the page size."""
        return {"block_table": [list(r) for r in self.rows],
                "cache_lens": list(self.cache_lens), "page_size": self.page_size,
                "pages": self.pages, "source": self.source,
                **({"seed": self.seed} if self.seed is not None else {})}


def load_block_table(path: str) -> list[list[int]]:
    """A block table from a file: JSON (a list of lists of page indices) or NumPy ``.npy``
    (a 2-D integer array). Raises ConfigError naming the file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"block_table={path!r} is invalid: no such file")
    if p.suffix == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except (ValueError, OSError) as e:
            raise ConfigError(f"block_table={path!r} is invalid: not a NumPy .npy file "
                              f"({e})") from None
        if arr.ndim != 2 or arr.dtype.kind not in "iu":
            raise ConfigError(f"block_table={path!r} is invalid: a 2-D integer array "
                              f"[sequences, pages], not {arr.dtype} of shape {arr.shape}")
        return arr.tolist()
    try:
        data = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"block_table={path!r} is invalid: not JSON ({e}); give a list of "
                          "lists of page indices or a .npy file") from None
    if isinstance(data, dict) and "block_table" in data:
        data = data["block_table"]      # a report's record reads back
    if not isinstance(data, list) or not all(isinstance(r, list) for r in data):
        raise ConfigError(f"block_table={path!r} is invalid: a JSON list of lists of page "
                          "indices, one list per sequence")
    return data
