"""Static checks of what a program does over time: can it deadlock the controller, and does
its output overwrite what it reads? (docs/isa.md, "Programs that cannot hang").

The controller's queues run decoupled, so whether a program finishes could depend on timing.
This check does not simulate a timing: it builds the graph of *waits* that the hardware
imposes whatever the timing (each event can happen only after the events it waits on) and
refuses the program when

* the graph has a cycle: every timing deadlocks (for example ``LOAD_KV`` ahead of its
  ``LOAD_Q``: the in-order load queue waits for ring space that only the tile's run frees, and
  the run waits for the Q rows behind it), or
* an event the hardware needs *in order* is ordered only by chance: ``COMPUTE`` of a tile must
  take the core after its ``LOAD_Q`` has handed the core its Q rows, or the core, busy with a
  tile whose rows it cannot take, waits forever. A token chain must order the two.

Events per instruction: dispatched, started, ended; per tile (the k-th ``LOAD_Q``, ``COMPUTE``,
``FINALIZE`` and ``STORE_O``): running (Q rows in and command taken) and done (the core idle,
its last output word taken by the store engine). The waits, from hw/ctrl/ and hw/core.py:

* dispatch is in program order; a queue holds ``Timing.queue_depth`` instructions, so an
  instruction dispatches only after the one that many places before it in its queue started;
* a queue starts an instruction after it dispatched and the previous one of that queue ended
  (taken as the end, where the hardware moves on earlier: a wait added, never one removed);
* a pop waits for the push it takes (the k-th pop of a counter for its k-th push);
* ``LOAD_Q`` starts once the Q buffer is free: the previous tile took its rows and issued its
  last step (taken as its ``COMPUTE`` ended: the rows of tile t load during the finalize and
  store of tile t−1); ``COMPUTE`` starts when the core is idle (the previous tile done); a
  tile runs once both
  started and its ``LOAD_Q`` ended; ``LOAD_KV`` ends only once its tile runs (ring space is
  freed by the run: a wait the hardware skips when the keys fit the ring);
  ``COMPUTE`` ends after the run and its ``LOAD_KV``;
* a tile is done after its ``COMPUTE`` ended and its ``STORE_O`` started (the store engine
  drains the output); ``FINALIZE`` and ``STORE_O`` end after the tile is done.

Every wait here is one the hardware has (or a stronger one), so a program this check accepts
cannot deadlock on them; a program it refuses may still run on some timings.
"""

from __future__ import annotations

from collections import deque

from attenio.base.errors import ErrorCode
from attenio.contract.isa import NEXT, PREV, Op, d_v_of, q_row_elements_of
from attenio.contract.rules import ENTRY_BYTES
from attenio.contract.timing import TIMING

__all__ = ["check_progress", "check_regions", "row_bytes"]


# what every COMPUTE of a tile (its parts: COMPUTE.cont, .more) shares with the first
PART_FIELDS = ("rows", "heads", "d", "dv", "keys_per_step", "row_scales", "sinks", "alibi",
               "lse", "head_pos")


def tile_parts(body, fail) -> list[list[int]]:
    """Each tile's ``COMPUTE`` instructions (its parts, in order): a ``COMPUTE`` with
    ``cont=0`` opens a tile, one with ``more=1`` is followed in the compute queue by a
    ``COMPUTE`` with ``cont=1`` of the same tile (same rows, heads, head dims, keys per step
    and Q side words), the last part by its ``FINALIZE``."""
    parts: list[list[int]] = []
    want_cont = False
    for i, ins in enumerate(body):
        if ins.op == Op.FINALIZE and want_cont:
            fail(i, ErrorCode.FIELD_RANGE, "FINALIZE after a COMPUTE with more=1: the tile's "
                 "next part (a COMPUTE with cont=1) must come first")
        if ins.op != Op.COMPUTE:
            continue
        cont = ins.args.get("cont", 0)
        if cont != want_cont:
            fail(i, ErrorCode.FIELD_RANGE, f"COMPUTE with cont={cont} "
                 + ("after a COMPUTE with more=1 (the tile's next part continues it: cont=1)"
                    if want_cont else "that opens a tile (cont=1 only after more=1)"))
        if cont:
            first = body[parts[-1][0]]
            for f in PART_FIELDS:
                if ins.args.get(f, 0) != first.args.get(f, 0):
                    fail(i, ErrorCode.FIELD_RANGE, f"COMPUTE part has {f}="
                         f"{ins.args.get(f, 0)}, its tile's first part {first.args.get(f, 0)}")
            parts[-1].append(i)
        else:
            parts.append([i])
        want_cont = bool(ins.args.get("more", 0))
    if want_cont:
        fail(parts[-1][-1], ErrorCode.FIELD_RANGE, "COMPUTE with more=1 and no part after it")
    return parts


