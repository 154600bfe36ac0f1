"""Dependencies point one way. The core (``agentgym``) imports none of the environments, sandboxes or trainers:
it reaches them through the registry and entry-point groups only. ``sandboxes`` imports only the core, ``envs``
the core and ``sandboxes``, ``trainers`` only the core.

Inside the core the modules and packages stand in layers (:data:`CORE_ORDER`): the foundation, inference, policies,
rollout, evaluation and the applications. Each imports from its own layer and the ones below, and no two of them
import each other, directly or round a cycle.

Every module's imports are read with ``ast`` (those inside functions and ``TYPE_CHECKING`` blocks too), so the
rule cannot be broken by an import hidden in a function; a failure names the file, the line and the import.
"""

from __future__ import annotations

import ast
import tomllib
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
"""``agentgym.envs`` -> ``envs`` and the rest, as the build maps the folders into the namespace."""
LAYERS = {"agentgym.envs": "envs", "agentgym.sandboxes": "sandboxes", "agentgym.trainers": "trainers",
          "agentgym.benchmark_suites": "benchmark_suites", "agentgym": "core"}
"""Each package's layer, most specific first."""
ALLOWED = {
    "core": {"core"},
    "sandboxes": {"core", "sandboxes"},
    "envs": {"core", "sandboxes", "envs"},
    "trainers": {"core", "trainers"},
    "benchmark_suites": {"core", "benchmark_suites"},
}
"""What each layer may import."""
CORE_ORDER = {
    "base": ("core", "messages", "tools", "parsers", "spaces", "seeding", "errors", "registration", "tasks", "suites",
             "trajectory", "episode_fork", "checker", "check_pool", "config", "sync_loop", "loop_shared", "lifetime",
             "progress", "cli_shared", "models", "algorithms", "plugins"),
    "inference": ("inference",),
    "policies": ("policies",),
    "rollout": ("rollout", "episode", "integrations"),
    "evaluation": ("evaluation", "tracking", "metrics_log"),
    "apps": ("__init__", "__main__", "cli", "eval_commands", "serve", "view", "cluster"),
}
"""The layers inside the core, lowest first, with the modules and packages directly under ``agentgym`` each holds
(``__init__``: the package's public surface, which re-exports from every layer). A core module imports from its
own layer and the ones before it."""


def layer(module: str) -> str | None:
    """The layer of an agentgym module; ``None`` for any other package."""
    for package, name in LAYERS.items():
        if module == package or module.startswith(package + "."):
            return name
    return None


def modules() -> list[tuple[Path, str]]:
    """Every source file of the package, with its module name."""
    found = []
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if package == "agentgym" and parts[0] in {p.split(".")[1] for p in PACKAGE_DIRS if p != "agentgym"}:
                continue  # a folder mapped elsewhere (none today); its own entry scans it
            found.append((path, ".".join((package, *parts)).removesuffix(".__init__")))
    return found


@cache
def module_names() -> frozenset[str]:
    """The name of every module and package of the scan."""
    return frozenset(module for _, module in modules())


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module imported) for every import in the file, relative ones resolved; ``from package import name``
    is the submodule where ``name`` is one, else the package."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found += [(node.lineno, f"{name}.{alias.name}" if f"{name}.{alias.name}" in module_names() else name)
                      for alias in node.names]  # from agentgym import envs: agentgym.envs
    return found


def broken_imports() -> list[str]:
    """``file:line: layer imports module`` for every import that breaks the rule."""
    broken = []
    for path, module in modules():
        own = layer(module)
        assert own is not None, module
        for line, imported in imports(path, module):
            other = layer(imported)
            if other is not None and other not in ALLOWED[own]:
                broken.append(f"{path.relative_to(ROOT)}:{line}: {own} imports {imported}")
    return sorted(set(broken))


def core_part(module: str) -> str:
    """The module or package directly under ``agentgym`` that holds a core module (``__init__`` for the root)."""
    return module.split(".")[1] if "." in module else "__init__"


def core_layer(module: str) -> int:
    """The position in :data:`CORE_ORDER` of a core module's layer."""
    for position, parts in enumerate(CORE_ORDER.values()):
        if core_part(module) in parts:
            return position
    raise LookupError(f"{core_part(module)} (of {module}) has no layer in CORE_ORDER")


def core_imports() -> list[tuple[Path, int, str, str]]:
    """(file, line, importer, imported) for every import from one core module of another."""
    return [(path, line, module, imported) for path, module in modules() if layer(module) == "core"
            for line, imported in imports(path, module) if layer(imported) == "core"]


