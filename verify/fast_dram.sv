// attenio_fast: the accelerator (attenio_top) behind a DRAM and AXI4 protocol checkers written
// in SystemVerilog, so a simulation runs at the simulator's own speed: cocotb only programs the
// registers, starts the run and waits for the interrupt (verify/fast_dram.py generates this file
// from the template, verify/bench.py drives it).
//
// The DRAM keeps verify/dram.py's rules exactly, without injected errors (those runs stay on
// the Python model): a read request handshaken in cycle t starts its data in cycle
// s = max(t + latency, channel free); beat k is valid from s + ceil((k+1)*AB/rate) - 1; the
// channel is free after the last beat. A write burst starts with its first offered beat (or
// when the channel frees), beat k is taken from s + ceil((k+1)*AB/rate) - 1, its response is
// valid `latency` cycles after the last beat. The data and instruction ports have their own
// read channels. Each clock edge first samples the cycle that ends (handshakes, data written),
// then drives the next one, as the Python model samples and drives within a cycle.
//
// Stalls as dram.py's p_stall: with fd_stall = p·2^32 each AR and AW ready, each R beat's
// offer, each W ready and each B response's offer is dropped for a cycle with probability p,
// drawn from a xorshift32 sequence seeded by fd_seed (its own sequence, not Python's: a stalled
// run's cycles differ between the two DRAMs, its results do not). fd_stall = 0: no stalls, and
// the timing above exactly.
//
// The checkers are verify/axi_monitor.py's rules: valid-held, payload-stable, burst-4k,
// burst-size, burst-type, wlast and write-open (on the register port the handshake rules);
// a count per port and the first violation.
//
// Template fields, each an at-sign pair around its name, are replaced by verify/fast_dram.py.

/* verilator lint_off BLKSEQ */
/* verilator lint_off WIDTHEXPAND */
/* verilator lint_off WIDTHTRUNC */
/* verilator lint_off UNUSEDSIGNAL */
module attenio_fast (
  input rst,
  output irq,
@PORTS@
  input [31:0] fd_latency,          // DRAM latency, cycles
  input [31:0] fd_rate,             // bytes a cycle each channel carries (1 .. AB)
  input [63:0] fd_mem_bytes,        // the image's size: beyond it reads are 0 and DECERR
  input [63:0] fd_allowed_lo,       // bytes written (strobes set) outside [lo, hi) are stray
  input [63:0] fd_allowed_hi,
  input [31:0] fd_stall,            // a ready or an offer dropped with probability fd_stall/2^32
  input [31:0] fd_seed,             // the stalls' sequence (taken again whenever it changes)
  input fd_dump,                    // high for a cycle: write words [dump_lo, dump_hi] out
  input [63:0] fd_dump_lo,
  input [63:0] fd_dump_hi,
  output logic [63:0] fd_rd_bytes,
  output logic [63:0] fd_insn_bytes,
  output logic [63:0] fd_wr_bytes,
  output logic [63:0] fd_stray_bytes,
  output logic [31:0] fd_unsupported,    // requests this model cannot serve as dram.py would
  output logic [31:0] fd_viol_0,         // protocol violations of m_axi, m_axi_insn, s_axil
  output logic [31:0] fd_viol_1,
  output logic [31:0] fd_viol_2,
  output logic [63:0] fd_first_0,        // {cycle[47:0], channel[7:0], rule[7:0]} of the first
  output logic [63:0] fd_first_1,
  output logic [63:0] fd_first_2,
  output logic [159:0] fd_handshakes_0,  // AR, R, AW, W, B handshakes, 32 bits each
  output logic [63:0]  fd_handshakes_1,  // AR, R
  output logic [159:0] fd_handshakes_2,  // AR, R, AW, W, B
  output logic [23:0] fd_rules,          // the rules each port broke: bit r of byte p
  output logic fd_write_open,            // a write burst begun and not completed
  output logic [63:0] fd_cycle
);
  // the clock is the simulator's own (a delay loop, Verilator's --timing): no callback into
  // cocotb on each edge; its period is 10 time units of 1 ns, as verify/bench.py's PERIOD_NS
  logic clk = 1'b0;
  initial forever #5 clk = ~clk;

  localparam int AB = @AB@;
  localparam int DW = AB * 8;
  localparam int LOG_AB = @LOG_AB@;
  localparam longint WORDS = @WORDS@;
  localparam int PD = 64;           // requests waiting per channel (the DUT keeps fewer)
  localparam int PW = (DW + AB + 1 > 64) ? DW + AB + 1 : 64;