def _check_tiles(body, by_op, fail) -> None:
    """The tile structure the waits rest on (see :func:`check_progress`); ``by_op[COMPUTE]``:
    each tile's first part."""
    n = len(body)
    counts = {op.name: len(v) for op, v in by_op.items() if op != Op.LOAD_KV}
    tiles = len(by_op[Op.COMPUTE])
    for op in (Op.LOAD_Q, Op.FINALIZE, Op.STORE_O):
        have = by_op[op]
        if len(have) != tiles:
            at = have[tiles] if len(have) > tiles else (
                by_op[Op.COMPUTE][len(have)] if len(have) < tiles else n)
            fail(at, ErrorCode.FIELD_RANGE, f"a tile is LOAD_Q, COMPUTE, FINALIZE and STORE_O, "
                 f"one each: the program has {counts} (tile {min(len(have), tiles)} has "
                 f"{'no' if len(have) < tiles else 'a second'} {op.name}); the core would "
                 "wait for it forever")
    compute_q = [i for i in range(n) if body[i].op == Op.FINALIZE
                 or (body[i].op == Op.COMPUTE and not body[i].args.get("cont", 0))]
    for k, i in enumerate(compute_q):
        want = Op.COMPUTE if k % 2 == 0 else Op.FINALIZE
        if body[i].op != want:
            fail(i, ErrorCode.FIELD_RANGE, f"{body[i].op.name} where the compute queue needs "
                 f"{want.name}: each COMPUTE is followed by its tile's FINALIZE")
    for t in range(tiles):
        c = body[by_op[Op.COMPUTE][t]]
        for op in (Op.LOAD_Q, Op.FINALIZE, Op.STORE_O):
            i = by_op[op][t]
            other = body[i]
            # Q rows have Q·K's head dim; the output rows V's (COMPUTE.dv, or d)
            shape = (c.rows, c.heads, c.d if op == Op.LOAD_Q else d_v_of(c))
            if (other.rows, other.heads, other.d) != shape:
                fail(i, ErrorCode.FIELD_RANGE, f"{op.name} of tile {t} has rows, heads, d = "
                     f"{(other.rows, other.heads, other.d)}, its COMPUTE {shape}"
                     + ("" if op == Op.LOAD_Q else " (d: its output rows, the COMPUTE's dv)"))
        for op in (Op.FINALIZE, Op.STORE_O):        # the output stream's words a row
            i = by_op[op][t]
            if body[i].args.get("lse", 0) != c.args.get("lse", 0):
                fail(i, ErrorCode.FIELD_RANGE, f"{op.name} of tile {t} has lse="
                     f"{body[i].args.get('lse', 0)}, its COMPUTE {c.args.get('lse', 0)}: the "
                     "output stream would carry a word a row more or less than it drains")
        lq = body[by_op[Op.LOAD_Q][t]]
        if lq.keys_per_step != c.keys_per_step:
            fail(by_op[Op.LOAD_Q][t], ErrorCode.FIELD_RANGE, f"LOAD_Q of tile {t} has "
                 f"keys_per_step={lq.keys_per_step}, its COMPUTE {c.keys_per_step}")


