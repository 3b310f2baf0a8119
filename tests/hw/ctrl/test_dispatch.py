"""Dispatch: queue routing and the token rules (docs/isa.md, "Tokens"), against small models."""

from amaranth.sim import Simulator

from attenio.base.errors import ErrorCode
from attenio.contract.program import QUEUE_OF, QUEUES, TOKEN_MAX, Instr, Op
from attenio.hw.ctrl.dispatch import Dispatch


def word(op, **flags) -> int:
    return int.from_bytes(Instr(op, {}, **flags).encode(), "little")


def ref_route(ops):
    """The queue(s) each instruction enters, in order; nothing after END."""
    out = []
    for op in ops:
        out.append(set(QUEUES) if op == Op.END else {QUEUE_OF[op]})
        if op == Op.END:
            break
    return out


def run(entries, script, cycles=60):
    """Feed ``entries`` ((instruction word, error code)) to the dispatcher; ``script(ctx, dut,
    cycle)`` drives the engines' side each cycle. Returns what was seen each cycle."""
    dut = Dispatch()
    trace = []

    async def tb(ctx):
        ctx.set(dut.go, 1)
        pending = list(entries)
        for cycle in range(cycles):
            if pending:
                w, bad = pending[0]
                ctx.set(dut.fetched.valid, 1)
                ctx.set(dut.fetched.payload, {"insn": w, "bad": bad, "rh": 1})
            else:
                ctx.set(dut.fetched.valid, 0)
            script(ctx, dut, cycle)
            seen = {"taken": bool(ctx.get(dut.fetched.ready)) and bool(pending),
                    "fail": ctx.get(dut.fail), "code": ctx.get(dut.fail_code)}
            for q in QUEUES:
                p = getattr(dut, q)
                seen[q] = (ctx.get(p.head.valid), ctx.get(p.ok), ctx.get(p.under))
                seen[q + "_op"] = ctx.get(p.head.payload.insn) & 0xF
            trace.append(seen)
            if seen["taken"]:
                pending.pop(0)
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    return trace


def test_route_matches_the_model():
    ops = [Op.LOAD_Q, Op.LOAD_KV, Op.COMPUTE, Op.FINALIZE, Op.STORE_O, Op.END, Op.LOAD_Q]

    def take_every_head(ctx, dut, c):
        for q in QUEUES:
            p = getattr(dut, q)
            ctx.set(p.head.ready, ctx.get(p.head.valid))

    t = run([(word(op), 0) for op in ops], take_every_head, cycles=40)
    got = {q: [Op(x[q + "_op"]) for x in t if x[q][0]] for q in QUEUES}
    want = {q: [op for op, qs in zip(ops, ref_route(ops), strict=False) if q in qs]
            for q in QUEUES}
    assert got == want


def test_tokens_pop_what_was_pushed():
    # LOAD_Q pushes to compute; COMPUTE pops it
    entries = [(word(Op.LOAD_Q, push_next=True), 0), (word(Op.COMPUTE, pop_prev=True), 0)]

    def script(ctx, dut, c):
        ctx.set(dut.load.push_next, int(c == 10))       # LOAD_Q's data is in
        ctx.set(dut.compute.start, int(c == 20))        # COMPUTE starts

    t = run(entries, script, cycles=30)
    assert t[9]["compute"] == (1, 0, 0)                  # queued, no token yet
    assert t[15]["compute"] == (1, 1, 0)                 # the token is there
    assert t[25]["compute"][1] == 0                      # popped: none left
    assert not any(x["fail"] for x in t)


def test_underflow_is_seen_when_the_producer_is_quiet():
    entries = [(word(Op.COMPUTE, pop_prev=True), 0)]

    def script(ctx, dut, c):
        ctx.set(dut.load.quiet, int(c >= 12))

    t = run(entries, script, cycles=20)
    assert t[10]["compute"] == (1, 0, 0)
    assert t[15]["compute"] == (1, 0, 1)


def test_overflow_at_token_max():
    entries = [(word(Op.COMPUTE, pop_prev=True), 0)]

    def script(ctx, dut, c):
        ctx.set(dut.load.push_next, int(5 <= c < 5 + TOKEN_MAX + 1))

    t = run(entries, script, cycles=30)
    fails = [c for c, x in enumerate(t) if x["fail"]]
    assert fails == [5 + TOKEN_MAX]
    assert t[fails[0]]["code"] == ErrorCode.TOKEN_OVERFLOW


def test_bad_entry_fails_with_its_code_and_is_not_dispatched():
    entries = [(word(Op.LOAD_Q), int(ErrorCode.FIELD_RANGE))]
    t = run(entries, lambda ctx, dut, c: None, cycles=10)
    assert t[0]["fail"] and t[0]["code"] == ErrorCode.FIELD_RANGE
    assert all(x["load"][0] == 0 for x in t)


def test_overrun_without_end():
    def script(ctx, dut, c):
        ctx.set(dut.exhausted, int(c >= 3))

    t = run([], script, cycles=6)
    assert [x["fail"] for x in t] == [0, 0, 0, 1, 1, 1]
    assert t[3]["code"] == ErrorCode.PROGRAM_OVERRUN
