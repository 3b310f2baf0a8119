"""A seeded fault campaign on the RTL: bus errors on any channel, ABORT and reset timed while
requests wait, mutated programs, under random backpressure (docs/architecture.md, "Faults").

Every case must end with ``done`` and an error code or a correct result (a mutated program that
``validate()`` accepts must not hang), never write outside the output region, keep the AXI4
rules on every port, and leave the accelerator able to run the clean program bit-exactly right
after, in the same simulation. ``python scripts/fault_campaign.py`` prints the report;
``make test-slow`` runs a campaign as a test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from attenio.base.config import HardwareConfig, Workload
from attenio.base.errors import ConfigError, ErrorCode
from attenio.contract.program import INSTR_BYTES, decode, validate

__all__ = ["FaultCase", "make_cases", "run_case", "campaign", "KINDS"]

KINDS = ("read error", "write error", "program error", "abort", "reset", "mutated program")
STALLS = (0.0, 0.3, 0.6, 0.95)


@dataclass
class FaultCase:
    """One injected fault: what the runner is given, and what validate() said of a mutated
    program (``None`` for other kinds)."""

    kind: str
    seed: int
    p_stall: float
    kw: dict = field(default_factory=dict)
    accepted: bool | None = None
    what: str = ""


def _mutate(rng: random.Random, prog: bytes) -> tuple[bytes, str]:
    n = len(prog) // INSTR_BYTES
    words = [bytearray(prog[i * INSTR_BYTES:(i + 1) * INSTR_BYTES]) for i in range(n)]
    body = max(1, n - 1)                        # END stays last unless a flip hits it
    how = rng.choice(("flip", "flip", "swap", "drop", "dup"))
    i = rng.randrange(body)
    if how == "flip":
        bit = rng.randrange(INSTR_BYTES * 8) if rng.random() < 0.5 else rng.randrange(8)
        words[i][bit // 8] ^= 1 << (bit % 8)
        what = f"bit {bit} of instruction {i} flipped"
    elif how == "swap" and body > 1:
        j = min(body - 1, i + 1) if i + 1 < body else i - 1
        words[i], words[j] = words[j], words[i]
        what = f"instructions {i} and {j} swapped"
    elif how == "drop" and body > 1:
        del words[i]
        what = f"instruction {i} dropped"
    else:
        words.insert(i, bytearray(words[i]))
        what = f"instruction {i} duplicated"
    return b"".join(bytes(w) for w in words), what


def make_cases(hw: HardwareConfig, wl: Workload, count: int, seed: int = 0) -> list[FaultCase]:
    """``count`` cases cycling through :data:`KINDS`, each with its own seeded choices."""
    from attenio.verify.runner import prepare

    prep = prepare(hw, wl, seed=1)
    lay = prep.layout
    cycles = prep.schedule.total_cycles
    row = hw.row_elements(wl.head_dim) * hw.element_bytes
    q_bytes = wl.batch * wl.heads * wl.seq_q * row
    kv_bytes = wl.batch * wl.kv_heads * wl.seq_k * row
    out = []
    for c in range(count):
        rng = random.Random(seed * 1_000_003 + c)
        kind = KINDS[c % len(KINDS)]
        case = FaultCase(kind, c, rng.choice(STALLS))
        if kind == "read error":
            # a beat of Q, K or V (the regions are 4 KB aligned: stay inside what is read)
            base, size = rng.choice([(lay.q, q_bytes), (lay.k, kv_bytes), (lay.v, kv_bytes)])
            lo = rng.randrange(base, base + size - 4, 4)
            case.kw["errors"] = [(lo, lo + 4)]
            case.what = f"SLVERR on the read beat of {lo:#x}"
        elif kind == "write error":
            lo = rng.randrange(lay.o, lay.o + prep.o_bytes - 4, 4)
            case.kw["errors"] = [(lo, lo + 4)]
            case.what = f"SLVERR on the write burst holding {lo:#x}"
        elif kind == "program error":
            lo = rng.randrange(lay.program, lay.program + len(prep.program) - 4, 4)
            case.kw["errors"] = [(lo, lo + 4)]
            case.what = f"SLVERR on the program beat of {lo:#x}"
        elif kind in ("abort", "reset"):
            at = rng.randrange(20, max(40, cycles))
            case.kw["abort_at" if kind == "abort" else "reset_at"] = at
            case.what = f"{kind} {at} cycles in"
        else:
            prog, case.what = _mutate(rng, prep.program)
            case.kw["program"] = prog
            try:
                validate(decode(prog), hw, prog_region=(lay.program, len(prog)),
                         kv_region=(lay.k, lay.o - lay.k))
                case.accepted = True
            except ConfigError:
                case.accepted = False
        out.append(case)
    return out


def run_case(hw: HardwareConfig, wl: Workload, case: FaultCase, sim: str = "verilator") -> dict:
    """Run one case (and the clean run after it); the outcome and the invariants it broke."""
    from attenio.verify.runner import simulate

    r = simulate(hw, wl, sim=sim, seed=1, p_stall=case.p_stall, check=False, rerun=True,
                 log=lambda *a: None, **case.kw)
    broken = []
    if not r.done or r.timed_out:
        broken.append("did not end with done")
    if r.error == ErrorCode.NONE and not r.bit_exact and case.kind != "mutated program":
        broken.append("wrong output with no error")
    if case.accepted and r.error == ErrorCode.TIMEOUT:
        broken.append("a program validate() accepted timed out")
    if r.stray_bytes:
        broken.append(f"{r.stray_bytes} bytes written outside the output region")
    if r.axi_violations:
        broken.append(f"{r.axi_violations} AXI violations: {r.axi_report[:2]}")
    rr = r.rerun or {}
    if not (rr.get("done") and rr.get("error") == ErrorCode.NONE and rr.get("bit_exact")):
        broken.append(f"the clean run after it failed: {rr}")
    return {"kind": case.kind, "seed": case.seed, "p_stall": case.p_stall, "what": case.what,
            "accepted": case.accepted, "error": r.error.name, "bit_exact": r.bit_exact,
            "cycles": r.cycles, "broken": broken}


def _run_cases(chunk, hw, wl, sim):
    return [(i, run_case(hw, wl, case, sim)) for i, case in chunk]


def campaign(hw: HardwareConfig, wl: Workload, count: int, seed: int = 0,
             sim: str = "verilator", progress=None, workers: int | None = None,
             scheduler: str | None = None) -> dict:
    """Run ``count`` cases; ``progress(i, count, outcome)`` after each. Returns the outcomes
    (in case order) and a summary: injected, survived (no invariant broken), per kind and per
    error code. With ``workers`` or ``scheduler`` the cases fan out over processes or a Dask
    cluster (sim/fanout.py); the simulator is built once first, each job reuses it."""
    cases = make_cases(hw, wl, count, seed)
    if workers is None and scheduler is None:
        outcomes = []
        for i, case in enumerate(cases):
            outcomes.append(run_case(hw, wl, case, sim))
            if progress:
                progress(i + 1, count, outcomes[-1])
    else:
        from attenio.sim.fanout import fan_out
        from attenio.verify.runner import build

        build(hw, sim, log=lambda *a: None)
        got: dict[int, dict] = {}

        def record(rows):
            for i, o in rows:
                got[i] = o
                if progress:
                    progress(len(got), count, o)

        def failed(chunk):
            return [(i, {"kind": c.kind, "seed": c.seed, "p_stall": c.p_stall, "what": c.what,
                         "accepted": c.accepted, "error": "WORKER_DIED", "bit_exact": False,
                         "cycles": 0, "broken": ["its worker died"]}) for i, c in chunk]

        fan_out(_run_cases, [[(i, c)] for i, c in enumerate(cases)], record, failed,
                workers=workers, scheduler=scheduler, hw=hw, wl=wl, sim=sim)
        outcomes = [got[i] for i in range(len(cases))]
    by_kind: dict[str, dict] = {}
    for o in outcomes:
        k = by_kind.setdefault(o["kind"], {"injected": 0, "survived": 0, "errors": {}})
        k["injected"] += 1
        k["survived"] += not o["broken"]
        k["errors"][o["error"]] = k["errors"].get(o["error"], 0) + 1
    return {"injected": len(outcomes), "survived": sum(not o["broken"] for o in outcomes),
            "by_kind": by_kind, "outcomes": outcomes}
