"""AXI4 manager ports as flat, vendor-shell names, and how an engine drives an address
channel."""

from __future__ import annotations

from amaranth import Module, Mux, Signal, Value
from amaranth.lib.wiring import In, Out

ADDR_BITS = 48

__all__ = ["ADDR_BITS", "axi4_ports", "log2", "kept_offered", "held_while_waiting"]


def kept_offered(m: Module, want, ready) -> Signal:
    """VALID of a channel: ``want``, and, once offered without READY, held until the
    handshake even if ``want`` falls (an error or ABORT stops the run): AXI4 A3.2.1."""
    held = Signal()
    valid = Signal()
    m.d.comb += valid.eq(want | held)
    m.d.sync += held.eq(valid & ~ready)
    return valid


def held_while_waiting(m: Module, valid, ready, value) -> Value:
    """``value`` as a channel's payload: while a beat waits for READY, the value it was
    offered with (AXI4: payload stable until the handshake), whatever ``value`` does."""
    value = Value.cast(value)
    waiting = Signal()
    kept = Signal(len(value))
    out = Signal(len(value))
    m.d.comb += out.eq(Mux(waiting, kept, value))
    m.d.sync += [waiting.eq(valid & ~ready), kept.eq(out)]
    return out


def log2(x: int) -> int:
    return x.bit_length() - 1


def axi4_ports(prefix: str, data_bits: int, read: bool = True, write: bool = True) -> dict:
    """Flat AXI4 manager ports (``In``/``Out`` from the manager's side)."""
    ports = {}
    if read:
        ports.update({"araddr": Out(ADDR_BITS), "arlen": Out(8), "arsize": Out(3),
                      "arburst": Out(2), "arvalid": Out(1), "arready": In(1),
                      "rdata": In(data_bits), "rresp": In(2), "rlast": In(1),
                      "rvalid": In(1), "rready": Out(1)})
    if write:
        ports.update({"awaddr": Out(ADDR_BITS), "awlen": Out(8), "awsize": Out(3),
                      "awburst": Out(2), "awvalid": Out(1), "awready": In(1),
                      "wdata": Out(data_bits), "wstrb": Out(data_bits // 8), "wlast": Out(1),
                      "wvalid": Out(1), "wready": In(1),
                      "bresp": In(2), "bvalid": In(1), "bready": Out(1)})
    return {f"{prefix}{k}": v for k, v in ports.items()}
