"""Verification of the generated Verilog: the timed DRAM model, the cocotb host flow and the
runner behind ``attenio simulate``. Product code (``hw/``, ``sim/``, ``fpga/``) never imports it."""