def against_the_order(module: str, imported: str) -> str | None:
    """``layer module imports module (layer)`` where a core module imports one of a later layer, else None."""
    names = list(CORE_ORDER)
    if core_layer(imported) <= core_layer(module):
        return None
    return f"{names[core_layer(module)]} module imports {imported} ({names[core_layer(imported)]})"


def against_the_core_order() -> list[str]:
    """``file:line: layer module imports module (layer)`` for every import of a later layer's module."""
    return sorted({f"{path.relative_to(ROOT)}:{line}: {broken}" for path, line, module, imported in core_imports()
                   if (broken := against_the_order(module, imported)) is not None})


def core_cycles() -> list[str]:
    """Each pair of core parts (modules and packages directly under ``agentgym``) that import each other, directly
    or through others, with the import that starts the way round: ``file:line: imports module (part ... part)``."""
    edges: dict[str, dict[str, str]] = {}
    for path, line, module, imported in core_imports():
        if core_part(imported) != core_part(module):
            edges.setdefault(core_part(module), {}).setdefault(
                core_part(imported), f"{path.relative_to(ROOT)}:{line}: imports {imported}")

    def way(start: str, goal: str) -> list[str] | None:
        """The parts from ``start`` to ``goal`` along imports, or None."""
        paths, seen = [[start]], {start}
        while paths:
            path = paths.pop()
            for after in edges.get(path[-1], {}):
                if after == goal:
                    return [*path, after]
                if after not in seen:
                    seen.add(after)
                    paths.append([*path, after])
        return None

    return sorted(f"{edge} ({' -> '.join([source, *back])})" for source, targets in edges.items()
                  for target, edge in targets.items() if (back := way(target, source)) is not None)


def test_the_scan_reads_every_layer():
    found = {layer(module) for _, module in modules()}
    assert found == set(ALLOWED)
    assert len(modules()) > 150


def test_no_import_breaks_the_layering_rule():
    broken = broken_imports()
    assert not broken, "imports against the layering rule:\n" + "\n".join(broken)


def test_every_core_part_has_one_layer():
    parts = {core_part(module) for _, module in modules() if layer(module) == "core"}
    placed = [part for parts in CORE_ORDER.values() for part in parts]
    assert sorted(parts - set(placed)) == [], "core modules and packages to place in CORE_ORDER"
    assert sorted(set(placed) - parts) == [], "CORE_ORDER names what is not in the core"
    assert len(placed) == len(set(placed)), "a part placed in two layers"


def test_no_import_goes_against_the_core_order():
    against = against_the_core_order()
    assert not against, "imports against the order inside the core (CORE_ORDER):\n" + "\n".join(against)


def test_no_two_core_parts_import_each_other():
    cycles = core_cycles()
    assert not cycles, "core modules and packages that import each other:\n" + "\n".join(cycles)


@pytest.mark.parametrize(("source", "expected"), [
    ("from agentgym.envs.web.browser import chromium_path", ["core imports agentgym.envs.web.browser"]),
    ("from agentgym import envs", ["core imports agentgym.envs"]),
    ("def f():\n    import agentgym.trainers.loop", ["core imports agentgym.trainers.loop"]),
    ("from ..sandboxes import base", ["core imports agentgym.sandboxes.base"]),
    ("from agentgym.core import Env\nimport numpy", []),
])
def test_the_scan_catches_an_import_however_it_is_written(tmp_path, source, expected):
    path = tmp_path / "probe.py"
    path.write_text(source)
    found = [f"core imports {name}" for _, name in imports(path, "agentgym.cluster.probe")
             if layer(name) not in (None, "core")]
    assert found == expected


@pytest.mark.parametrize(("module", "source", "expected"), [
    ("agentgym.policies.probe", "from agentgym.rollout.runner import Backend",
     ["policies module imports agentgym.rollout.runner (rollout)"]),
    ("agentgym.rollout.probe", "def f():\n    from ..evaluation import records",
     ["rollout module imports agentgym.evaluation.records (evaluation)"]),
    ("agentgym.inference.probe", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import agentgym.policies",
     ["inference module imports agentgym.policies (policies)"]),
    ("agentgym.tools", "from agentgym import make", ["base module imports agentgym (apps)"]),
    ("agentgym.core", "from agentgym import sync_loop", []),
    ("agentgym.core", "from agentgym import make, sync_loop", ["base module imports agentgym (apps)"]),
    ("agentgym.view.probe", "from agentgym.policies.lm import LMPolicy\nfrom agentgym import evaluation", []),
])
def test_the_core_order_holds_for_an_import_however_it_is_written(tmp_path, module, source, expected):
    path = tmp_path / "probe.py"
    path.write_text(source)
    found = [broken for _, name in imports(path, module) if layer(name) == "core"
             if (broken := against_the_order(module, name)) is not None]
    assert found == expected
