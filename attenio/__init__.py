"""attenio: an open, verified accelerator for exact long-sequence attention.

``from attenio import attention, schedule, simulate`` is the Python API (app/api.py,
imported on first use so that ``import attenio.base.config`` stays light).
"""

from importlib import metadata as _metadata

try:
    __version__ = _metadata.version("attenio")
except _metadata.PackageNotFoundError:      # a source tree that was not installed
    __version__ = "0+unknown"

_API = ("attention", "attention_varlen", "attention_with_kvcache", "reference_attention",
        "reference_attention_varlen",
        "schedule", "simulate", "hardware")
__all__ = ["__version__", *_API]


def __getattr__(name):
    if name in _API:
        from attenio.app import api

        return getattr(api, name)
    raise AttributeError(f"module 'attenio' has no attribute {name!r}")
