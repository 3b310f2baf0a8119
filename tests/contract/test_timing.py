"""The timing contract (contract/timing.py) against the RTL blocks' own latencies and depths."""

import pytest
from amaranth.lib import fifo

from attenio import config as C
from attenio.contract.timing import TIMING, Timing
from attenio.hw import core as core_mod
from attenio.hw.core import ComputeCore
from attenio.hw.ctrl import dispatch, fetch, load, store
from attenio.sim import schedule


@pytest.mark.parametrize("preset", ["tiny", "fpga"])
def test_core_latencies_are_the_contracts(preset):
    core = ComputeCore(C.preset(preset))
    assert core.p_ready_latency == TIMING.p_ready_latency
    assert core.finalize_latency == TIMING.finalize_latency


def test_rtl_depths_are_the_contracts():
    assert core_mod.MIN_PHASE == TIMING.min_phase
    assert core_mod.PV_DRAIN == TIMING.pv_drain
    assert core_mod.OUT_FIFO_DEPTH == TIMING.out_fifo_depth
    assert fetch.FETCH_CHUNK == TIMING.fetch_chunk
    assert fetch.FETCH_BUFFER == TIMING.fetch_buffer == 2 * TIMING.fetch_chunk
    assert dispatch.QUEUE_DEPTH == TIMING.queue_depth
    assert load.MAX_OUTSTANDING == store.MAX_OUTSTANDING == TIMING.max_outstanding


def test_fifo_latency_is_amaranths():
    # the hand-off latency the contract assumes is the one of the FIFO the RTL uses
    assert core_mod.FIFO_LATENCY == TIMING.fifo_latency
    assert fifo.SyncFIFOBuffered(width=1, depth=4).r_level.shape().width >= 1


def test_schedule_defaults_to_the_contract():
    assert Timing() == TIMING
    hw = C.tiny()
    s = schedule.schedule(hw, C.Workload.square(8, 8))
    assert s.timing == TIMING
