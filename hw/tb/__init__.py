"""Simulation of the whole accelerator: a timed DRAM model, the cocotb host flow and the runner
that builds the Verilog, runs a simulator and checks the result (tests/cocotb/, `attenio
simulate`)."""
