"""validate() refuses programs that can hang the controller or overwrite their own inputs
(contract/progress.py), and accepts every program the schedule generator writes."""

import pytest

from attenio.base import config as C
from attenio.contract import program as P
from attenio.sim.schedule import Layout, schedule

HW = C.tiny()
WL = C.Workload(seq_q=150, seq_k=100, head_dim=16)


def prog(wl=WL, dataflow="attenio"):
    return list(schedule(HW, wl, dataflow, keep_spans=False).program)


def idx(p, op, nth=0):
    return [i for i, x in enumerate(p) if x.op == op][nth]


def with_flags(ins, **kw):
    flags = {f: kw.get(f, getattr(ins, f)) for f in ("pop_prev", "pop_next", "push_prev",
                                                     "push_next")}
    return P.Instr(ins.op, dict(ins.args), **flags)


def refused(p, pattern, **kw):
    with pytest.raises(P.ProgramError, match=pattern):
        P.validate(p, HW, **kw)


@pytest.mark.parametrize("wl, dataflow", [
    (WL, "attenio"), (C.Workload(seq_q=150, seq_k=100, head_dim=16, causal=True), "attenio"),
    (C.Workload(seq_q=40, seq_k=40, head_dim=16, heads=3, batch=2), "attenio"),
    (C.Workload(seq_q=24, seq_k=24, head_dim=8, heads=4, kv_heads=2), "attenio"),
    (C.Workload(seq_q=1, seq_k=239, head_dim=64, heads=4, kv_heads=1, causal=True), "attenio"),
])
def test_generated_programs_pass(wl, dataflow):
    p = prog(wl, dataflow)
    lay = Layout.packed(HW, wl, len(p) * P.INSTR_BYTES)
    P.validate(p, HW, rtl=dataflow == "attenio", prog_region=(lay.program, len(p) * 32))


def test_missing_store_is_refused():
    # the core keeps the tile's output until a STORE_O drains it: FINALIZE never ends
    p = prog()
    k = idx(p, P.Op.STORE_O, 1)
    refused(p[:k] + p[k + 1:], r"FIELD_RANGE: a tile is LOAD_Q, COMPUTE, FINALIZE and STORE_O")


def test_load_kv_ahead_of_load_q_is_refused():
    # the in-order load queue waits for ring space that only the tile's run frees
    p = prog()
    q, kv = idx(p, P.Op.LOAD_Q, 1), idx(p, P.Op.LOAD_KV, 1)
    assert kv == q + 1
    p[q], p[kv] = p[kv], p[q]
    refused(p, r"offset \d+ .*TIMEOUT: the program can deadlock at LOAD_KV of tile 1: it is "
               r"ahead of its tile's LOAD_Q")


def test_compute_racing_its_load_q_is_refused():
    # without the load→compute token, COMPUTE may take the idle core before the Q rows
    p = prog()
    k = idx(p, P.Op.COMPUTE, 0)
    p[k] = with_flags(p[k], pop_prev=False)
    p[idx(p, P.Op.LOAD_Q, 0)] = with_flags(p[idx(p, P.Op.LOAD_Q, 0)], push_next=False)
    refused(p, r"TIMEOUT: COMPUTE of tile 0 may take the core before its LOAD_Q")


def test_store_waiting_on_finalize_is_refused():
    # FINALIZE ends when its output has left, which needs the STORE_O that waits for it
    p = prog()
    f, s = idx(p, P.Op.FINALIZE, 0), idx(p, P.Op.STORE_O, 0)
    p[f] = with_flags(p[f], push_next=True)
    p[s] = with_flags(p[s], pop_prev=True)
    refused(p, r"TIMEOUT: the program can deadlock at FINALIZE of tile 0")


def test_tile_shapes_must_agree():
    p = prog()
    s = idx(p, P.Op.STORE_O, 0)
    p[s] = P.Instr(P.Op.STORE_O, {**p[s].args, "rows": p[s].rows - 1})
    refused(p, r"STORE_O of tile 0 has rows, heads, d")


def test_compute_queue_order():
    p = prog()
    c, f = idx(p, P.Op.COMPUTE, 0), idx(p, P.Op.FINALIZE, 0)
    p[c], p[f] = p[f], p[c]
    refused(p, r"FINALIZE where the compute queue needs COMPUTE")


def test_output_over_inputs_is_refused():
    p = prog()
    s = idx(p, P.Op.STORE_O, 0)
    kv = p[idx(p, P.Op.LOAD_KV, 1)]
    p[s] = P.Instr(P.Op.STORE_O, {**p[s].args, "addr": kv.k_addr + 64})
    refused(p, r"REGION_OVERLAP: STORE_O writes .* overlaps bytes read by instruction")


def test_output_over_program_is_refused():
    p = prog()
    s = idx(p, P.Op.STORE_O, 0)
    p[s] = P.Instr(P.Op.STORE_O, {**p[s].args, "addr": 0})
    refused(p, r"REGION_OVERLAP: .* read by the program", prog_region=(0, len(p) * 32))
    # without the program's place, the same bytes are not known to be read
    P.validate(p, HW)


@pytest.mark.parametrize("wl", [WL, C.VarlenWorkload(seqlens_q=[1, 1], seqlens_k=[20, 9],
                                                     head_dim=8, heads=2, kv_heads=1,
                                                     page_size=4)])
def test_kv_reads_outside_the_kv_window_are_refused(wl):
    """validate(kv_region=) refuses what the K/V window (KVWIN) refuses at run time: a LOAD_KV
    whose K/V rows (contiguous) or table words (paged) leave the region (issue #48)."""
    from attenio.verify.runner import prepare

    prep = prepare(HW, wl, seed=1)
    lay, p = prep.layout, list(prep.schedule.program)
    kv = (lay.k, lay.o - lay.k)
    P.validate(p, HW, kv_region=kv)            # the generated program reads its cache only
    k = idx(p, P.Op.LOAD_KV)
    ins = p[k]
    field = "table" if ins.args.get("paged", 0) else "k_addr"
    p[k] = P.Instr(ins.op, {**ins.args, field: lay.q}, pop_prev=ins.pop_prev,
                   pop_next=ins.pop_next, push_prev=ins.push_prev, push_next=ins.push_next)
    what = "table words" if field == "table" else "K/V rows"
    refused(p, rf"ADDRESS_RANGE: LOAD_KV reads {what} \[{lay.q:#x}, .* outside the K/V "
            rf"window \[{lay.k:#x}, {lay.o:#x}\)", kv_region=kv)
    P.validate(p, HW)                          # without the window, the same read is allowed
