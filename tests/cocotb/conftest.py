"""RTL tests keep to one pytest worker per model group (``make test`` runs ``--dist
loadgroup``). A Verilator model is built once, under a file lock, by the first test that needs
it, and a second worker that needs the same model meanwhile waits for the build: with tests
handed out one by one, both workers of the default suite began the same file's tests at once
and one waited, 80 to 120 s per model (kv8, int16, the every-unit model; measured on
2026-12-07). Grouped, a file's tests run on one worker and the other runs other tests.

A file's group is its module's name; the files that run the every-unit model
(tests/cocotb/variant_models.py) share one group."""

import pytest


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    for item in items:
        if str(item.path).startswith(here + "/"):
            group = ("every-unit" if hasattr(item.module, "EVERY_UNIT")
                     else item.module.__name__)
            item.add_marker(pytest.mark.xdist_group(group))
