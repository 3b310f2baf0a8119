"""Field checks and TOML/JSON serialization shared by the config dataclasses
(base/config.py): each check raises :class:`ConfigError` naming the field, the value and
what is valid."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import fields
from typing import Any, ClassVar

from attenio.base.errors import ConfigError, bad

__all__ = ["check_int", "check_float", "check_bool", "is_pow2", "Serializable", "dumps_toml"]


def check_int(obj, name: str, lo: int, hi: int | None = None) -> None:
    value = getattr(obj, name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad(name, value, f"must be an integer in [{lo}, {hi if hi is not None else 'inf'}]")
    if value < lo or (hi is not None and value > hi):
        raise bad(name, value, f"must be in [{lo}, {hi if hi is not None else 'inf'}]")


def check_float(obj, name: str, lo_exclusive: float, hi: float | None = None) -> None:
    value = getattr(obj, name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise bad(name, value, f"must be a finite number > {lo_exclusive}")
    if value <= lo_exclusive or (hi is not None and value > hi):
        raise bad(name, value, f"must be in ({lo_exclusive}, {hi if hi is not None else 'inf'}]")


def check_bool(obj, name: str) -> None:
    value = getattr(obj, name)
    if not isinstance(value, bool):
        raise bad(name, value, "must be true or false")


def is_pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


class Serializable:
    """to_dict/from_dict shared by the config dataclasses (nested dataclasses, named in
    ``NESTED``, become tables)."""

    NESTED: ClassVar[dict[str, type]] = {}
    # fields an older file may still hold, read and dropped (Workload's element_bytes: the
    # hardware's element size is the only one)
    LEGACY: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            if v is None:
                continue  # TOML has no null; a missing key means the default
            out[f.name] = v.to_dict() if isinstance(v, Serializable) else v
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = ""):
        prefix = f"{where}." if where else ""
        if not isinstance(data, dict):
            raise bad(where or cls.__name__, data, "must be a table of fields")
        known = {f.name: f for f in fields(cls)}  # type: ignore[arg-type]
        data = {k: v for k, v in data.items() if k not in cls.LEGACY}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise bad(f"{prefix}{unknown[0]}", data[unknown[0]],
                      f"unknown field of {cls.__name__}; valid fields: {', '.join(known)}")
        missing = [f.name for f in known.values() if f.name not in data
                   and f.default is dataclasses.MISSING
                   and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ConfigError(f"{prefix}{missing[0]} is missing: a required field of "
                              f"{cls.__name__} (or start the table with preset = \"name\")")
        kwargs = {}
        for name, value in data.items():
            sub = cls.NESTED.get(name)
            kwargs[name] = sub.from_dict(value, f"{prefix}{name}") if sub else value
        try:
            return cls(**kwargs)
        except ConfigError as e:
            raise ConfigError(f"{prefix}{e}") from None


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise TypeError(f"cannot write {type(v).__name__} to TOML")


def dumps_toml(tables: dict[str, dict[str, Any]]) -> str:
    """Write ``{table: {key: scalar or {subtable...}}}`` as TOML (the subset this project needs)."""
    lines: list[str] = []

    def emit(name: str, body: dict[str, Any]) -> None:
        lines.append(f"[{name}]")
        subs = []
        for k, v in body.items():
            if isinstance(v, dict):
                subs.append((f"{name}.{k}", v))
            else:
                lines.append(f"{k} = {_toml_value(v)}")
        lines.append("")
        for sub_name, sub in subs:
            emit(sub_name, sub)

    for name, body in tables.items():
        emit(name, body)
    return "\n".join(lines)
