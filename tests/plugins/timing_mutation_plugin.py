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
    from attenio.contract.timing import Timing
    from attenio.sim import schedule, timeline

    base = Timing()
    mutated = dataclasses.replace(base, **{name: getattr(base, name) + int(delta)})

    def model_timing():
        return mutated

    schedule.Timing = model_timing
    timeline.Timing = model_timing
