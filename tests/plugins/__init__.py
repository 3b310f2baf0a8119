"""Pytest plugins the suite does not load by default (scripts/studies/mutate_timing.py
loads the timing-mutation one)."""
