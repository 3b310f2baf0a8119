"""Dispatch: the fetch buffer's head into three queues (load, compute, store) and the
dependency tokens between neighbouring queues (docs/isa.md, "Tokens")."""

from __future__ import annotations

from amaranth import Cat, Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.base.errors import ErrorCode
from attenio.contract.program import NEXT, PREV, QUEUE_OF, QUEUES, TOKEN_MAX, Op
from attenio.contract.timing import REGISTERED_POP, TIMING
from attenio.hw.ctrl.layouts import (
    error_ports,
    fetch_entry_layout,
    queue_entry_layout,
    raise_error,
    view,
)
from attenio.hw.streamfifo import StreamFIFO

__all__ = ["Dispatch", "queue_signature", "engine_ports", "prepared_head", "TOKEN_PAIRS"]

QUEUE_DEPTH = TIMING.queue_depth
# (producer, consumer) of every token counter: neighbours in the chain load ↔ compute ↔ store
TOKEN_PAIRS = [(a, b) for a in QUEUES for b in (PREV[a], NEXT[a]) if b is not None]


def queue_signature() -> wiring.Signature:
    """One queue as its engine sees it (``Out`` from the dispatcher's side).

    ``head`` is the oldest entry; ``ok``: the tokens its pop flags ask for are there; ``under``:
    one is not and its producer queue is ``quiet`` (ended), so it never will be. The engine
    pulses ``start`` when it takes the head (its pops happen then), raises ``head.ready``
    to remove it (``start`` or an ``END``), pulses ``push_prev``/``push_next`` when an
    instruction's pushes happen, and holds ``quiet`` once it has reached ``END`` and drained.
    """
    return wiring.Signature({
        "head": Out(stream.Signature(queue_entry_layout())),
        "ok": Out(1), "under": Out(1),
        "start": In(1), "push_prev": In(1), "push_next": In(1), "quiet": In(1),
    })


def engine_ports() -> dict:
    """The ports every queue engine has: the run's ``go`` and ``stop``, its ``queue``
    (:func:`queue_signature`), the error ports, ``ended`` (the queue took ``END``) and
    ``started`` (an instruction started this cycle)."""
    return {"go": In(1), "stop": In(1), "queue": In(queue_signature()), **error_ports(),
            "ended": Out(1), "started": Out(1)}


def prepared_head(m: Module, queue, name: str) -> Signal:
    """High while the queue's head has been there, untaken, for ``Timing.head_latency`` (2)
    cycles: an engine registers what it derives from the head's fields (a transfer's beat
    count, a product of them) in two stages every cycle, and starts the head only then, so
    those products are off its start path. The head is steady while valid and not taken (a
    FIFO's oldest entry), so both stages then hold the head's own values."""
    head = queue.head
    stay = head.valid & ~head.ready
    v1, v2 = Signal(name=f"{name}_prep1"), Signal(name=f"{name}_prep2")
    m.d.sync += [v1.eq(stay), v2.eq(v1 & stay)]
    assert TIMING.head_latency == 2
    return v2


def _registered_pop(m: Module, fifo: StreamFIFO, head, name: str) -> None:
    """The engine takes ``fifo``'s oldest entry (``head.ready``) in one cycle and the FIFO
    pops it in the next, from a register: the engine's start (its AXI, token and core
    hand-shakes) stays off the FIFO's read logic and its output register's wide enable. The
    head shows invalid in between, so it is taken once; the next entry shows a cycle later
    than it would, which the engine hides: a load or store instruction keeps its engine at
    least ``request_delay + 1`` cycles, longer than the entry takes to show and be prepared
    (``head_latency``)."""
    pop = Signal(name=f"{name}_pop")
    m.d.sync += pop.eq(head.valid & head.ready)
    m.d.comb += [head.valid.eq(fifo.o.valid & ~pop), head.payload.eq(fifo.o.payload),
                 fifo.o.ready.eq(pop)]


