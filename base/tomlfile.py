"""Hardware and workload configs as TOML files: ``[hardware]`` (a preset's name plus
overrides, or every field) and ``[workload]`` tables (``attenio config``, ``--config``)."""

from __future__ import annotations

import sys
from pathlib import Path

from attenio.base.config import HardwareConfig, preset
from attenio.base.errors import bad
from attenio.base.fields import dumps_toml
from attenio.base.workload import Workload

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["save_toml", "load_toml", "parse_toml"]


def parse_toml(text: str) -> dict:
    """``text`` parsed as TOML (tomllib, or tomli before Python 3.11)."""
    return tomllib.loads(text)


def save_toml(path: str | Path, hw: HardwareConfig | None = None,
              workload: Workload | None = None) -> None:
    """Write a ``[hardware]`` and/or ``[workload]`` table to ``path``."""
    tables = {}
    if hw is not None:
        tables["hardware"] = hw.to_dict()
    if workload is not None:
        tables["workload"] = workload.to_dict()
    Path(path).write_text(dumps_toml(tables))


def load_toml(path: str | Path) -> tuple[HardwareConfig | None, Workload | None]:
    """Read ``[hardware]`` (optionally ``preset = "name"`` plus overrides) and ``[workload]``.

    Raises :class:`ConfigError` for a missing or unparsable file, unknown tables or fields and
    values of the wrong type or range.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except FileNotFoundError:
        raise bad("config file", str(p), "file not found") from None
    except IsADirectoryError:
        raise bad("config file", str(p), "a directory; give a TOML file") from None
    except (UnicodeDecodeError, PermissionError) as e:
        raise bad("config file", str(p), f"not a readable text file ({type(e).__name__})") from None
    except tomllib.TOMLDecodeError as e:
        raise bad("config file", str(p), f"not valid TOML ({e})") from None
    unknown = sorted(set(data) - {"hardware", "workload"})
    if unknown:
        raise bad(unknown[0], data[unknown[0]], "unknown table; valid tables: hardware, workload")
    hw = wl = None
    if "hardware" in data:
        table = dict(data["hardware"]) if isinstance(data["hardware"], dict) else data["hardware"]
        if isinstance(table, dict) and "preset" in table:
            base = preset(table.pop("preset")).to_dict()
            nested = table.pop("numerics", {})
            base.update(table)
            if isinstance(nested, dict):
                base["numerics"] = {**base["numerics"], **nested}
            else:
                base["numerics"] = nested
            table = base
        hw = HardwareConfig.from_dict(table, "hardware")
    if "workload" in data:
        wl = Workload.from_dict(data["workload"], "workload")
    return hw, wl
