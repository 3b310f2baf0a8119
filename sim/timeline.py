"""The timeline of a whole program: fetch and dispatch, the load, compute and store queues with
their tokens, every engine's busy cycles (``simulate_program``), and its result
(``Schedule``)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import bad
from attenio.contract.isa import d_v_of, q_row_elements_of
from attenio.contract.program import INSTR_BYTES, NEXT, PREV, QUEUES, Instr, Op
from attenio.contract.timing import REGISTERED_POP, Timing, timing_for
from attenio.model import io_analysis as io
from attenio.sim.engines import ENGINES, Channel, Span, Stats, cdiv
from attenio.sim.tile_loop import tile_loop, tile_loop_memo

__all__ = ["Schedule", "simulate_program", "STEP_SPAN_LIMIT"]


@dataclass
class Schedule:
    """Result of :func:`schedule`: tiling, program, cycles, utilization, traffic, spans."""

    hw: HardwareConfig
    workload: Workload
    dataflow: str
    tiling: io.Tiling
    program: list[Instr] | None
    total_cycles: int
    busy: dict[str, int]
    stalls: dict[str, int]
    useful_macs: int
    read_bytes: int
    write_bytes: int
    spans: list[Span]
    timing: Timing
    # engine → [(start, end, busy cycles)]: where each engine was busy (with keep_spans)
    activity: dict | None = None
    # a varlen batch: each sequence's tiling (``tiling`` is the longest sequence's)
    tilings: list | None = None
    # AXI bursts the program requests: "read", "write" (data port), "fetch" (program port);
    # None for the phase-level baselines
    requests: dict | None = None
    # where the program's tensors lie (sim/layout.py; None for the phase-level baselines):
    # a paged cache's block table with it
    layout: object | None = None
    # decode sequences that read their shared first pages once (sim/shared.py): (first
    # sequence, sequences, shared pages) a run
    shared_runs: list | None = None

    @property
    def block_table(self):
        """The block table the program walks (a paged cache; else None)."""
        paged = getattr(self.layout, "paged", None)
        return paged.table if paged is not None else None

    @property
    def traffic(self) -> io.Traffic:
        """The closed form of this schedule's DRAM traffic under its tiling(s)
        (model/io_analysis.py; with sinks, the Q rows' side words and the tiles' masked keys
        as its program has them; shared prefixes read once a run)."""
        return self.closed_form()

    def closed_form(self, wl=None) -> io.Traffic:
        """:attr:`traffic` for ``wl`` in place of the schedule's workload (the CLI's: the head
        dim padded to whole words, as the program moves rows)."""
        wl = wl or self.workload
        table = self.block_table
        runs = self.shared_runs or ()
        out = io.workload_traffic(self.hw, wl, self.dataflow, self.tilings or self.tiling,
                                  table_starts=None if table is None else
                                  [table.table_start(i) for i in range(table.sequences)],
                                  sinks=self.sinks, side=self.alibi,
                                  skip={i for f, n, _ in runs for i in range(f, f + n)},
                                  key_scales=self.key_scales, row_scales=self.row_scales,
                                  value_scales=self.value_scales)
        if runs:                        # decode runs that read their shared pages once
            from attenio.sim.shared import run_traffic
            out = out + run_traffic(self.hw, wl, runs, table, self.sinks or self.alibi,
                                    self.key_scales, self.row_scales, self.value_scales)
        return out

    @property
    def row_scales(self) -> bool:
        """The program's Q rows carry their multipliers (``LOAD_Q.row_scales``)."""
        return any(i.args.get("row_scales", 0) for i in self.program or ()
                   if i.op == Op.LOAD_Q)

    @property
    def key_scales(self) -> bool:
        """The program's K rows carry factors (``LOAD_KV.key_scales``)."""
        return any(i.args.get("key_scales", 0) for i in self.program or ()
                   if i.op == Op.LOAD_KV)

    @property
    def value_scales(self) -> bool:
        """The program's V pages carry factors (``LOAD_KV.value_scales``)."""
        return any(i.args.get("value_scales", 0) for i in self.program or ()
                   if i.op == Op.LOAD_KV)

    @property
    def sinks(self) -> bool:
        """The program's Q rows carry sinks (``LOAD_Q.sinks``)."""
        return any(i.args.get("sinks", 0) for i in self.program or () if i.op == Op.LOAD_Q)

    @property
    def alibi(self) -> bool:
        """The program's Q rows carry ALiBi slopes (``LOAD_Q.alibi``)."""
        return any(i.args.get("alibi", 0) for i in self.program or () if i.op == Op.LOAD_Q)

    @property
    def pe_util_time(self) -> float:
        """Fraction of cycles the PE array computes (the paper's definition)."""
        return self.busy["pe"] / self.total_cycles if self.total_cycles else 0.0

    @property
    def pe_util_mac(self) -> float:
        """Useful MACs over MACs × cycles."""
        return self.useful_macs / (self.hw.macs * self.total_cycles) if self.total_cycles else 0.0

    @property
    def time_us(self) -> float:
        return self.total_cycles / self.hw.clock_mhz

    def to_dict(self) -> dict:
        """The schedule's figures as plain data (JSON-ready): configuration, workload,
        tiling, cycles and time, busy and stall cycles per engine, utilization, traffic and
        program length. Spans and the program itself are left out (``attenio schedule
        --trace`` and ``--program`` write those)."""
        import dataclasses

        return {
            "hardware": self.hw.to_dict(), "workload": self.workload.to_dict(),
            "dataflow": self.dataflow, "tiling": dataclasses.asdict(self.tiling),
            "total_cycles": self.total_cycles, "time_us": self.time_us,
            "busy": dict(self.busy), "stalls": dict(self.stalls),
            "useful_macs": self.useful_macs, "pe_util_time": self.pe_util_time,
            "pe_util_mac": self.pe_util_mac, "stall_share": self.stall_share,
            "read_bytes": self.read_bytes, "write_bytes": self.write_bytes,
            "program_instructions": None if self.program is None else len(self.program),
            "requests": self.requests, "shared_runs": self.shared_runs,
            # the table the program walked, as given, with the cache lengths and page size
            **(self.block_table.to_dict() if self.block_table else {}),
        }

    @property
    def stall_share(self) -> float:
        """Share of cycles the PE array waits on data movement (DRAM, Q load, O store)."""
        mem = sum(v for k, v in self.stalls.items() if "DRAM" in k or "Q load" in k
                  or "store" in k)
        return mem / self.total_cycles if self.total_cycles else 0.0


