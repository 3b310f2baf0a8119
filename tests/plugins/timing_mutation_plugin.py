"""A pytest plugin for scripts/studies/mutate_timing.py: with
``ATTENIO_TIMING_MUTATION=name=±k`` the schedule generator models ``Timing`` with that one
constant moved, while the RTL keeps the contract's (hw/ reads ``contract.timing.TIMING``, which
this leaves alone)."""

from __future__ import annotations

import dataclasses
import os


def pytest_configure(config):
    spec = os.environ.get("ATTENIO_TIMING_MUTATION")
    if not spec:
        return
    name, delta = spec.split("=")
    from attenio.contract import timing as contract
    from attenio.sim import plan, schedule, timeline

    base = contract.Timing()
    mutated = dataclasses.replace(base, **{name: getattr(base, name) + int(delta)})

    def model_timing():
        return mutated

    def model_timing_for(hw):
        # the config's own contract (its units' stages) with the one constant moved
        real = contract.timing_for(hw)
        return dataclasses.replace(real, **{name: getattr(real, name) + int(delta)})

    schedule.Timing = model_timing
    timeline.Timing = model_timing
    # the schedule generator reads the contract through timing_for (the RTL keeps its own)
    plan.timing_for = model_timing_for
    timeline.timing_for = model_timing_for