class Dispatch(wiring.Component):
    """In-order dispatch and the token counters.

    The head of the fetch buffer goes, in the cycle it is seen, to its queue when that has room
    (``END`` to all three at once, and nothing is dispatched after it). An entry with a stored
    error code stops the run with that code instead. Token counters are 4 bits
    (``TOKEN_MAX``): a push to a full one is ``TOKEN_OVERFLOW``; a program that ends without
    ``END`` (every instruction fetched and dispatched) is ``PROGRAM_OVERRUN``.

    Ports
    -----
    fetched : stream of ``fetch_entry_layout`` from :class:`ProgramFetch`.
    exhausted : the fetch unit has nothing more to deliver.
    load, compute, store : :func:`queue_signature` (``Out``).
    dispatched : an instruction entered a queue this cycle.
    fail, fail_code : the first error of this unit in a cycle.
    """

    def __init__(self):
        super().__init__({
            "go": In(1), "stop": In(1),
            "fetched": In(stream.Signature(fetch_entry_layout())),
            "exhausted": In(1),
            **{q: Out(queue_signature()) for q in QUEUES},
            "dispatched": Out(1), **error_ports(),
        })

    def elaborate(self, platform):
        m = Module()
        ports = {q: getattr(self, q) for q in QUEUES}

        def fail(code):
            raise_error(m, self, code)

        queues = {}
        for name in QUEUES:
            queues[name] = qf = StreamFIFO(queue_entry_layout(), QUEUE_DEPTH)
            m.submodules[f"{name}_queue"] = qf
            if name in REGISTERED_POP:
                _registered_pop(m, qf, ports[name].head, name)
            else:
                wiring.connect(m, qf.o, wiring.flipped(ports[name].head))
        head = self.fetched.payload
        hop = view(head.insn).opcode
        end_seen = Signal()
        at_head = Signal()
        m.d.comb += at_head.eq(self.fetched.valid & self.go & ~self.stop & ~end_seen)
        target_ok = Signal()
        with m.Switch(hop):
            for op in Op:
                if op == Op.ILLEGAL:
                    continue
                with m.Case(int(op)):
                    if op == Op.END:
                        m.d.comb += target_ok.eq(Cat(*[q.i.ready for q in queues.values()]).all())
                    else:
                        m.d.comb += target_ok.eq(queues[QUEUE_OF[op]].i.ready)
        with m.If(at_head & (head.bad != 0)):
            fail(head.bad)
        m.d.comb += self.dispatched.eq(at_head & (head.bad == 0) & target_ok)
        m.d.comb += self.fetched.ready.eq(self.dispatched | (self.fetched.valid
                                                             & (self.stop | end_seen)))
        entry = Signal(queue_entry_layout())
        m.d.comb += [entry.insn.eq(head.insn), entry.rh.eq(head.rh)]
        for name, qf in queues.items():
            ops = [op for op, q in QUEUE_OF.items() if q == name] + [Op.END]
            mine = Cat(*[hop == int(o) for o in ops]).any()
            m.d.comb += [qf.i.payload.eq(entry), qf.i.valid.eq(self.dispatched & mine)]
        with m.If(self.dispatched & (hop == int(Op.END))):
            m.d.sync += end_seen.eq(1)
        # the program ends without END: every instruction fetched and dispatched
        with m.If(self.go & ~end_seen & self.exhausted):
            fail(ErrorCode.PROGRAM_OVERRUN)

        # ---- tokens ----
        def tag(pair):
            return f"{pair[0][0]}{pair[1][0]}"

        tok = {pr: Signal(range(TOKEN_MAX + 1), name=f"tok_{tag(pr)}") for pr in TOKEN_PAIRS}
        inc = {pr: Signal(name=f"inc_{tag(pr)}") for pr in TOKEN_PAIRS}
        dec = {pr: Signal(name=f"dec_{tag(pr)}") for pr in TOKEN_PAIRS}
        for pr in TOKEN_PAIRS:
            m.d.sync += tok[pr].eq(tok[pr] + inc[pr] - dec[pr])
            with m.If(inc[pr] & ~dec[pr] & (tok[pr] == TOKEN_MAX)):
                fail(ErrorCode.TOKEN_OVERFLOW)
        for name, p in ports.items():
            flags = view(p.head.payload.insn)
            ok, under = [], []
            for side, nbr in (("prev", PREV), ("next", NEXT)):
                other = nbr[name]
                if other is None:
                    continue
                need = getattr(flags, f"pop_{side}")
                have = tok[(other, name)] != 0
                ok.append(~need | have)
                under.append(need & ~have & ports[other].quiet)
                m.d.comb += dec[(other, name)].eq(p.start & need)
                m.d.comb += inc[(name, other)].eq(getattr(p, f"push_{side}"))
            m.d.comb += [p.ok.eq(Cat(*ok).all()), p.under.eq(Cat(*under).any())]
        return m

