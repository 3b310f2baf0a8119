"""docs/isa.md's field tables must match contract/isa.py, the single definition."""

from pathlib import Path

from attenio.contract.program import LAYOUTS, SIGNED, ErrorCode, Op

DOC = (Path(__file__).resolve().parents[2] / "docs" / "isa.md").read_text()


def test_every_field_row_is_documented():
    for op, layout in LAYOUTS.items():
        assert f"`{op.name}`: opcode {int(op):#x}" in DOC
        for name, (lsb, width) in layout.items():
            row = f"| `{name}` | [{lsb + width - 1}:{lsb}] | {width}"
            row += " signed |" if name in SIGNED else " |"
            assert row in DOC, (op.name, name)


def test_every_error_code_is_documented():
    for code in ErrorCode:
        assert f"| {int(code)} | `{code.name}` |" in DOC
    assert Op.ILLEGAL == 0
