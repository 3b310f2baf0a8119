"""The controller around the compute core, one topic per module: program fetch and decode
(``fetch``, ``decode``), dispatch into queues with tokens (``dispatch``), AXI burst splitting
and the address window (``bursts``), the load and store DMA engines (``load``, ``store``), the
compute queue's issue (``issue``), and the watchdog and counters (``watchdog``). ``hw/top.py``
connects them; ``layouts`` derives every payload from the program format."""
