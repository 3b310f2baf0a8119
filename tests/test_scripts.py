"""The scripts under scripts/ are run by hand, hours apart (place and route, GPU baselines,
campaigns), so a typo in their argument handling shows only at the worst time. This reads each
script's source and checks that every option it reads from its parsed arguments is declared.

scripts/ holds the entry points the Makefile and the docs name (benchmarks, the fault campaign,
place and route); scripts/gpu/ the GPU measurement kit (it runs on the lent machine, where
attenio is not installed); scripts/studies/ the one-off studies behind figures in the docs.
Test infrastructure lives under tests/ (tests/plugins/: the timing-mutation plugin)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SCRIPTS = sorted((Path(__file__).resolve().parents[1] / "scripts").rglob("*.py"))


def _parsed_names(tree: ast.Module) -> set[str]:
    """The names bound to ``….parse_args()`` results."""
    names = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and node.value.func.attr == "parse_args"):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _declared(tree: ast.Module, folder: Path | None = None) -> set[str]:
    """The destinations of every ``add_argument`` call (``dest=`` or the first long option), in
    the script and in the sibling scripts (of ``folder``) it imports from (a shared parser)."""
    dests = set()
    for node in ast.walk(tree):
        if folder is not None and isinstance(node, ast.ImportFrom) and node.module \
                and node.level == 0:
            sibling = folder / f"{node.module}.py"
            if sibling.exists():
                dests |= _declared(ast.parse(sibling.read_text()), folder)
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        if "dest" in kw and isinstance(kw["dest"], ast.Constant):
            dests.add(kw["dest"].value)
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant)]
        longs = [f for f in flags if f.startswith("--")]
        name = (longs or flags or [""])[0].lstrip("-")
        dests.add(name.replace("-", "_"))
    return dests


def _read(tree: ast.Module, names: set[str]) -> set[str]:
    return {node.attr for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id in names and isinstance(node.ctx, ast.Load)}


PARSING = [p for p in SCRIPTS if "parse_args(" in p.read_text()]


@pytest.mark.parametrize("script", PARSING, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_every_option_a_script_reads_is_declared(script):
    tree = ast.parse(script.read_text())
    names = _parsed_names(tree)
    assert names, f"{script.name}: parse_args() result not bound to a name"
    missing = _read(tree, names) - _declared(tree, script.parent)
    assert not missing, f"{script.name} reads undeclared options: {sorted(missing)}"


def test_the_check_finds_an_undeclared_option():
    tree = ast.parse("import argparse\nap = argparse.ArgumentParser()\n"
                     "ap.add_argument('--speeds')\nargs = ap.parse_args()\n"
                     "print(args.speeds, args.place_only)\n")
    assert _read(tree, _parsed_names(tree)) - _declared(tree) == {"place_only"}