def check_progress(program, fail) -> None:
    """Refuse a program that can deadlock. ``program``: the instructions, END last, fields
    already checked; ``fail(index, ErrorCode, reason)`` raises for instruction ``index``.

    Also checks the tile structure the waits rest on: as many ``LOAD_Q``, ``COMPUTE``,
    ``FINALIZE`` and ``STORE_O`` (the k-th of each form tile k), ``COMPUTE`` and ``FINALIZE``
    alternating in the compute queue, and a tile's four agreeing on rows, heads and ``d``.
    """

    body = [ins for ins in program if ins.op != Op.END]
    n = len(body)
    by_op: dict[Op, list[int]] = {op: [] for op in (Op.LOAD_Q, Op.LOAD_KV, Op.COMPUTE,
                                                    Op.FINALIZE, Op.STORE_O)}
    parts = tile_parts(body, fail)
    for i, ins in enumerate(body):
        if ins.op != Op.COMPUTE:
            by_op[ins.op].append(i)
    by_op[Op.COMPUTE] = [p[0] for p in parts]       # a tile's first part
    tiles = len(parts)
    _check_tiles(body, by_op, fail)
    tile_of = {}
    for op in (Op.LOAD_Q, Op.FINALIZE, Op.STORE_O):
        for t, i in enumerate(by_op[op]):
            tile_of[i] = t
    for t, p in enumerate(parts):
        for i in p:
            tile_of[i] = t
    last_part = {t: p[-1] for t, p in enumerate(parts)}
    kv_parts = [i for p in parts for i in p if body[i].keys > 0]
    for j, i in enumerate(by_op[Op.LOAD_KV]):
        tile_of[i] = kv_parts[j]          # validate() has matched them one to one (a part)
    kv_of = {c: by_op[Op.LOAD_KV][j] for j, c in enumerate(kv_parts)}

    # ---- the wait graph ----
    def D(i):
        return 3 * i

    def S(i):
        return 3 * i + 1

    def E(i):
        return 3 * i + 2

    def RUN(t):
        return 3 * n + 2 * t

    def DONE(t):
        return 3 * n + 2 * t + 1

    nodes = 3 * n + 2 * tiles
    succ: list[list[int]] = [[] for _ in range(nodes)]

    def wait(before, after):
        succ[before].append(after)

    last_in_queue: dict[str, int] = {}
    queue_pos: dict[str, list[int]] = {}
    pushes: dict[tuple[str, str], list[int]] = {}
    pops: dict[tuple[str, str], list[int]] = {}
    for i, ins in enumerate(body):
        q = ins.queue
        if i:
            wait(D(i - 1), D(i))
        seen = queue_pos.setdefault(q, [])
        if len(seen) >= TIMING.queue_depth:
            wait(S(seen[-TIMING.queue_depth]), D(i))
        seen.append(i)
        wait(D(i), S(i))
        wait(S(i), E(i))
        if q in last_in_queue:
            wait(E(last_in_queue[q]), S(i))
        last_in_queue[q] = i
        for flag, other in (("pop_prev", PREV[q]), ("pop_next", NEXT[q])):
            if getattr(ins, flag):
                pops.setdefault((other, q), []).append(i)
        for flag, other in (("push_prev", PREV[q]), ("push_next", NEXT[q])):
            if getattr(ins, flag):
                pushes.setdefault((q, other), []).append(i)
        t = tile_of[i] if ins.op != Op.LOAD_KV else tile_of[tile_of[i]]
        if ins.op == Op.LOAD_Q and t > 0:
            wait(E(last_part[t - 1]), S(i))
        if ins.op == Op.COMPUTE and t > 0 and not ins.args.get("cont", 0):
            wait(DONE(t - 1), S(i))
        if ins.op == Op.LOAD_Q:
            wait(E(i), RUN(t))
        elif ins.op == Op.COMPUTE:
            # a later part runs once the part before it ended (queue order)
            if not ins.args.get("cont", 0):
                wait(S(i), RUN(t))
            wait(RUN(t), E(i))
            if i == last_part[t]:
                wait(E(i), DONE(t))
            if i in kv_of:
                wait(E(kv_of[i]), E(i))
        elif ins.op == Op.LOAD_KV:
            # ring space is freed by its part's run: after the part started
            part = tile_of[i]
            wait(RUN(t) if part == parts[t][0] else S(part), E(i))
        elif ins.op == Op.STORE_O:
            wait(S(i), DONE(t))
            wait(DONE(t), E(i))
        elif ins.op == Op.FINALIZE:
            wait(DONE(t), E(i))
    for pair, takers in pops.items():
        for k, i in enumerate(takers):   # validate() has checked every pop has its push
            wait(E(pushes[pair][k]), S(i))

    # ---- topological order; with it, the latest LOAD_Q start before each event ----
    indeg = [0] * nodes
    for s in succ:
        for v in s:
            indeg[v] += 1
    latest_q = [-1] * nodes
    for t, i in enumerate(by_op[Op.LOAD_Q]):
        latest_q[S(i)] = t
    ready = deque(v for v in range(nodes) if indeg[v] == 0)
    order = 0
    while ready:
        u = ready.popleft()
        order += 1
        for v in succ[u]:
            if latest_q[u] > latest_q[v]:
                latest_q[v] = latest_q[u]
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    if order < nodes:
        stuck = min(v // 3 for v in range(3 * n) if indeg[v] > 0)
        ins = body[stuck]
        hint = ""
        tile = tile_of[stuck] if ins.op != Op.LOAD_KV else tile_of[tile_of[stuck]]
        if ins.op == Op.LOAD_KV and by_op[Op.LOAD_Q][tile] > stuck:
            hint = ": it is ahead of its tile's LOAD_Q in the load queue"
        elif ins.op == Op.LOAD_KV:
            hint = ": its tile's run, which frees ring space, waits for it"
        fail(stuck, ErrorCode.TIMEOUT, f"the program can deadlock at {ins.op.name} of tile "
             f"{tile}{hint} (a cycle of waits: queue order, tokens, the core)")
    for t, i in enumerate(by_op[Op.COMPUTE]):
        if latest_q[S(i)] < t:
            fail(i, ErrorCode.TIMEOUT, f"COMPUTE of tile {t} may take the core before its "
                 "LOAD_Q has given the core its Q rows, and then both wait forever: pop a "
                 "load→compute token pushed by that LOAD_Q (or a later load)")


def row_bytes(hw, d: int, elem_bytes: int) -> int:
    """Bytes a row of ``d`` elements occupies in DRAM as the DMA moves it."""
    return hw.row_elements(d) * elem_bytes


def _spans(ins, hw, out_bytes: int):
    """The byte ranges [lo, hi) an instruction reads (``False``) or writes (``True``), one per
    head or per K/V block: the hull of its rows."""

    eb = hw.element_bytes
    if ins.op == Op.LOAD_KV and ins.args.get("paged", 0):
        # a paged cache: the table is in the program's view; its pages are not (KVWIN
        # checks them at run time)
        pages = -(-ins.keys // (1 << ins.page_log2))
        return [(False, ins.table, ins.table + ENTRY_BYTES * pages)]
    if ins.op == Op.LOAD_KV:
        # a K row with its factor's word; V rows then lie a word closer
        ks = bool(ins.args.get("key_scales", 0))
        k_span = (ins.keys - 1) * ins.row_stride + hw.k_row_elements(ins.d, ks) * eb
        dv = d_v_of(ins)
        v_span = ((ins.keys - 1) * hw.v_row_stride(ins.row_stride, ks, ins.d, dv)
                  + row_bytes(hw, dv, eb))
        if ins.args.get("v_in_k", 0):       # V read from K's rows: K's span alone
            return [(False, ins.k_addr, ins.k_addr + k_span)]
        return [(False, ins.k_addr, ins.k_addr + k_span),
                (False, ins.v_addr, ins.v_addr + v_span)]
    if ins.op in (Op.LOAD_Q, Op.STORE_O):
        write = ins.op == Op.STORE_O
        last = (hw.row_elements(ins.d) * out_bytes if write       # a Q row with its multiplier
                else q_row_elements_of(hw, ins) * eb)
        a = ins.args
        addr, hs = a["addr"], a["head_stride"]
        span = (a["rows"] - 1) * a["row_stride"] + last
        # (the fields read once: a head_pos tile has a "head" a position, hundreds of them)
        return [(write, addr + h * hs, addr + h * hs + span) for h in range(a["heads"])]
    return []


def check_kv_region(program, hw, fail, kv_region) -> None:
    """Refuse a ``LOAD_KV`` that reads outside ``kv_region = (base, bytes)``, as the K/V
    window (``KVWIN``) refuses it at run time: its K and V rows (the hull of each), or, paged,
    the table words it reads. ``ADDRESS_RANGE`` names the first such read."""
    lo_w, hi_w = kv_region[0], kv_region[0] + kv_region[1]
    for i, ins in enumerate(program):
        if ins.op != Op.LOAD_KV:
            continue
        for _write, lo, hi in _spans(ins, hw, hw.out_element_bytes):
            if lo < lo_w or hi > hi_w:
                what = "table words" if ins.args.get("paged", 0) else "K/V rows"
                fail(i, ErrorCode.ADDRESS_RANGE, f"LOAD_KV reads {what} [{lo:#x}, {hi:#x}) "
                     f"outside the K/V window [{lo_w:#x}, {hi_w:#x})")


def check_regions(program, hw, fail, prog_region=None) -> None:
    """Refuse a ``STORE_O`` that writes over bytes the program reads (Q, K, V of any tile, and
    the program itself at ``prog_region = (base, bytes)``): the output would overwrite inputs
    a later tile still reads, with no error. ``REGION_OVERLAP`` names the first such write."""
    import bisect

    out_bytes = hw.out_element_bytes
    reads, writes = [], []
    if prog_region is not None:
        reads.append((prog_region[0], prog_region[0] + prog_region[1], -1))
    for i, ins in enumerate(program):
        for write, lo, hi in _spans(ins, hw, out_bytes):
            (writes if write else reads).append((lo, hi, i))
    if not writes or not reads:
        return
    reads.sort()
    merged = []                     # disjoint [lo, hi, first reader]
    for lo, hi, i in reads:
        if merged and lo < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi, i])
    starts = [r[0] for r in merged]
    for lo, hi, i in sorted(writes, key=lambda w: w[2]):
        j = bisect.bisect_right(starts, hi - 1) - 1
        if j >= 0 and merged[j][1] > lo:
            who = "the program" if merged[j][2] < 0 else f"instruction {merged[j][2]}"
            fail(i, ErrorCode.REGION_OVERLAP, f"STORE_O writes [{lo:#x}, {hi:#x}), which "
                 f"overlaps bytes read by {who} (from {merged[j][0]:#x} to {merged[j][1]:#x}): "
                 "the output must not overwrite the inputs or the program")
