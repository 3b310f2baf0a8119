// The plain verilated loop: the fast path's model (attenio_fast) clocked from C++ with no
// cocotb, the speed the fast path is measured against (scripts/bench_sim.py).
//
//   plain_loop SETUP_FILE +attenio_mem=IMAGE.hex +attenio_out=O.hex
//
// SETUP_FILE lines: "fd NAME VALUE" (latency, rate, mem_bytes, allowed_lo, allowed_hi, stall, seed),
// "reg OFFSET VALUE" (AXI4-Lite register writes, in order, the last one starting the run),
// "max CYCLES". Prints "cycles N seconds S" once the interrupt rises (or the limit passes).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "Vtop.h"
#include "verilated.h"

double sc_time_stamp() { return 0; }

static uint64_t cycles = 0;
static VerilatedContext* ctx = nullptr;

// the clock is the model's own (a delay loop): one call moves to its next edge
static void half(Vtop* top) {
    ctx->time(top->nextTimeSlot());
    top->eval();
}

// from the low half of one cycle to the low half of the next (rising edge, falling edge)
static void tick(Vtop* top) {
    half(top);
    half(top);
    ++cycles;
}

// one AXI4-Lite write: address and data offered together, then the response taken
static void lite_write(Vtop* top, uint32_t addr, uint32_t data) {
    top->s_axil_awaddr = addr;
    top->s_axil_awvalid = 1;
    top->s_axil_wdata = data;
    top->s_axil_wstrb = 0xF;
    top->s_axil_wvalid = 1;
    top->s_axil_bready = 1;
    bool aw = false, w = false, b = false;
    for (int i = 0; i < 1000 && !b; ++i) {
        top->eval();                                // the inputs just set, settled
        bool awh = top->s_axil_awvalid && top->s_axil_awready;
        bool wh = top->s_axil_wvalid && top->s_axil_wready;
        bool bh = (aw || awh) && (w || wh) && top->s_axil_bvalid;
        tick(top);
        if (awh) { aw = true; top->s_axil_awvalid = 0; }
        if (wh) { w = true; top->s_axil_wvalid = 0; }
        b = bh;
    }
    top->s_axil_bready = 0;
}

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: %s SETUP_FILE +attenio_mem=... +attenio_out=...\n", argv[0]);
        return 2;
    }
    ctx = new VerilatedContext;
    ctx->commandArgs(argc, argv);
    std::unique_ptr<Vtop> top(new Vtop(ctx, ""));
    std::ifstream setup(argv[1]);
    std::string line, kind, name;
    uint64_t limit = 100000000;
    top->rst = 1;
    top->fd_dump = 0;
    top->eval();                                    // time 0: the initial blocks, clock low
    for (int i = 0; i < 4; ++i) tick(top.get());
    top->rst = 0;
    tick(top.get());
    std::chrono::steady_clock::time_point t0;
    uint64_t c0 = 0;
    while (std::getline(setup, line)) {
        std::istringstream in(line);
        in >> kind;
        if (kind == "fd") {
            uint64_t v;
            in >> name >> v;
            if (name == "latency") top->fd_latency = v;
            else if (name == "rate") top->fd_rate = v;
            else if (name == "mem_bytes") top->fd_mem_bytes = v;
            else if (name == "allowed_lo") top->fd_allowed_lo = v;
            else if (name == "allowed_hi") top->fd_allowed_hi = v;
            else if (name == "stall") top->fd_stall = v;
            else if (name == "seed") top->fd_seed = v;
        } else if (kind == "max") {
            in >> limit;
        } else if (kind == "reg") {
            uint32_t off, v;
            in >> off >> v;
            t0 = std::chrono::steady_clock::now();   // the last write starts the run
            c0 = cycles;
            lite_write(top.get(), off, v);
        }
    }
    while (!top->irq && cycles - c0 < limit) tick(top.get());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("cycles %llu seconds %.6f irq %d\n", (unsigned long long)(cycles - c0), s,
                (int)top->irq);
    top->final();
    return 0;
}
