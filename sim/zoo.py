"""The model zoo's runs (``attenio model run``): each layer type of a model (model/zoo.py) as a
workload under the caller's prefill or decode batch, with its variant, scheduled on a preset:
cycles, PE utilization by MAC, DRAM bytes and time at the preset's clock."""

from __future__ import annotations

from dataclasses import dataclass, replace

from attenio.base.config import HardwareConfig
from attenio.base.errors import ConfigError
from attenio.base.workload import workload_from_options
from attenio.contract.variant import variant_of
from attenio.model.zoo import LayerType, ZooModel
from attenio.sim.plan import default_scale
from attenio.sim.schedule import schedule

__all__ = ["LayerRun", "layer_workload", "run_model"]


@dataclass
class LayerRun:
    """One layer type's run: its workload and schedule, or why it did not run."""

    layer: LayerType
    workload: object | None = None
    cycles: int | None = None
    pe_util_mac: float | None = None
    read_bytes: int | None = None
    write_bytes: int | None = None
    time_us: float | None = None
    refused: str | None = None

    def to_dict(self) -> dict:
        d = {"layer": self.layer.name, "count": self.layer.count,
             "attention": self.layer.describe()}
        if self.refused:
            return {**d, "refused": self.refused}
        return {**d, "workload": self.workload.to_dict(), "cycles": self.cycles,
                "pe_util_mac": self.pe_util_mac, "read_bytes": self.read_bytes,
                "write_bytes": self.write_bytes, "time_us": self.time_us,
                "time_us_all_layers": self.time_us * self.layer.count}


def layer_workload(hw: HardwareConfig, lt: LayerType, **opts):
    """The workload of layer type ``lt`` under the batch options ``opts`` (``n``,
    ``seqlens``, ``decode`` with ``cache_lens``, ``page_size``, ``batch``: as the CLI's),
    causal, its window as FlashAttention's ``(window − 1, 0)``."""
    window = (lt.window - 1, 0) if lt.window else (-1, -1)
    return workload_from_options(hw, d=lt.head_dim, heads=lt.heads, kv_heads=lt.kv_heads,
                                 causal=True, window=window, **opts)


def run_model(hw: HardwareConfig, model: ZooModel, phase: str, progress=None,
              **opts) -> list[LayerRun]:
    """Each of ``model``'s layer types that runs in ``phase`` (``prefill`` or ``decode``)
    scheduled on ``hw`` under the batch options ``opts`` (:func:`layer_workload`); a layer
    the hardware cannot run (a head dim past the preset's) comes back ``refused`` with the
    reason. ``progress(fraction)`` after each."""
    todo = [lt for lt in model.layers if lt.phase in (None, phase)]
    out = []
    for i, lt in enumerate(todo):
        wl = layer_workload(None, lt, **opts)            # the batch's options checked here
        if lt.head_dim_v is not None:
            wl = replace(wl, head_dim_v=lt.head_dim_v, v_in_k=lt.v_in_k)
        sinks = [0.0] * lt.heads if lt.sinks else None      # their values move no cycle
        why = variant_of(wl, lt.softmax_scale, lt.softcap, sinks).unbuilt()
        if not why:
            try:
                hw.check_workload(wl)
            except ConfigError as e:                    # a head dim past this preset's …
                why = [str(e)]
        if why:
            out.append(LayerRun(lt, wl, refused="; ".join(why)))
        else:
            sch = schedule(hw, wl, "attenio", keep_spans=False,
                           scale=default_scale(hw, wl, lt.softcap, sinks))
            out.append(LayerRun(lt, wl, sch.total_cycles, sch.pe_util_mac, sch.read_bytes,
                                sch.write_bytes, sch.total_cycles / hw.clock_mhz))
        if progress is not None:
            progress((i + 1) / len(todo))
    return out
