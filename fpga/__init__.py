"""The FPGA flow: synthesis, place and route (``synth``) and the on-board self-test
(``board``). It builds ``hw/`` and never imports the testbench."""
