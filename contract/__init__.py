"""The contract between the hardware (``hw/``) and the schedule generator (``sim/``): the
program format (``program``) and the timing constants (``timing``). It imports neither."""
