"""Routing between the MAC lines and the banks when a step takes b = 2**blog keys: which ring
copy a line reads, which row bank a line's chain starts from and which line's result a bank
takes. Small muxes on ``blog`` (constants when the config allows one key per step, so
synthesis drops them); shared by the compute core's stages (hw/score.py, hw/pv_stage.py,
hw/softmax_stage.py)."""

from __future__ import annotations

from amaranth import Module, Signal

from attenio.base.config import HardwareConfig

__all__ = ["Lanes"]


class Lanes:
    """The lane routing of one stage's module ``m`` for ``blog`` (log2 of the keys per step:
    line i takes key ``i mod b`` of the step, for row ``i >> blog``)."""

    def __init__(self, m: Module, cfg: HardwareConfig, blog):
        self.m, self.blog = m, blog
        self.p = cfg.mac_lines
        self.lkmax = cfg.max_keys_per_step.bit_length() - 1

    def pick(self, name: str, shape, sources: dict):
        """``sources[k]`` when b = 2**k (k ≤ log2 max_keys_per_step): a small mux."""
        out = Signal(shape, name=name)
        if self.lkmax == 0:
            self.m.d.comb += out.eq(sources[0])
            return out
        with self.m.Switch(self.blog):
            for k, src in sources.items():
                with self.m.Case(k):
                    self.m.d.comb += out.eq(src)
        return out

    def copy(self, datas, i: int, shape, name: str):
        """The ring word (or key factor) line i uses: copy ``i mod b``."""
        return self.pick(f"{name}_word{i}", shape,
                         {k: datas[i & ((1 << k) - 1)] for k in range(self.lkmax + 1)})

    def from_row_bank(self, datas, shape, i: int, name: str):
        """Line i's chain starts from the state of row ``i >> blog``, kept in that bank."""
        return self.pick(f"{name}_src{i}", shape,
                         {k: datas[i >> k] for k in range(self.lkmax + 1)})

    def from_chain_end(self, outs, shape, i: int, name: str):
        """Bank i (row i) takes the result of its chain's last line, ``i·b + b − 1``."""
        return self.pick(f"{name}_res{i}", shape,
                         {k: outs[min(self.p - 1, (i << k) + (1 << k) - 1)]
                          for k in range(self.lkmax + 1)})