@DECLS@

  // the design's reset through a register: a top-level input feeding Amaranth's next-state
  // logic (every register's reset multiplexer) would put all of that logic in Verilator's
  // input-combinational region, evaluated again on every eval call (measured: half the time
  // of the plain loop). The design leaves reset one cycle after the DRAM, long before the
  // host's first register write.
  logic rst_q = 1'b1;
  always @(posedge clk) rst_q <= rst;

  attenio_top dut (
    .clk(clk), .rst(rst_q), .irq(irq),
@CONNECT@
  );

  // ---------------------------------------------------------------- storage
  logic [DW-1:0] mem [0:WORDS-1];
  string mem_in, mem_out;
  longint mem_words;
  initial begin
    // the image's words (so no simulator warns of a file shorter than the memory)
    if (!$value$plusargs("attenio_words=%d", mem_words)) mem_words = WORDS;
    if ($value$plusargs("attenio_mem=%s", mem_in)) $readmemh(mem_in, mem, 0, mem_words - 1);
    if (!$value$plusargs("attenio_out=%s", mem_out)) mem_out = "attenio_out.hex";
  end
  always @(posedge clk) if (fd_dump) $writememh(mem_out, mem, fd_dump_lo, fd_dump_hi);

  function automatic longint off(input longint k);   // cycles from data start to beat k
    return ((k + 1) * AB + fd_rate - 1) / fd_rate - 1;
  endfunction
  function automatic longint lmax(input longint a, input longint b);
    return a > b ? a : b;
  endfunction

  // ---------------------------------------------------------------- the two read channels
  // index 0: m_axi (data), 1: m_axi_insn
  logic        arv [2];
  logic [47:0] ara [2];
  logic [7:0]  arl [2];
  logic        rrd [2];
  assign arv[0] = m_axi_arvalid;  assign ara[0] = m_axi_araddr;  assign arl[0] = m_axi_arlen;
  assign arv[1] = m_axi_insn_arvalid;  assign ara[1] = m_axi_insn_araddr;
  assign arl[1] = m_axi_insn_arlen;
  assign rrd[0] = m_axi_rready;  assign rrd[1] = m_axi_insn_rready;
  logic   arready_q [2];
  logic   awready_q;
  assign m_axi_arready = arready_q[0];
  assign m_axi_insn_arready = arready_q[1];
  assign m_axi_awready = awready_q;

  // the stalls' random sequence: xorshift32, (re)seeded when fd_seed changes
  logic [31:0] rng, seed_q;
  function automatic logic [31:0] xs32(input logic [31:0] x);
    logic [31:0] y;
    y = x ^ (x << 13);
    y = y ^ (y >> 17);
    return y ^ (y << 5);
  endfunction

  longint p_t [2][PD];
  longint p_a [2][PD];
  int     p_n [2][PD];
  int     p_head [2], p_cnt [2];
  logic   cur_v [2];
  longint cur_a [2], cur_next [2], cur_s [2], free_at [2];
  int     cur_n [2], cur_i [2];
  logic   driving [2], held [2];
  logic   rv_q [2], rl_q [2];
  logic [DW-1:0] rd_q [2];
  logic [1:0] rr_q [2];
  assign m_axi_rvalid = rv_q[0];  assign m_axi_rdata = rd_q[0];
  assign m_axi_rresp = rr_q[0];   assign m_axi_rlast = rl_q[0];
  assign m_axi_insn_rvalid = rv_q[1];  assign m_axi_insn_rdata = rd_q[1];
  assign m_axi_insn_rresp = rr_q[1];   assign m_axi_insn_rlast = rl_q[1];

  // ---------------------------------------------------------------- the write channel
  longint aw_a [PD];
  int     aw_n [PD], aw_i [PD];
  logic [1:0] aw_r [PD];
  int     aw_head, aw_cnt;
  longint b_t [PD];
  logic [1:0] b_r [PD];
  int     b_head, b_cnt;
  logic   b_driving, b_held, w_started;
  longint w_start, w_free;
  logic   wready_q, bvalid_q;
  logic [1:0] bresp_q;
  assign m_axi_wready = wready_q;
  assign m_axi_bvalid = bvalid_q;
  assign m_axi_bresp = bresp_q;

  longint k = 0;                      // the cycle that ends at this edge (one counter for both
  assign fd_cycle = k;                 // blocks: it moves with a nonblocking assignment)

  always @(posedge clk) begin
    longint kn, a, st;
    int h, c;
    logic go, r_st, w_st, b_st;
    if (fd_seed != seed_q) begin
      rng = (fd_seed == 0) ? 32'h1 : fd_seed; seed_q = fd_seed;
    end
    if (rst) begin
      for (c = 0; c < 2; c++) begin
        p_head[c] = 0; p_cnt[c] = 0; cur_v[c] = 0; free_at[c] = 0;
        driving[c] = 0; held[c] = 0; rv_q[c] <= 0; arready_q[c] <= 1;
      end
      aw_head = 0; aw_cnt = 0; b_head = 0; b_cnt = 0; b_driving = 0; b_held = 0;
      w_started = 0; w_free = 0; wready_q <= 0; bvalid_q <= 0; awready_q <= 1;
    end else begin
      // ---- sample cycle k
      for (c = 0; c < 2; c++) begin
        if (arv[c] && arready_q[c]) begin
          if (p_cnt[c] == PD || ara[c][LOG_AB-1:0] != 0) fd_unsupported <= fd_unsupported + 1;
          else begin
            h = (p_head[c] + p_cnt[c]) % PD;
            p_t[c][h] = k; p_a[c][h] = ara[c]; p_n[c][h] = arl[c] + 1;
            p_cnt[c] = p_cnt[c] + 1;
          end
        end
        held[c] = driving[c] && !rrd[c];
        if (driving[c] && rrd[c]) begin
          cur_i[c] = cur_i[c] + 1;
          if (c == 0) fd_rd_bytes <= fd_rd_bytes + AB; else fd_insn_bytes <= fd_insn_bytes + AB;
          if (cur_i[c] == cur_n[c]) begin
            cur_v[c] = 0; free_at[c] = k + 1;
          end else cur_next[c] = lmax(k + 1, cur_s[c] + off(cur_i[c]));
        end
      end
      if (m_axi_awvalid && awready_q) begin
        if (aw_cnt == PD || m_axi_awaddr[LOG_AB-1:0] != 0)
          fd_unsupported <= fd_unsupported + 1;
        else begin
          h = (aw_head + aw_cnt) % PD;
          aw_a[h] = m_axi_awaddr; aw_n[h] = m_axi_awlen + 1; aw_i[h] = 0;
          aw_r[h] = (m_axi_awaddr + (m_axi_awlen + 1) * AB > fd_mem_bytes) ? 2'd3 : 2'd0;
          aw_cnt = aw_cnt + 1;
        end
      end
      if (m_axi_wvalid && aw_cnt > 0 && !w_started) begin
        w_start = lmax(k, w_free); w_started = 1;
      end
      if (m_axi_wvalid && wready_q && aw_cnt > 0) begin
        a = aw_a[aw_head] + aw_i[aw_head] * AB;
        if (m_axi_wstrb != 0 && !(fd_allowed_lo <= a && a + AB <= fd_allowed_hi))
          fd_stray_bytes <= fd_stray_bytes + $countones(m_axi_wstrb);
        if (aw_r[aw_head] == 0) begin
          for (int i = 0; i < AB; i++)
            if (m_axi_wstrb[i]) mem[a >> LOG_AB][8 * i +: 8] = m_axi_wdata[8 * i +: 8];
          fd_wr_bytes <= fd_wr_bytes + AB;
        end
        aw_i[aw_head] = aw_i[aw_head] + 1;
        if (aw_i[aw_head] == aw_n[aw_head]) begin
          w_free = k + 1; w_started = 0;
          if (b_cnt == PD) fd_unsupported <= fd_unsupported + 1;
          else begin
            h = (b_head + b_cnt) % PD;
            b_t[h] = k + fd_latency; b_r[h] = aw_r[aw_head]; b_cnt = b_cnt + 1;
          end
          aw_head = (aw_head + 1) % PD; aw_cnt = aw_cnt - 1;
        end
      end
      b_held = b_driving && !m_axi_bready;
      if (b_driving && m_axi_bready) begin
        b_head = (b_head + 1) % PD; b_cnt = b_cnt - 1;
      end

      // ---- drive cycle k + 1
      kn = k + 1;
      for (c = 0; c < 2; c++) begin
        rng = xs32(rng); arready_q[c] <= !(rng < fd_stall);
        rng = xs32(rng); r_st = rng < fd_stall;
        if (!cur_v[c] && p_cnt[c] > 0
            && lmax(p_t[c][p_head[c]] + fd_latency, free_at[c]) <= kn) begin
          st = lmax(p_t[c][p_head[c]] + fd_latency, free_at[c]);
          cur_a[c] = p_a[c][p_head[c]]; cur_n[c] = p_n[c][p_head[c]]; cur_i[c] = 0;
          cur_s[c] = st; cur_next[c] = st + off(0); cur_v[c] = 1;
          p_head[c] = (p_head[c] + 1) % PD; p_cnt[c] = p_cnt[c] - 1;
        end
        if (driving[c] && held[c]) begin
          // a beat offered and not taken stays, unchanged (A3.2.1)
        end else if (cur_v[c] && cur_next[c] <= kn && !r_st) begin
          a = cur_a[c] + cur_i[c] * AB;
          if (a + AB > fd_mem_bytes) begin
            rd_q[c] <= '0; rr_q[c] <= 2'd3;
          end else begin
            rd_q[c] <= mem[a >> LOG_AB]; rr_q[c] <= 2'd0;
          end
          rl_q[c] <= (cur_i[c] == cur_n[c] - 1);
          rv_q[c] <= 1; driving[c] = 1;
        end else if (driving[c]) begin
          rv_q[c] <= 0; driving[c] = 0;
        end
      end
      rng = xs32(rng); awready_q <= !(rng < fd_stall);
      rng = xs32(rng); w_st = rng < fd_stall;
      rng = xs32(rng); b_st = rng < fd_stall;
      if (aw_cnt > 0) begin
        st = w_started ? w_start : lmax(kn, w_free);
        go = kn >= st + off(aw_i[aw_head]);
        wready_q <= go && !w_st;
      end else wready_q <= 0;
      if (b_driving && b_held) begin
        // a response offered and not taken stays
      end else if (b_cnt > 0 && b_t[b_head] <= kn && !b_st) begin
        bvalid_q <= 1; bresp_q <= b_r[b_head]; b_driving = 1;
      end else if (b_driving) begin
        bvalid_q <= 0; b_driving = 0;
      end
    end
    k <= k + 1;
  end

  initial begin
    fd_rd_bytes = 0; fd_insn_bytes = 0; fd_wr_bytes = 0; fd_stray_bytes = 0;
    fd_unsupported = 0;
    for (int c = 0; c < 2; c++) begin
      rv_q[c] = 0; rl_q[c] = 0; rd_q[c] = '0; rr_q[c] = 0;
    end
    wready_q = 0; bvalid_q = 0; bresp_q = 0;
    arready_q[0] = 1; arready_q[1] = 1; awready_q = 1; rng = 32'h1; seed_q = 0;
  end

  // ---------------------------------------------------------------- protocol checkers
  // channel index: 0 AR, 1 R, 2 AW, 3 W, 4 B of m_axi; 5 AR, 6 R of m_axi_insn; 7 AR, 8 R,
  // 9 AW, 10 W, 11 B of s_axil (the register port: handshake rules only, as AXI4-Lite)
  localparam int NCH = 12;
  logic          v [NCH], r [NCH];
  logic [PW-1:0] pl [NCH];
  assign v[0] = m_axi_arvalid;  assign r[0] = m_axi_arready;
  assign pl[0] = {m_axi_araddr, m_axi_arlen, m_axi_arsize, m_axi_arburst};
  assign v[1] = m_axi_rvalid;   assign r[1] = m_axi_rready;
  assign pl[1] = {m_axi_rdata, m_axi_rresp, m_axi_rlast};
  assign v[2] = m_axi_awvalid;  assign r[2] = m_axi_awready;
  assign pl[2] = {m_axi_awaddr, m_axi_awlen, m_axi_awsize, m_axi_awburst};
  assign v[3] = m_axi_wvalid;   assign r[3] = m_axi_wready;
  assign pl[3] = {m_axi_wdata, m_axi_wstrb, m_axi_wlast};
  assign v[4] = m_axi_bvalid;   assign r[4] = m_axi_bready;
  assign pl[4] = {m_axi_bresp};
  assign v[5] = m_axi_insn_arvalid;  assign r[5] = m_axi_insn_arready;
  assign pl[5] = {m_axi_insn_araddr, m_axi_insn_arlen, m_axi_insn_arsize, m_axi_insn_arburst};
  assign v[6] = m_axi_insn_rvalid;   assign r[6] = m_axi_insn_rready;
  assign pl[6] = {m_axi_insn_rdata, m_axi_insn_rresp, m_axi_insn_rlast};
  assign v[7] = s_axil_arvalid;  assign r[7] = s_axil_arready;  assign pl[7] = {s_axil_araddr};
  assign v[8] = s_axil_rvalid;   assign r[8] = s_axil_rready;
  assign pl[8] = {s_axil_rdata, s_axil_rresp};
  assign v[9] = s_axil_awvalid;  assign r[9] = s_axil_awready;  assign pl[9] = {s_axil_awaddr};
  assign v[10] = s_axil_wvalid;  assign r[10] = s_axil_wready;
  assign pl[10] = {s_axil_wdata, s_axil_wstrb};
  assign v[11] = s_axil_bvalid;  assign r[11] = s_axil_bready;  assign pl[11] = {s_axil_bresp};

  logic          pv [NCH], pr [NCH];
  logic [PW-1:0] ppl [NCH];
  logic [31:0]   hs [NCH];
  int            mon_aw [PD];      // beats of write bursts whose W beats are due
  int            mon_aw_head, mon_aw_cnt, w_beat;
  logic          early [256];      // WLAST of W beats ahead of their AW
  int            early_head, early_cnt;

  assign fd_handshakes_0 = {hs[4], hs[3], hs[2], hs[1], hs[0]};
  assign fd_handshakes_1 = {hs[6], hs[5]};
  assign fd_handshakes_2 = {hs[11], hs[10], hs[9], hs[8], hs[7]};
  assign fd_write_open = mon_aw_cnt != 0 || early_cnt != 0;

  task automatic fail(input int ch, input int rule);
    fd_rules[(ch < 5 ? 0 : ch < 7 ? 8 : 16) + rule] = 1'b1;
    if (ch < 5) begin
      if (fd_viol_0 == 0) fd_first_0 = {k[47:0], 8'(ch), 8'(rule)};
      fd_viol_0 = fd_viol_0 + 1;
    end else if (ch < 7) begin
      if (fd_viol_1 == 0) fd_first_1 = {k[47:0], 8'(ch), 8'(rule)};
      fd_viol_1 = fd_viol_1 + 1;
    end else begin
      if (fd_viol_2 == 0) fd_first_2 = {k[47:0], 8'(ch), 8'(rule)};
      fd_viol_2 = fd_viol_2 + 1;
    end
  endtask

  task automatic w_beat_done(input logic wl);
    logic last;
    w_beat = w_beat + 1;
    last = w_beat == mon_aw[mon_aw_head];
    if (wl != last) fail(3, 7);
    if (last) begin
      mon_aw_head = (mon_aw_head + 1) % PD; mon_aw_cnt = mon_aw_cnt - 1; w_beat = 0;
    end
  endtask

  task automatic burst(input int ch, input longint addr, input int len, input int size,
                       input int btype);
    if ((1 << size) != AB) fail(ch, 5);
    if (btype != 1) fail(ch, 6);
    if (addr / 4096 != (addr + (len + 1) * (1 << size) - 1) / 4096) fail(ch, 3);
  endtask

  initial begin
    fd_viol_0 = 0; fd_viol_1 = 0; fd_viol_2 = 0; fd_first_0 = 0; fd_first_1 = 0;
    fd_first_2 = 0; fd_rules = 0;
    mon_aw_head = 0; mon_aw_cnt = 0; w_beat = 0; early_head = 0; early_cnt = 0;
    for (int c = 0; c < NCH; c++) begin pv[c] = 0; hs[c] = 0; end
  end

  // rules (fail codes): 1 valid-held, 2 payload-stable, 3 burst-4k, 5 burst-size,
  // 6 burst-type, 7 wlast; write-open is fd_write_open at the end of the run
  always @(posedge clk) begin
    if (rst) begin
      for (int c = 0; c < NCH; c++) pv[c] = 0;
      mon_aw_head = 0; mon_aw_cnt = 0; w_beat = 0; early_head = 0; early_cnt = 0;
    end else begin
      for (int c = 0; c < NCH; c++) begin
        if (pv[c] && !pr[c]) begin
          if (!v[c]) fail(c, 1);
          else if (pl[c] != ppl[c]) fail(c, 2);
        end
        if (v[c] && r[c]) begin
          hs[c] = hs[c] + 1;
          case (c)
            0: burst(0, m_axi_araddr, m_axi_arlen, m_axi_arsize, m_axi_arburst);
            5: burst(5, m_axi_insn_araddr, m_axi_insn_arlen, m_axi_insn_arsize,
                     m_axi_insn_arburst);
            2: begin
              burst(2, m_axi_awaddr, m_axi_awlen, m_axi_awsize, m_axi_awburst);
              mon_aw[(mon_aw_head + mon_aw_cnt) % PD] = m_axi_awlen + 1;
              mon_aw_cnt = mon_aw_cnt + 1;
              while (early_cnt > 0 && mon_aw_cnt > 0) begin
                w_beat_done(early[early_head]);
                early_head = (early_head + 1) % 256; early_cnt = early_cnt - 1;
              end
            end
            3: if (mon_aw_cnt > 0) w_beat_done(m_axi_wlast);
               else begin
                 early[(early_head + early_cnt) % 256] = m_axi_wlast;
                 early_cnt = early_cnt + 1;
               end
            default: ;
          endcase
        end
        pv[c] = v[c]; pr[c] = r[c]; ppl[c] = pl[c];
      end
    end
  end
endmodule
