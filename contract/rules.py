"""Rules every layer shares, stated once: the order K/V blocks stream in and causal visibility.

The schedule generator, the golden models, the RTL (these functions take Amaranth values as
well as integers and NumPy arrays) and the test benches all call these.
"""

from __future__ import annotations

from attenio.base.errors import bad

__all__ = ["kv_blocks_during", "kv_order", "next_is_v", "causal_visible", "window_visible",
           "visible",
           "key_span", "check_window", "keys_seen", "skipped_groups", "groups_seen_to",
           "groups_started",
           "axi_bursts",
           "ENTRY_BYTES", "PAGE_ALIGN_LOG2", "PageWalk"]

UNBOUNDED = -1     # a window side of -1 reaches the sequence's end (FlashAttention's window_size)


def kv_blocks_during(step: int, steps: int) -> list[tuple[str, int]]:
    """The K/V blocks loaded while step ``step`` computes ``Q Kᵀ``: the next step's K, then this
    step's V (``V_j`` arrives during ``Q·K_jᵀ``, ``K_{j+1}`` during ``P·V_j``)."""
    return ([("K", step + 1)] if step + 1 < steps else []) + [("V", step)]


def kv_order(steps: int) -> list[tuple[str, int]]:
    """Every block of a tile of ``steps`` steps in stream order: ``K0, K1, V0, K2, V1, …``."""
    if steps <= 0:
        return []
    out = [("K", 0)]
    for s in range(steps):
        out += kv_blocks_during(s, steps)
    return out


def next_is_v(ks, vs, steps):
    """The block after ``ks`` K and ``vs`` V blocks is a V block (else K block ``ks``): K goes
    first while it is at most one step ahead of V. Integers or Amaranth values."""
    k_next = (ks < steps) & (ks <= vs + 1)
    return (not k_next) if isinstance(k_next, bool) else ~k_next


def causal_visible(key, row, diag):
    """Query ``row`` sees ``key`` under the causal mask (bottom-right aligned, as FA-2 does:
    ``diag = seq_k − seq_q``). Integers, NumPy arrays or Amaranth values."""
    return key <= row + diag


def window_visible(key, row, win_diag):
    """Query ``row`` sees ``key`` under a window's lower edge, ``win_diag = diag − left``
    (relative to the first key a tile streams). Integers, NumPy arrays or Amaranth values."""
    return key >= row + win_diag


def check_window(window) -> tuple[int, int]:
    """``window`` as ``(left, right)`` integers, each ≥ −1 (−1: unbounded on that side, as
    FlashAttention's ``window_size``). Raises ConfigError naming the bad value."""
    try:
        left, right = window
    except (TypeError, ValueError):
        raise bad("window", window, "must be (left, right), each -1 (unbounded) or a number "
                  "of keys ≥ 0") from None
    for side, x in (("left", left), ("right", right)):
        if isinstance(x, bool) or not isinstance(x, int) or x < UNBOUNDED:
            raise bad(f"window {side}", x, "must be -1 (unbounded) or a number of keys ≥ 0")
    return left, right


def visible(key, row, diag, causal: bool = False, window=(UNBOUNDED, UNBOUNDED)):
    """Query ``row`` sees ``key`` (``diag = seq_k − seq_q``, aligned at the bottom right as
    FlashAttention aligns both): with ``causal``, ``key ≤ row + diag``; with a sliding
    ``window = (left, right)``, ``row + diag − left ≤ key ≤ row + diag + right`` (−1: that
    side unbounded). Returns ``None`` when nothing is masked; else booleans (NumPy)."""
    left, right = window
    out = None

    def both(a, b):
        return b if a is None else a & b

    centre = row + diag
    if causal:
        out = both(out, causal_visible(key, row, diag))
    if left != UNBOUNDED:
        out = both(out, window_visible(key, row, diag - left))
    if right != UNBOUNDED:
        out = both(out, key <= centre + right)
    return out


def key_span(row_lo: int, row_hi: int, diag: int, keys: int, causal: bool = False,
             window=(UNBOUNDED, UNBOUNDED)) -> tuple[int, int]:
    """The keys ``[first, end)`` that some row of ``row_lo … row_hi`` may see (:func:`visible`):
    what a tile of those rows must read; ``first ≥ end`` when none."""
    left, right = window
    end = keys
    if causal:
        end = min(end, row_hi + diag + 1)
    if right != UNBOUNDED:
        end = min(end, row_hi + diag + right + 1)
    first = max(0, row_lo + diag - left) if left != UNBOUNDED else 0
    return first, max(0, end)


def skips_row_groups(masked, one_head, one_key, groups):
    """A tile skips row groups step by step when its mask hides something (``masked``: causal,
    or a window's left edge), its rows' positions rise with the tile's row (one head, or
    ``COMPUTE.head_pos``: GQA packing shares no diagonal otherwise), it takes one key a step
    and has more than one row group: below a causal step's first row that sees it
    (:func:`skipped_groups`), above a window step's last (:func:`groups_seen_to`). The
    schedule's tile loop and the compute core's command decode both ask this. Integers and
    booleans, or Amaranth values."""
    return masked & one_head & one_key & (groups > 1)


