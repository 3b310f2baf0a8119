"""The timing contract: every latency and depth the RTL implements and the schedule generator
models (docs/architecture.md, "Timing contract").

``hw/`` reads its depths and step constants from :data:`TIMING`; the latencies that are sums
of the RTL blocks' own ``latency`` (``p_ready_latency``, ``finalize_latency``) are checked
against the blocks by tests/contract/test_timing.py, and the controller's hand-off latencies by
the cycle-exact RTL suite (tests/cocotb).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["Timing", "TIMING", "SOFTCAP_LATENCY", "ALIBI_LATENCY", "timing_for"]

# the soft-capping unit's stages in the softmax pipeline (hw/softmax.py): |x|; the table;
# the interpolation; T·tanh (two); the rounding and the sign
SOFTCAP_LATENCY = 6
# the ALiBi unit's stages in the softmax pipeline (hw/softmax.py): the logit less its bias,
# saturated, one register after the scale (and the cap)
ALIBI_LATENCY = 1


@dataclass(frozen=True)
class Timing:
    """Microarchitectural latencies and depths (cycles, instructions, bursts)."""

    min_phase: int = 12          # shortest Q Kᵀ or P V step (a short step is padded to it)
    p_ready_latency: int = 16    # last Q Kᵀ issue of a step → first P V issue it allows
    ring_ready_latency: int = 1  # a step's last K/V row in the ring → the step may start
    pv_drain: int = 5            # last P V issue → finalize may read O
    finalize_latency: int = 19   # finalize issue → word readable at the output FIFO's head
    fetch_chunk: int = 8         # instructions per program burst
    fetch_buffer: int = 16       # fetched, not yet dispatched instructions (two chunks)
    queue_depth: int = 8         # entries per instruction queue
    # a load or store queue's head taken → its FIFO pops it (a register, off the engine's
    # start: hw.ctrl.dispatch._registered_pop); a full queue takes the next entry then
    pop_delay: int = 1
    max_outstanding: int = 16    # data bursts in flight per AXI direction
    max_burst_beats: int = 256   # AXI4 INCR limit (and never across a 4 KB line)
    out_fifo_depth: int = 16     # finalized output words the core buffers
    # controller hand-offs: each FIFO (fetch buffer, queues, W queue) delivers a word written
    # in cycle t in cycle t + fifo_latency
    fifo_latency: int = 2
    # a load or store queue's head → the engine may start it (what it derives from the
    # head's fields, a transfer's beats, registered in two stages: hw.ctrl.prepared_head)
    head_latency: int = 2
    request_delay: int = 3       # a load or store instruction starts → its first AXI request
    request_gap: int = 3         # a data burst request → the next one (registered bursts)
    fetch_gap: int = 2           # a program burst request → the next one
    fetch_delay: int = 2         # the run starts → the first program request may go out
    decode_latency: int = 2      # an instruction's last beat → it is written to the buffer
    cmd_latency: int = 2         # COMPUTE starts → the PE array may issue
    idle_latency: int = 2        # the last output beat → the compute queue moves on
    # the compute queue sees the core idle → the next tile's first K/V request may go out (the
    # ring credits clear with the core's end, a cycle before the queue sees it, and the credit
    # compare is a register: one cycle later)
    credit_delay: int = 0
    credit_latency: int = 1      # a step's end frees ring rows → a request may use them
    # a paged cache: a block-table word's arrival (the model's end of its read) → the earliest
    # request of a K block whose page entry it holds
    entry_latency: int = 3
    done_latency: int = 3        # the last event → done (the run's end)
    # a tile's parts (COMPUTE.more, .cont): a part's last step → the next part's first K/V
    # request may go out (the part ends pv_drain cycles after its last step, its last O writes
    # done and its rings cleared; the load engine sees fresh credits two cycles later; the
    # core takes the next part's command a cycle before that); the cont COMPUTE taken → the
    # PE array may issue its first step
    part_drain: int = 7
    cont_latency: int = 3


TIMING = Timing()
# the queues whose FIFO pops a taken head pop_delay cycles later (the compute queue's at once)
REGISTERED_POP = ("load", "store")


def timing_for(hw) -> Timing:
    """The contract of the RTL ``hw`` builds: :data:`TIMING`, with the stages of the variant
    units the config builds (the soft-capping unit's ``SOFTCAP_LATENCY`` with
    ``softcap_unit``, the ALiBi unit's ``ALIBI_LATENCY`` with ``alibi_unit``) added to
    ``p_ready_latency`` and to ``min_phase`` (a row group's m/ℓ go round the longer softmax
    pipeline before the next step reads them)."""
    extra = (SOFTCAP_LATENCY if getattr(hw, "softcap_unit", False) else 0) \
        + (ALIBI_LATENCY if getattr(hw, "alibi_unit", False) else 0)
    if not extra:
        return TIMING
    return dataclasses.replace(TIMING, p_ready_latency=TIMING.p_ready_latency + extra,
                               min_phase=TIMING.min_phase + extra)

# Timing mutations (one constant ±1 in the model alone) under which the schedule generator gives
# the same timeline, each with its reason: no RTL workload can catch them, so the mutation
# campaign (scripts/studies/mutate_timing.py) records them without running them, and
# tests/sim/test_equivalent_mutations.py holds each claim on a sweep that reaches every engine.
EQUIVALENT_MUTATIONS: dict[tuple[str, int], str] = {
    # the fetch buffer holds whole chunks (fetch_buffer // fetch_chunk): 17 holds two, as 16
    ("fetch_buffer", +1): "the buffer holds whole chunks",
    # a chunk's data takes ≥ 2 cycles (8 instructions of 32 B on a bus of ≤ 128 B), so the
    # next chunk's data never starts before the last ends when requests are 1 or 2 apart
    ("fetch_gap", -1): "a chunk's data outlasts a gap of 1 or 2",
    # a queue instruction keeps its engine ≥ request_delay + 1 cycles, so the engine, not the
    # queue's room, holds back the next one; the other queues' instructions behind a full
    # queue wait on its data (tokens) in generated programs
    ("queue_depth", +1): "the engines, not the queues' room, hold instructions back",
    ("queue_depth", -1): "the engines, not the queues' room, hold instructions back",
    ("pop_delay", +1): "the engines, not the queues' room, hold instructions back",
    ("pop_delay", -1): "the engines, not the queues' room, hold instructions back",
    # the ring caps K/V bursts in flight at 2 · ring rows ≤ 16 and Q/O transfers are one
    # burst a row or a 4 KB line: 17 in flight never occurs
    ("max_outstanding", +1): "no program has 17 bursts in flight",
    # the model does not read it: the store drains the output FIFO as the finalize fills it
    # (the FIFO's room is the RTL's concern: tests/hw/test_core.py, the output stalled)
    ("out_fifo_depth", +1): "the model does not read it",
    ("out_fifo_depth", -1): "the model does not read it",
}
