"""The foundation every layer imports: the hardware configuration and its presets
(``config``), the workloads (``workload``), a paged cache's block table (``blocktable``), the
field checks and serialization (``fields``) and the errors (``errors``). It imports nothing else
of the project."""
