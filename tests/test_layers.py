"""The layers import only downwards (docs/architecture.md, "Layers"): a walk over every import,
top-level or inside a function, of every module in the product packages."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder → the attenio subpackage it holds
FOLDERS = {"attenio": "attenio", "contract": "contract", "model": "model", "sim": "sim",
           "hw": "hw", "fpga": "fpga", "verify": "verify"}
# layer → the layers it may import (itself included)
ALLOWED = {
    "base": {"base"},
    "contract": {"base", "contract"},
    "model": {"base", "contract", "model"},
    "sim": {"base", "contract", "model", "sim"},
    "hw": {"base", "contract", "model", "hw"},
    "fpga": {"base", "contract", "model", "sim", "hw", "fpga"},
    "verify": {"base", "contract", "model", "sim", "hw", "verify"},
    "cli": {"base", "contract", "model", "sim", "hw", "fpga", "verify", "cli", "api"},
    # the Python API (attenio/api.py) and the package's lazy door to it (attenio/__init__)
    "api": {"base", "contract", "model", "sim", "verify", "api"},
}


def layer_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "attenio":
        return None
    if len(parts) == 1:
        return "api"             # attenio/__init__: its lazy names are the API
    if parts[1] in ("config", "errors"):
        return "base"
    if parts[1] == "cli":
        return "cli"
    if parts[1] == "api":
        return "api"
    return parts[1] if parts[1] in ALLOWED else "base"


def modules():
    for folder, pkg in FOLDERS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT / folder).with_suffix("")
            name = ".".join(["attenio"] + ([] if pkg == "attenio" else [pkg]) + list(rel.parts))
            yield name.removesuffix(".__init__"), path


def imports_of(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "attenio":   # "from attenio import config": the module counts
                yield node.lineno, node.module
            for a in node.names:   # "from attenio import config" names a module too
                yield node.lineno, f"{node.module}.{a.name}"


def violations():
    out = []
    for name, path in modules():
        mine = layer_of_module(name)
        for line, imported in imports_of(path):
            theirs = layer_of_module(imported)
            if theirs is not None and theirs not in ALLOWED[mine]:
                out.append(f"{path.relative_to(ROOT)}:{line}: {mine} imports {imported} "
                           f"({theirs})")
    return out


def test_every_module_is_walked():
    names = {n for n, _ in modules()}
    for expected in ("attenio.cli", "attenio.contract.program", "attenio.hw.top",
                     "attenio.hw.ctrl.load", "attenio.sim.schedule", "attenio.verify.runner",
                     "attenio.fpga.board", "attenio.model.rules"):
        assert expected in names


def test_layers_import_only_downwards():
    assert violations() == []


@pytest.mark.parametrize("source, layer, bad", [
    ("from attenio.sim.schedule import Timing", "hw", "sim"),
    ("from attenio.verify import runner", "fpga", "verify"),
    ("import attenio.hw.top", "sim", "hw"),
])
def test_the_walk_catches_an_upward_import(tmp_path, source, layer, bad):
    f = tmp_path / "m.py"
    f.write_text(source + "\n")
    found = [layer_of_module(m) for _, m in imports_of(f)]
    assert bad in found and bad not in ALLOWED[layer]


def test_no_hw_function_is_longer_than_200_lines():
    long = []
    for path in sorted((ROOT / "hw").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > 200:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} {n} lines")
    assert long == []


def test_every_package_is_installed():
    # a regular (not editable) install takes only the packages pyproject.toml lists
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(tool["packages"])
    found = set()
    for folder, pkg in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join(["attenio"] + ([] if pkg == "attenio" else [pkg]) + list(rel)))
            assert tool["package-dir"]["attenio" if pkg == "attenio" else f"attenio.{pkg}"] \
                == folder
    assert found == listed
