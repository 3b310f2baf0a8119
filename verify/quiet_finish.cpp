// Verilator's vl_finish, without its "- :0: Verilog $finish" line: cocotb ends every run with
// $finish and reports the run itself (built with -DVL_USER_FINISH, verify/runner.py).
#include "verilated.h"

void vl_finish(const char* filename, int linenum, const char* hier) VL_MT_UNSAFE {
    (void)filename;
    (void)linenum;
    (void)hier;
    Verilated::threadContextp()->gotFinish(true);
}