def skipped_groups(first_key: int, q_pos: int, diag: int, lines: int, groups: int) -> int:
    """Row groups (of ``lines`` positions, from the tile's first) that see no key of a causal
    step whose first key is ``first_key``: position ρ sees it only if ``ρ ≥ first_key − q_pos −
    diag``. The last group is never skipped (a tile's keys stop at its last row's), nor is any
    at the tile's first step (``first_key`` 0): it starts every row's softmax, so a group that
    sees no key at all ends with its reset (or its sinks), not the last tile's m, ℓ and O; nor
    at its second, whose Q Kᵀ follows the first's with no P V between (a group issued earlier
    in it than in the first would read its m, ℓ before the first step's softmax wrote them)."""
    t = first_key - q_pos - diag
    return min(t // lines, groups - 1) if t > 0 and first_key > 1 else 0


def groups_seen_to(last_key: int, first_key: int, q_pos: int, win_diag: int, lines: int,
                   groups: int, starts: bool = False) -> int:
    """One past the last row group (of ``lines`` positions) that sees a key of a window's step
    whose keys are ``first_key … last_key``: position ρ sees key j only if ``j ≥ q_pos + ρ +
    win_diag``, so the groups wholly above ``last_key − q_pos − win_diag`` skip it. At least
    the first group stays (the caller keeps at least one past the causal skip's). With
    ``starts`` (a tile of one part: ``COMPUTE`` without ``more`` or ``cont``) each group starts
    its rows' softmax and O at the first step that issues it (:func:`groups_started`), so the
    cut holds from step 0; otherwise every group issues at the tile's first two steps (as
    :func:`skipped_groups`: the first starts every row's softmax)."""
    u = last_key - q_pos - win_diag
    if first_key <= 1 and not starts:
        return groups
    return max(1, min(u // lines + 1, groups)) if u >= 0 else 1


def groups_started(span_before: tuple[int, int] | None, groups: int) -> int:
    """The first row group that starts at a step (its rows' m, ℓ from their reset or sink, O
    from 0), given the previous step's issued groups ``span_before`` (first, one past the
    last; None at step 0, where every group starts): the groups past the previous step's
    last. A window's reach and the causal skip only rise, so every group below it was issued
    (and started) at an earlier step, and a group issued at a step its key does not reach
    (kept as the one past the causal skip) starts there with nothing seen, as it would have
    at step 0. Only a tile whose window starts its groups (``groups_seen_to``'s ``starts``)
    has groups past step 0's; elsewhere step 0 issues every group."""
    return 0 if span_before is None else min(span_before[1], groups)


def keys_seen(row: int, diag: int, keys: int) -> int:
    """How many of the first ``keys`` keys causal query ``row`` sees."""
    return max(0, min(keys, row + diag + 1))


def axi_bursts(addr: int, nbytes: int, beat_bytes: int, max_beats: int = 256):
    """The AXI4 INCR bursts of a transfer of ``nbytes`` at ``addr``: (address, bytes) pairs of
    at most ``max_beats`` beats that never cross a 4 KB line."""
    out = []
    limit = min(4096, max_beats * beat_bytes)
    while nbytes > 0:
        chunk = min(nbytes, limit, 4096 - addr % 4096)
        out.append((addr, chunk))
        addr += chunk
        nbytes -= chunk
    return out


# A paged K/V cache (docs/isa.md, "Paged K/V"): a block table of 32-bit little-endian entries,
# each a page's byte address divided by 2^PAGE_ALIGN_LOG2 (pages start on 64-byte boundaries;
# 32 bits address 256 GiB).
ENTRY_BYTES = 4
PAGE_ALIGN_LOG2 = 6


class PageWalk:
    """How a paged ``LOAD_KV`` walks its block table: the table's words (AXI beats) it reads
    and when, stated once for the schedule generator and the tests (the RTL's load engine
    implements the same order).

    The instruction's first key is key 0 of the page whose entry lies at byte ``table``; page
    ``g`` of its keys has entry ``e0 + g`` of the beat-aligned table words, ``e0 = (table mod
    beat) / 4``. Word ``j`` holds entries ``j·epb … j·epb + epb − 1`` (``epb = beat / 4``).
    Words 0 and 1 are requested first (before ``K(0)``); word ``j + 1`` right before the K
    block that starts the first page of word ``j`` (j ≥ 1). Two words are buffered, so the
    walk reads each table word once and never more than one word ahead."""

    def __init__(self, table: int, keys: int, page_log2: int, beat_bytes: int):
        self.epb = max(1, beat_bytes // ENTRY_BYTES)
        self.page = 1 << page_log2
        self.base = table - table % beat_bytes          # the first word's address
        self.e0 = (table % beat_bytes) // ENTRY_BYTES
        self.pages = -(-keys // self.page)
        self.words = -(-(self.e0 + self.pages) // self.epb)
        self.beat = beat_bytes

    def entry(self, page: int) -> tuple[int, int]:
        """(table word, index in it) of the entry of the instruction's page ``page``."""
        return divmod(self.e0 + page, self.epb)

    def words_before(self, first_key: int) -> list[int]:
        """The table words requested right before the K block whose first key is
        ``first_key`` (empty unless it starts a page)."""
        if first_key % self.page:
            return []
        g = first_key // self.page
        if g == 0:
            return list(range(min(2, self.words)))
        j, i = self.entry(g)
        return [j + 1] if i == 0 and j + 1 < self.words else []

    def word_addr(self, j: int) -> int:
        return self.base + j * self.beat
