"""The ``attenio`` command line (click): ``main`` and its commands, one module per topic."""

from attenio.app.cli import (  # noqa: F401  (registers)
    config_cmds,
    model_cmds,
    rtl_cmds,
    sim_cmds,
    zoo_cmds,
)
from attenio.app.cli.app import main

__all__ = ["main"]
