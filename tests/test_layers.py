"""The layers import only downwards (docs/architecture.md, "Layers"): a walk over every import,
top-level or inside a function, of every module in the product packages."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# folder → the attenio subpackage it holds
FOLDERS = {"attenio": "attenio", "base": "base", "app": "app", "contract": "contract",
           "model": "model", "sim": "sim", "hw": "hw", "fpga": "fpga", "verify": "verify"}
# layer → the layers it may import (itself included)
ALLOWED = {
    "base": {"base"},
    "contract": {"base", "contract"},
    "model": {"base", "contract", "model"},
    "sim": {"base", "contract", "model", "sim"},
    # the hardware shares rules with the host only through contract/ (ROM tables included)
    "hw": {"base", "contract", "hw"},
    "fpga": {"base", "contract", "model", "sim", "hw", "fpga"},
    "verify": {"base", "contract", "model", "sim", "hw", "verify"},
    "cli": {"base", "contract", "model", "sim", "hw", "fpga", "verify", "cli", "api"},
    # the Python API (app/api.py) and the package's lazy door to it (attenio/__init__)
    "api": {"base", "contract", "model", "sim", "verify", "api"},
}


def layer_of_module(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "attenio":
        return None
    if len(parts) == 1:
        return "api"             # attenio/__init__: its lazy names are the API
    if parts[1] == "app":        # the face: app/api.py and app/cli/
        return "cli" if len(parts) > 2 and parts[2] == "cli" else "api"
    if parts[1] in ALLOWED:
        return parts[1]
    if parts[1] == "gpu_data":   # package data (data/gpu/), read through importlib.resources
        return "base"
    if len(parts) == 2:          # the root package's own names: the lazy API, __version__
        return "api"
    raise AssertionError(f"{name}: a module outside every layer (base/, contract/, …, app/)")


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
            if node.module != "attenio":   # "from attenio.base import config": the module counts
                yield node.lineno, node.module
            for a in node.names:   # "from attenio.base import config" names a module too
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
    for expected in ("attenio.app.cli", "attenio.contract.program", "attenio.hw.top",
                     "attenio.hw.ctrl.load", "attenio.sim.schedule", "attenio.verify.runner",
                     "attenio.fpga.board", "attenio.contract.rules",
                     "attenio.contract.isa", "attenio.contract.registers"):
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


@pytest.mark.parametrize("layer", ["base", "contract"])
def test_no_import_cycle_inside_a_layer(layer):
    # every import counts, top-level or inside a function, or under TYPE_CHECKING: a deferred
    # import is still a cycle (base: config imports workload, workload nothing of config)
    pre = f"attenio.{layer}."
    graph = {name: {m for _, m in imports_of(path) if m.startswith(pre)}
             for name, path in modules() if name.startswith(pre)}
    graph = {n: {m for m in deps if m in graph and m != n} for n, deps in graph.items()}
    done, path = set(), []

    def visit(n):
        assert n not in path, " -> ".join(path[path.index(n):] + [n])
        if n in done:
            return
        path.append(n)
        for m in sorted(graph[n]):
            visit(m)
        path.pop()
        done.add(n)

    for n in sorted(graph):
        visit(n)


# Rules stated once (issue 28): the expression of each may appear only where it is defined.
RESTATED = [
    (r"kv_ring_depth\s*//\s*2", {"base/config.py"}),
    (r"-\(-\w+\.tile_rows\s*//|ceil\(\w+\.tile_rows", {"base/config.py"}),
    (r"-\(-\w+\.max_head_dim\s*//|ceil\(\w+\.max_head_dim", set()),
    (r"out_bits\s*//\s*8|out_bits,\s*8\)", {"base/config.py"}),
    (r"(?m)^\s*(MAX_SHIFT|SCALE_SHIFT_MAX)\s*=", {"contract/formats.py"}),
    (r"c_sh\W{1,4}\s*>\s*62|min\([^)]*,\s*62\)", set()),
    (r"\*\s*32\b[^\n]*(program|prog|probe)|(program|prog|probe)\)\s*//\s*32\b", set()),
    (r"status\s*>>\s*8|status\[8:12\]|status\s*&\s*2\b", set()),
    (r"\"DP16KD\":\s*\d", {"sim/cost.py"}),
    (r"scale_mult_bits\s*\+\s*6", set()),
]
PRODUCT = ("attenio", "base", "app", "contract", "model", "sim", "hw", "fpga", "verify",
           "scripts")


@pytest.mark.parametrize("pattern, homes", RESTATED, ids=[p for p, _ in RESTATED])
def test_shared_rules_are_stated_once(pattern, homes):
    import re

    found = set()
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if re.search(pattern, path.read_text()):
                found.add(str(path.relative_to(ROOT)))
    assert found <= homes, f"{pattern} restated in {sorted(found - homes)}"


def test_files_and_functions_a_reader_can_hold():
    # issue 28's sizes: no product file over 600 lines, no function over 150
    long = []
    for folder in PRODUCT:
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            if len(text.splitlines()) > 600:
                long.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    n = node.end_lineno - node.lineno + 1
                    if n > 150:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
                                    f"{n} lines")
    assert long == []


def test_no_hardware_block_a_reader_cannot_hold():
    # issue 44: no class in hw/ over 300 lines (the compute core in stages, hw/score.py,
    # softmax_stage.py, pv_stage.py, finalize_stage.py; the load engine's page walk apart)
    long = []
    for path in sorted((ROOT / "hw").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and node.end_lineno - node.lineno + 1 > 300:
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} "
                            f"{node.end_lineno - node.lineno + 1} lines")
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
    # data-only packages (no __init__.py: the bundled GPU measurements) ship package data
    data = {p for p in listed - found if not (ROOT / tool["package-dir"][p] / "__init__.py")
            .exists()}
    assert data == {"attenio.gpu_data"}
    assert all(tool["package-data"].get(p) for p in data)
    assert found == listed - data
