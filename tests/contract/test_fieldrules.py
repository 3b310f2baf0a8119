"""The decoder = the validator (issue #48 item 2): every rule of contract.fieldrules's table,
violated once, is refused by the host's check (validate's ``field_error``, with the rule's own
words) and by the RTL decoder (hw/ctrl/decode.py in Amaranth's simulator) with FIELD_RANGE; the
instruction it was made from passes both."""

from __future__ import annotations

import pytest
from amaranth.sim import Simulator

from attenio.base import config as C
from attenio.base.errors import ErrorCode
from attenio.contract.fieldrules import FIELD_RULES, rules_for
from attenio.contract.isa import LAYOUTS, Instr, Op, field_error
from attenio.hw.ctrl.decode import InstructionDecoder
from attenio.sim.plan import build_plan

TINY = C.tiny()
NARROW = C.replace(TINY, macs_per_line=2)         # a word too narrow for a scale word
ONE_KEY = C.replace(TINY, max_keys_per_step=2)    # steps of at most 2 keys, a ring of 4
SOFTCAP = C.replace(TINY, softcap_unit=True)      # a config with the soft-capping unit
SINKS = C.replace(TINY, sinks_unit=True)          # a config whose Q rows carry sinks
ALIBI = C.replace(TINY, alibi_unit=True)          # a config with the ALiBi unit


def _base(hw) -> dict[Op, Instr]:
    """A good instruction of each kind, from a paged GQA decode's program on ``hw``."""
    wl = C.VarlenWorkload(seqlens_q=[1, 1], seqlens_k=[9, 4], head_dim=8, heads=2,
                          kv_heads=1, page_size=4)
    prog = build_plan(hw, wl).schedule.program
    return {op: next(i for i in prog if i.op == op)
            for op in (Op.LOAD_Q, Op.LOAD_KV, Op.COMPUTE)}


# rule → (hardware, opcode, fields changed); each breaks that rule and no earlier one
CASES = {
    "rows": (TINY, Op.COMPUTE, {"rows": 0}),
    "d": (TINY, Op.LOAD_KV, {"d": 0}),
    "dv": (TINY, Op.COMPUTE, {"dv": TINY.max_head_dim + 1}),
    "keys_zero": (TINY, Op.LOAD_KV, {"keys": 0}),
    "keys_max": (TINY, Op.COMPUTE, {"keys": TINY.max_seq_len + 1}),
    "kps_range": (TINY, Op.LOAD_Q, {"keys_per_step": 0}),
    "kps_pow2": (TINY, Op.LOAD_KV, {"keys_per_step": 3}),
    "kps_max": (ONE_KEY, Op.LOAD_KV, {"keys_per_step": 4}),
    "kps_lines": (TINY, Op.COMPUTE, {"rows": 2, "heads": 1, "keys_per_step": 4}),
    "page_kps": (TINY, Op.LOAD_KV, {"page_log2": 1, "keys_per_step": 4}),
    "page_factors": (TINY, Op.LOAD_KV, {"paged": 1, "page_log2": 2, "key_scales": 1,
                                        "keys_per_step": 4}),
    "table_align": (TINY, Op.LOAD_KV, {"table": "+2"}),
    "v_in_k_dv": (TINY, Op.LOAD_KV, {"v_in_k": 1, "d": 8, "dv": 12}),
    "v_in_k_ring": (TINY, Op.LOAD_KV, {"v_in_k": 1, "keys_per_step": 4, "page_log2": 2}),
    "v_in_k_scales": (TINY, Op.LOAD_KV, {"v_in_k": 1, "key_scales": 1}),
    # V factors lie in V pages: refused on contiguous rows
    "value_scales": (TINY, Op.LOAD_KV, {"value_scales": 1, "paged": 0}),
    "packed_mask": (TINY, Op.COMPUTE, {"causal": 1, "heads": 2, "rows": 1,
                                       "keys_per_step": 1}),
    "head_pos": (TINY, Op.COMPUTE, {"head_pos": 1, "rows": 3, "heads": 2,
                                    "keys_per_step": 1}),
    "select": (TINY, Op.COMPUTE, {"select": 1, "cont": 0, "keys_per_step": 1, "causal": 0}),
    "sel_row": (TINY, Op.COMPUTE, {"select": 1, "cont": 1, "keys_per_step": 1, "causal": 0,
                                   "sel_row": 2}),
    "c_sh": (TINY, Op.COMPUTE, {"c_sh": 63}),
    "row_scales": (NARROW, Op.LOAD_Q, {"row_scales": 1}),
    "key_scales": (NARROW, Op.LOAD_KV, {"key_scales": 1}),
    "softcap": (TINY, Op.COMPUTE, {"softcap": 1, "cap": 3000}),
    "cap": (SOFTCAP, Op.COMPUTE, {"softcap": 1, "cap": 0}),
    "sinks": (TINY, Op.LOAD_Q, {"sinks": 1, "row_scales": 1}),
    "sinks_rows": (SINKS, Op.COMPUTE, {"sinks": 1, "row_scales": 0}),
    "alibi": (TINY, Op.COMPUTE, {"alibi": 1, "row_scales": 1}),
    "alibi_rows": (ALIBI, Op.LOAD_Q, {"alibi": 1, "row_scales": 0}),
}


def test_every_rule_has_a_case():
    assert set(CASES) == {r.name for r in FIELD_RULES}


def rtl_decode(hw, ins: Instr) -> int:
    """The RTL decoder's error code for one instruction."""
    dut = InstructionDecoder(hw)
    got = {}
    rh = ins.args.get("rows", 0) * ins.args.get("heads", 0) if "rows" in LAYOUTS[ins.op] else 0

    async def tb(ctx):
        ctx.set(dut.raw, int.from_bytes(ins.encode(), "little"))
        ctx.set(dut.rows_heads, rh)
        got["bad"] = ctx.get(dut.bad)

    sim = Simulator(dut)
    sim.add_testbench(tb)
    sim.run()
    return got["bad"]


@pytest.mark.parametrize("rule", list(CASES))
def test_each_rule_violated_once_is_refused_by_both(rule):
    hw, op, change = CASES[rule]
    base = _base(hw if rule not in ("row_scales", "key_scales") else TINY)[op]
    assert field_error(op, base.args, hw) is None and rtl_decode(hw, base) == 0
    args = dict(base.args)
    for k, v in change.items():
        args[k] = args[k] + int(v) if isinstance(v, str) else v
    bad = Instr(op, args, base.pop_prev, base.pop_next, base.push_prev, base.push_next)
    text = field_error(op, args, hw)
    f = type("F", (), {**dict.fromkeys(LAYOUTS[op], 0), **args})()   # unset fields read 0
    rh = args.get("rows", 0) * args.get("heads", 0)
    first = next(r for r in rules_for(op.name, LAYOUTS[op]) if r.bad(f, hw, rh))
    assert first.name == rule and text == first.why(f, hw, rh)
    assert rtl_decode(hw, bad) == ErrorCode.FIELD_RANGE
