"""ComputeIssue (the compute queue to the core's command) and the Watchdog, in Amaranth's
simulator against what the ISA says of them (docs/isa.md): a COMPUTE's fields reach the core as
its command and the instruction ends when the core's last step has issued, a FINALIZE when the
core is idle again, pushes go out as they end; a run with no progress for 2**bits − 1 cycles
ends with TIMEOUT, and any progress restarts the count."""

import random

import pytest

from attenio.base import config as C
from attenio.base.errors import ErrorCode
from attenio.contract.isa import Instr, Op
from attenio.hw.ctrl.issue import ComputeIssue
from attenio.hw.ctrl.watchdog import Watchdog
from attenio.hw.layouts import cmd_layout

from ..helpers import simulate

TINY = C.tiny()


def _compute(**kw):
    args = {"rows": 8, "heads": 1, "d": 16, "causal": 1, "keys": 40, "keys_per_step": 1,
            "q_pos": 24, "diag": -5, "c_m": 40000, "c_sh": 21, "row_scales": 0,
            "key_scales": 1, **kw}
    return Instr(Op.COMPUTE, args, pop_prev=True, push_prev=True)


def rtl_issue(hw, program, *, steps_after=5, idle_after=7, ok=True, seed=0):
    """Run ``program`` through ComputeIssue with a core model that ends its steps
    ``steps_after`` cycles after taking a command and is idle ``idle_after`` cycles later.
    Returns [(event, cycle)] and the commands taken (decoded to fields)."""
    dut = ComputeIssue(hw)
    lay = cmd_layout(hw)
    events, cmds = [], []
    rng = random.Random(seed)

    async def tb(ctx):
        entries = [(int.from_bytes(i.encode(), "little"), i.args.get("rows", 0)
                    * i.args.get("heads", 0)) for i in program]
        busy_until = steps_at = -1
        ctx.set(dut.go, 1)
        for cycle in range(2000):
            ctx.set(dut.queue.ok, ok)
            ctx.set(dut.queue.under, not ok)
            ctx.set(dut.queue.head.valid, bool(entries))
            if entries:
                ctx.set(dut.queue.head.payload, {"insn": entries[0][0], "rh": entries[0][1]})
            busy = cycle < busy_until
            ctx.set(dut.busy, busy)
            ctx.set(dut.steps_done, busy and cycle >= steps_at)
            ready = not busy and rng.random() < 0.7
            ctx.set(dut.cmd.ready, ready)
            if ctx.get(dut.fail):
                events.append(("fail", ErrorCode(ctx.get(dut.fail_code))))
                return
            if ctx.get(dut.cmd.valid) and ready:
                raw = ctx.get(dut.cmd.payload.as_value())
                cmds.append({n: (raw >> lay[n].offset) & ((1 << lay[n].shape.width) - 1)
                             for n in lay.members})
                steps_at, busy_until = cycle + steps_after, cycle + steps_after + idle_after
            if ctx.get(dut.queue.start):
                events.append(("start", cycle))
            if entries and ctx.get(dut.queue.head.ready):
                entries.pop(0)
            if ctx.get(dut.queue.push_prev):
                events.append(("push", cycle))
            await ctx.tick()
            if ctx.get(dut.ended):
                return

    simulate(dut, tb)
    return events, cmds


def test_compute_becomes_the_cores_command():
    hw = TINY
    ins = _compute()
    _, cmds = rtl_issue(hw, [ins, Instr(Op.END)])
    c, = cmds
    for name in ("d", "keys", "c_m", "c_sh", "causal", "q_pos", "row_scales", "key_scales"):
        assert c[name] == ins.args[name], name
    assert c["diag"] == ins.diag % (1 << cmd_layout(hw)["diag"].shape.width)
    assert c["rows"] == 8 and c["head_rows"] == 8 and c["kps_log2"] == 0
    c2, = rtl_issue(hw, [_compute(keys_per_step=4, rows=1), Instr(Op.END)])[1]
    assert c2["kps_log2"] == 2


def test_compute_ends_with_its_steps_and_finalize_when_idle():
    hw = TINY
    fin = Instr(Op.FINALIZE, {"rows": 8, "heads": 1, "d": 16}, push_next=True)
    events, cmds = rtl_issue(hw, [_compute(), fin, Instr(Op.END)], steps_after=5,
                             idle_after=7)
    starts = [c for e, c in events if e == "start"]
    pushes = [c for e, c in events if e == "push"]
    assert len(cmds) == 1 and len(starts) == 2
    # COMPUTE pushes (compute→load) when the core says its steps are done, FINALIZE (to
    # the store queue, push_next) only once the core is idle: after its steps and drain
    assert pushes and pushes[0] >= starts[0] + 5
    assert starts[1] > pushes[0]            # FINALIZE waits for COMPUTE to end


def test_underflow_when_a_token_never_comes():
    events, _ = rtl_issue(TINY, [_compute(), Instr(Op.END)], ok=False)
    assert events == [("fail", ErrorCode.TOKEN_UNDERFLOW)]


def ref_watchdog(progress: list[bool], bits: int) -> int | None:
    """The cycle TIMEOUT is raised: the count is 0 when the run begins and two cycles after a
    progress pulse (registered, then the count clears), and one more each other cycle;
    TIMEOUT when it reaches 2**bits − 1."""
    limit = (1 << bits) - 1
    zero = 0                      # the cycle the count was last 0
    for cycle in range(len(progress)):
        if cycle >= 2 and progress[cycle - 2]:
            zero = cycle
        if cycle - zero == limit:
            return cycle
    return None


def rtl_watchdog(progress: list[bool], bits: int) -> int | None:
    dut = Watchdog(bits)
    hit = []

    async def tb(ctx):
        ctx.set(dut.go, 1)
        for cycle, p in enumerate(progress):
            ctx.set(dut.progress, p)
            if ctx.get(dut.fail):
                assert ctx.get(dut.fail_code) == ErrorCode.TIMEOUT and ctx.get(dut.timed_out)
                hit.append(cycle)
                return
            await ctx.tick()

    simulate(dut, tb)
    return hit[0] if hit else None


@pytest.mark.parametrize("pattern", [
    [False] * 40,                                  # never any progress
    [True] * 3 + [False] * 40,                     # progress, then none
    ([False] * 13 + [True]) * 4,                   # always just in time: never times out
    [False] * 10 + [True] + [False] * 30,
])
def test_watchdog(pattern):
    bits = 4
    assert rtl_watchdog(pattern, bits) == ref_watchdog(pattern, bits)


def test_watchdog_counts_only_during_a_run():
    dut = Watchdog(3)

    async def tb(ctx):
        for _ in range(20):           # no run: never a timeout
            assert not ctx.get(dut.fail)
            await ctx.tick()

    simulate(dut, tb)
