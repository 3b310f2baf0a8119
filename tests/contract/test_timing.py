"""The timing contract (contract/timing.py) against the RTL blocks' own latencies and depths."""

import pytest

from attenio.base import config as C
from attenio.contract.timing import SOFTCAP_LATENCY, TIMING, Timing, timing_for
from attenio.hw.core import ComputeCore
from attenio.hw.sequencer import StepSequencer
from attenio.sim import schedule


@pytest.mark.parametrize("preset", ["tiny", "fpga"])
def test_core_latencies_are_the_contracts(preset):
    core = ComputeCore(C.preset(preset))
    assert core.p_ready_latency == TIMING.p_ready_latency
    assert core.finalize_latency == TIMING.finalize_latency


@pytest.mark.parametrize("preset", ["tiny", "fpga"])
def test_the_soft_capping_unit_lengthens_the_score_path_by_its_stages(preset):
    hw = C.replace(C.preset(preset), softcap_unit=True)
    core, t = ComputeCore(hw), timing_for(hw)
    assert core.p_ready_latency == t.p_ready_latency
    assert t.p_ready_latency == TIMING.p_ready_latency + SOFTCAP_LATENCY
    assert core.finalize_latency == t.finalize_latency
    # a row group's m/ℓ go round the longer softmax before its next step reads them
    assert StepSequencer(hw).min_phase == t.min_phase == TIMING.min_phase + SOFTCAP_LATENCY
    assert timing_for(C.preset(preset)) == TIMING


# The depths and hand-off latencies are observed in simulation, not compared with the constants
# the RTL is built from: tests/hw/ctrl/test_timing_measured.py (queue_depth, fetch_chunk,
# fetch_buffer, fetch_delay, fetch_gap, request_delay, request_gap, max_outstanding),
# tests/hw/test_core.py (out_fifo_depth, finalize_latency), tests/hw/test_streamfifo.py
# (fifo_latency), tests/hw/test_core_blocks.py (min_phase); the rest by the cycle-exact RTL
# suite (scripts/studies/mutate_timing.py).


def test_schedule_defaults_to_the_contract():
    assert Timing() == TIMING
    hw = C.tiny()
    s = schedule.schedule(hw, C.Workload.square(8, 8))
    assert s.timing == TIMING
