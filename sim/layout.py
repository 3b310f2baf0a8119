"""Where a run's program and tensors lie in DRAM (``Layout.packed``): the schedule generator
emits addresses from it and the host image (sim/image.py) writes the bytes there."""

from __future__ import annotations

from dataclasses import dataclass

from attenio.config import HardwareConfig, Workload

__all__ = ["Layout"]


@dataclass(frozen=True)
class Layout:
    """Byte addresses of the program and the tensors in DRAM (all 4 KB aligned)."""

    program: int
    q: int
    k: int
    v: int
    o: int
    end: int

    @classmethod
    def packed(cls, hw: HardwareConfig, wl: Workload, program_bytes: int,
               row_scales: bool = False, key_scales: bool = False) -> Layout:
        """Program, Q, K, V and O one after another, each region 4 KB aligned; with
        ``row_scales`` each Q row is followed by the word holding its multiplier, with
        ``key_scales`` each K row by the word holding its factor."""
        def up(x):
            return -(-x // 4096) * 4096

        eb = hw.element_bytes
        dp = hw.row_elements(wl.head_dim)      # rows padded to whole words
        qb = wl.batch * wl.heads * wl.seq_q * hw.q_row_elements(wl.head_dim, row_scales) * eb
        kb = wl.batch * wl.kv_heads * wl.seq_k * hw.k_row_elements(wl.head_dim, key_scales) * eb
        vb = wl.batch * wl.kv_heads * wl.seq_k * dp * eb
        p = 0
        q = up(p + program_bytes)
        k = up(q + qb)
        v = up(k + kb)
        o = up(v + vb)
        return cls(program=p, q=q, k=k, v=v, o=o, end=up(o + hw.o_bytes(wl)))