# step-level spans (QK s, PV s, K s, V s) are kept for the tiles that start before the trace
# holds this many spans: every tile of a small run, the first tiles of a long one
STEP_SPAN_LIMIT = 20_000


def _head_ready(timing: Timing, queue: str, disp: int) -> int:
    """The earliest cycle an engine may start an instruction dispatched at ``disp``: the
    queue's FIFO, and for the load and store engines the two stages that prepare the head's
    beat count (``head_latency``)."""
    return disp + timing.fifo_latency + (timing.head_latency if queue != "compute" else 0)


def _pop_delay(timing: Timing, queue: str) -> int:
    """A queue's oldest entry started → it leaves the queue (measured): the load and store
    queues pop from a register ``pop_delay`` cycles later, the compute queue at once."""
    return timing.pop_delay if queue in REGISTERED_POP else 0


class _Fetch:
    """The instruction fetch: chunks of ``Timing.fetch_chunk`` instructions on their own read
    port, ``Timing.fetch_buffer`` instructions ahead of dispatch."""

    def __init__(self, hw: HardwareConfig, timing: Timing, n: int, dispatch: list[int]):
        self.timing, self.n, self.dispatch = timing, n, dispatch
        self.port = Channel(hw, timing, gap=timing.fetch_gap)
        self.chunk = timing.fetch_chunk
        self.ahead = timing.fetch_buffer // self.chunk
        self.chunk_arrival: dict[int, int] = {}

    def fetch_chunk(self, c: int) -> int:
        """Cycle of the chunk's first data beat."""
        if c not in self.chunk_arrival:
            chunk, ahead, n = self.chunk, self.ahead, self.n
            ready = self.timing.fetch_delay
            if c >= ahead:  # the fetch buffer holds `ahead` chunks: chunk c waits for c-ahead
                ready = self.dispatch[min(n, (c - ahead + 1) * chunk) - 1] + 1
            nbytes = min(chunk, n - c * chunk) * INSTR_BYTES
            _, end = self.port.transfer(ready, c * chunk * INSTR_BYTES, nbytes)
            self.chunk_arrival[c] = end - cdiv(nbytes, self.port.rate)
        return self.chunk_arrival[c]

    def arrival(self, k: int) -> int:
        """Instruction k can dispatch: its last beat, then the fetch buffer's latency."""
        i = k % self.chunk
        return self.fetch_chunk(k // self.chunk) + cdiv((i + 1) * INSTR_BYTES, self.port.rate) \
            - 1 + self.timing.decode_latency + self.timing.fifo_latency


class _Tokens:
    """The dependency tokens between the queues: when each pushed token becomes available."""

    def __init__(self):
        self.queues: dict[tuple[str, str], deque] = {}

    def pop_time(self, ins: Instr, q: str) -> int:
        t = 0
        for flag, other in (("pop_prev", PREV[q]), ("pop_next", NEXT[q])):
            if getattr(ins, flag):
                t = max(t, self.queues[(other, q)].popleft())
        return t

    def push(self, ins: Instr, q: str, when: int) -> None:
        for flag, other in (("push_prev", PREV[q]), ("push_next", NEXT[q])):
            if getattr(ins, flag):
                self.queues.setdefault((q, other), deque()).append(when)


def simulate_program(hw: HardwareConfig, wl: Workload, program: list[Instr],
                     timing: Timing | None = None, ring_rows: int | None = None,
                     keep_spans: bool = True, progress=None,
                     entries=None, memos: dict | None = None
                     ) -> tuple[int, Stats, int, int, list[Span]]:
    """Run the timing model over a program (``progress(fraction)`` about every 1% of its
    instructions; ``entries(table, n)``: a paged cache's block tables; ``memos``: the tiles and
    transfers simulated so far by the schedules of one plan, on the same hardware, timing and
    ring). Returns (total cycles, stats, bytes read, bytes written, spans)."""
    timing = timing or timing_for(hw)
    eb, ob = hw.element_bytes, hw.out_element_bytes
    ring = ring_rows if ring_rows is not None else hw.ring_rows
    rd = Channel(hw, timing, gap=timing.request_gap)
    wr = Channel(hw, timing, write=True, gap=timing.request_gap)
    stats = Stats()
    spans: list[Span] = []
    if keep_spans:
        stats.activity = {e: [] for e in ENGINES}
        rd.activity, wr.activity = stats.activity["dma_read"], stats.activity["dma_write"]
    n = len(program)
    dispatch = [0] * n
    start = [0] * n
    # per-queue: start times in order (for queue depth), end of last instruction
    qstarts: dict[str, list[int]] = {name: [] for name in QUEUES}
    q_end = dict.fromkeys(QUEUES, 0)
    tokens = _Tokens()
    pending_kv: tuple[Instr, int, int] | None = None
    pending_fin: tuple[int, int, int, int, Instr] | None = None
    last_pe_end = 0
    core_idle = 0          # the previous tile's end: the core's ring credits are its own again
    memos = {} if memos is None else memos
    # tiles already simulated, by everything their timeline depends on; Q loads and O stores
    # likewise; masked tiles' rests likewise
    memo, xfer_memo, suffix = (memos.setdefault(k, {}) for k in ("tile", "xfer", "suffix"))
    last_store_resp = 0
    pe_activity_end = 0
    tile = 0

    fetch = _Fetch(hw, timing, n, dispatch)
    arrival = fetch.arrival
    pop_time, push = tokens.pop_time, tokens.push

    every = max(1, n // 100)
    for k, ins in enumerate(program):
        if progress is not None and k % every == 0:
            progress(k / n)
        arrive = arrival(k)
        disp = max(arrive, dispatch[k - 1] + 1 if k else 0)
        if ins.op == Op.END:
            dispatch[k] = disp
            break
        q = ins.queue
        if len(qstarts[q]) >= timing.queue_depth:   # full: taken the cycle after the oldest
            disp = max(disp, qstarts[q][-timing.queue_depth] + 1 + _pop_delay(timing, q))
        dispatch[k] = disp
        tok = pop_time(ins, q)
        st = max(_head_ready(timing, q, disp), q_end[q], tok)
        start[k] = st
        qstarts[q].append(st)
        if len(qstarts[q]) > timing.queue_depth:
            qstarts[q].pop(0)
        args = {"tile": tile, **ins.args}
        if ins.op == Op.LOAD_Q:
            issue_end, done = _tile_transfer(hw, rd, st + timing.request_delay, ins, eb,
                                             xfer_memo)
            q_end[q] = issue_end + 1
            push(ins, q, done)
            if keep_spans:
                spans.append(Span("dma_read", f"LOAD_Q t{tile}", st, done, args))
        elif ins.op == Op.LOAD_KV:
            pending_kv = (ins, st, k)
        elif ins.op == Op.COMPUTE:
            gap = st + timing.cmd_latency - pe_activity_end
            if gap > 0:
                stats.stall("pe: fetch/dispatch" if disp >= tok
                            else "pe: waiting for Q load or O store", gap)
            if ins.keys == 0:  # a causal tile that sees no key: O = 0, nothing to stream
                last_pe_end = pe_activity_end = st + timing.cmd_latency
                q_end[q] = last_pe_end + 1
                push(ins, q, q_end[q])
                continue
            if pending_kv is None:
                raise bad("program", f"instruction {k}", "COMPUTE without LOAD_KV")
            kv, kv_st, _ = pending_kv
            pending_kv = None
            cont = ins.args.get("cont", 0)   # the core takes a part as the last one's ends
            st = max(st, core_idle - 1) if cont else st
            pe0 = st + (timing.cont_latency if cont else timing.cmd_latency)
            # a K/V block is requested only once the core counts credits for this tile
            kv_ready = max(kv_st + timing.request_delay, core_idle + timing.credit_delay)
            issue_end, kv_done, pe_end, exp_span = (
                tile_loop(hw, timing, rd, stats, kv, ins, kv_ready, pe0, ring, eb,
                          spans if len(spans) < STEP_SPAN_LIMIT else None, tile, entries)
                if keep_spans else
                tile_loop_memo(memo, hw, timing, rd, stats, kv, ins, kv_ready, pe0, ring, eb,
                               entries, suffix))
            q_end["load"] = max(q_end["load"], issue_end + 1)
            q_end[q] = pe_end + 1        # the compute queue sees the last step end, moves on
            last_pe_end = pe_activity_end = pe_end   # (a part ends once its O writes are done)
            core_idle = pe_end + timing.part_drain if ins.args.get("more", 0) else core_idle
            push(ins, q, pe_end + 1)
            stats.useful_macs += (ins.d + d_v_of(ins)) * _visible_pairs(ins)   # Q·K, then P·V
            if keep_spans:
                spans.append(Span("dma_read", f"LOAD_KV t{tile}", kv_st, kv_done,
                                  {"tile": tile, **kv.args}))
                spans.append(Span("pe", f"COMPUTE t{tile}", st, pe_end, args))
                spans.append(Span("exp", f"softmax t{tile}", exp_span[0], exp_span[1], args))
        elif ins.op == Op.FINALIZE:
            # One output word (q elements of a row) per cycle into the output FIFO; the
            # STORE_O that pairs with it drains the FIFO, so the two are resolved together.
            # (with lse each row's statistics follow its O as one more word)
            words = ins.rows * ins.heads * (cdiv(ins.d, hw.macs_per_line)
                                            + ins.args.get("lse", 0))
            # the core finalizes on its own once the last P V step is done
            first = last_pe_end + timing.pv_drain + timing.finalize_latency
            stats.busy["finalize"] += words
            stats.active("finalize", first, first + words, words)
            pending_fin = (st, first, first + words - 1, words, ins)
        elif ins.op == Op.STORE_O:
            if pending_fin is None:
                raise bad("program", f"instruction {k}", "STORE_O without FINALIZE")
            f_st, first, last, words, fin_ins = pending_fin
            pending_fin = None
            _, done = _tile_transfer(hw, wr, max(st + timing.request_delay, first), ins, ob,
                                     xfer_memo)
            # data cannot leave before the finalize unit produced it (a word is several beats)
            data_end = max(wr.free, last + cdiv(hw.macs_per_line * ob, hw.axi_data_bytes))
            done = max(done, data_end + hw.dram_latency)
            wr.free = data_end
            # the last word has left the core: it is idle again, and the compute queue sees it
            fin_end = data_end + timing.idle_latency
            core_idle = fin_end
            stats.stall("pe: finalize and store", fin_end - pe_activity_end)
            pe_activity_end = fin_end
            q_end["compute"] = fin_end
            push(fin_ins, "compute", fin_end)  # FINALIZE's tokens go out when it ends
            q_end[q] = done
            last_store_resp = max(last_store_resp, done)
            push(ins, q, done)
            if keep_spans:
                spans.append(Span("finalize", f"FINALIZE t{tile}", f_st, fin_end, args))
                spans.append(Span("dma_write", f"STORE_O t{tile}", max(st, first), done, args))
            tile += 1
    total = max(max(q_end.values()), last_store_resp, rd.free, pe_activity_end) + \
        timing.done_latency
    stats.stall("pe: drain (last store response)", total - pe_activity_end)
    stats.busy["dma_read"] = rd.busy
    stats.busy["dma_write"] = wr.busy
    stats.requests = {"read": rd.requests, "write": wr.requests, "fetch": fetch.port.requests}
    return total, stats, rd.nbytes, wr.nbytes, spans


def _tile_transfer(hw: HardwareConfig, ch: Channel, ready: int, ins: Instr,
                   elem_bytes: int, memo: dict | None = None) -> tuple[int, int]:
    """Move a tile's rows (``LOAD_Q`` or ``STORE_O``): one transfer per head when its rows are
    contiguous, else one per row. Returns (last request, completion). With ``memo`` (and no
    activity kept) a transfer of the same shape, at the same places in 4 KB lines, from the
    same channel state relative to ``ready`` repeats the first one's times and counts."""
    key = None
    if memo is not None and ch.activity is None:
        key = (ins.op, ins.rows, ins.heads, ins.d, ins.addr % 4096, ins.row_stride % 4096,
               ins.head_stride % 4096, ins.row_stride == ins.head_stride, ins.row_stride,
               tuple(ins.args.get(k, 0) for k in ("row_scales", "sinks", "alibi", "lse")),
               ch.state(ready))
        hit = memo.get(key)
        if hit is not None:
            (last, end), (busy, nbytes, requests), (free, last_req, done) = hit
            ch.busy += busy
            ch.nbytes += nbytes
            ch.requests += requests
            ch.free, ch.last_req = ready + free, ready + last_req
            ch.done = deque(ready + x for x in done)
            return ready + last, ready + end
        before = (ch.busy, ch.nbytes, ch.requests)
    out = _transfer_rows(hw, ch, ready, ins, elem_bytes)
    if key is not None:
        memo[key] = ((out[0] - ready, out[1] - ready),
                     (ch.busy - before[0], ch.nbytes - before[1], ch.requests - before[2]),
                     ch.state(ready))
    return out


def _transfer_rows(hw: HardwareConfig, ch: Channel, ready: int, ins: Instr,
                   elem_bytes: int) -> tuple[int, int]:
    out = (ready, ready)
    # whole words, as the DMA moves rows (a Q row with its multiplier's word, an O row with its
    # statistics' word)
    row = (hw.o_row_elements(ins.d, bool(ins.args.get("lse", 0))) if ins.op == Op.STORE_O
           else q_row_elements_of(hw, ins)) * elem_bytes
    for h in range(ins.heads):
        base = ins.addr + h * ins.head_stride
        if ins.row_stride == row:
            out = ch.transfer(ready, base, ins.rows * row)
        else:
            for r in range(ins.rows):
                out = ch.transfer(ready, base + r * ins.row_stride, row)
    return out


def _visible_pairs(ins: Instr) -> int:
    """(query row, key) pairs of a COMPUTE that its mask keeps (all of them without one): each
    row's keys from the window's left edge (``win_diag``) to the causal edge (``diag``)."""
    if ins.args.get("select", 0):     # a selected part: one head's rows see its keys
        return ins.rows * ins.keys
    if not ins.causal and not ins.args.get("window", 0):
        return ins.rows * ins.heads * ins.keys
    # with head_pos the tile's heads are its positions, each of ``rows`` rows (query heads)
    positions, heads = ((ins.heads, ins.rows) if ins.args.get("head_pos", 0)
                        else (ins.rows, ins.heads))
    rows = np.arange(positions, dtype=np.int64) + ins.q_pos
    end = np.clip(rows + ins.diag + 1, 0, ins.keys) if ins.causal else ins.keys
    first = np.clip(rows + ins.args["win_diag"], 0, ins.keys) if ins.args.get("window", 0) \
        else 0
    return int(np.maximum(0, end - first).sum()) * heads
