"""The model zoo: the attention layers of current open models (model/zoo.toml, each value cited to
its published config) and their runs on a preset (``attenio model``): each layer type's
workload under the caller's prefill or decode batch, its variant (window, soft-cap, softmax
scale, sinks, separate head dims) and its schedule (cycles, PE utilization by MAC, DRAM bytes,
time at the preset's clock), and the model's attention time per forward pass."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

from attenio.base.config import PRESET_UNITS
from attenio.base.errors import bad
from attenio.base.tomlfile import parse_toml

__all__ = ["LayerType", "ZooModel", "models", "get", "units_needed"]

_LAYER_FIELDS = {"name", "count", "heads", "kv_heads", "head_dim", "head_dim_v", "window",
                 "softcap", "softmax_scale", "scale_note", "sinks", "v_in_k", "phase"}


@dataclass(frozen=True)
class LayerType:
    """``count`` layers of one attention shape and variant (model/zoo.toml's fields)."""

    name: str
    count: int
    heads: int
    kv_heads: int
    head_dim: int
    head_dim_v: int | None = None
    window: int | None = None          # keys a query sees, its own included
    softcap: float | None = None
    softmax_scale: float | None = None
    scale_note: str = ""
    sinks: bool = False
    v_in_k: bool = False
    phase: str | None = None           # "prefill" or "decode" only (MLA), else both

    def describe(self) -> str:
        """The layer's attention in a few words (``attenio model show``)."""
        dims = (f"d={self.head_dim}" if self.head_dim_v is None
                else f"d_qk={self.head_dim} d_v={self.head_dim_v}")
        parts = [f"{self.heads}/{self.kv_heads} heads", dims, "causal"]
        if self.window:
            parts.append(f"window {self.window}")
        if self.softcap:
            parts.append(f"softcap {self.softcap:g}")
        if self.softmax_scale:
            parts.append(f"scale {self.softmax_scale:.6g}"
                         + (f" ({self.scale_note})" if self.scale_note else ""))
        if self.sinks:
            parts.append("sinks")
        if self.v_in_k:
            parts.append(f"V = K[:, :{self.head_dim_v}]")
        if self.phase:
            parts.append(f"{self.phase} only")
        return ", ".join(parts)


@dataclass(frozen=True)
class ZooModel:
    key: str
    title: str
    source: str
    layers: tuple[LayerType, ...] = field(default_factory=tuple)

    @property
    def layer_count(self) -> int:
        """Layers per forward pass (a type limited to one phase counted once)."""
        seen = {}
        for lt in self.layers:
            seen.setdefault(lt.phase, 0)
            seen[lt.phase] += lt.count
        return max(seen.get(None, 0) + seen.get(p, 0) for p in ("prefill", "decode"))


def _load() -> dict[str, ZooModel]:
    text = resources.files("attenio.model").joinpath("zoo.toml").read_text()
    out = {}
    for key, m in parse_toml(text).items():
        layers = []
        for lt in m["layers"]:
            unknown = set(lt) - _LAYER_FIELDS
            if unknown:                      # a packaging error, not a user's
                raise ValueError(f"zoo.toml [{key}]: unknown layer fields {sorted(unknown)}")
            layers.append(LayerType(**lt))
        out[key] = ZooModel(key, m["title"], m["source"], tuple(layers))
    return out


_MODELS: dict[str, ZooModel] | None = None


def models() -> dict[str, ZooModel]:
    """Every model of the zoo by its name (``llama-3.1-8b``, ``gpt-oss-20b`` …)."""
    global _MODELS
    if _MODELS is None:
        _MODELS = _load()
    return _MODELS


def get(name: str) -> ZooModel:
    """The model named ``name``; ConfigError naming the known ones otherwise."""
    zoo = models()
    if name not in zoo:
        raise bad("model", name, f"known models: {', '.join(zoo)}")
    return zoo[name]


def units_needed(model: ZooModel) -> list[str]:
    """The preset units (``+softcap``, ``+sinks``) the model's layers need."""
    need = {"softcap": any(lt.softcap for lt in model.layers),
            "sinks": any(lt.sinks for lt in model.layers)}
    return [u for u in PRESET_UNITS if need.get(u)]
