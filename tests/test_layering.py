"""Dependencies point one way. The core (``agentgym``) imports none of the environments, sandboxes or trainers:
it reaches them through the registry and entry-point groups only. ``sandboxes`` imports only the core, ``envs``
the core and ``sandboxes``, ``trainers`` only the core.

Every module's imports are read with ``ast`` (those inside functions and ``TYPE_CHECKING`` blocks too), so the
rule cannot be broken by an import hidden in a function; a failure names the file, the line and the import.
"""

from __future__ import annotations

import ast
import tomllib
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


def imports(path: Path, module: str) -> list[tuple[int, str]]:
    """(line, module imported) for every import in the file, relative ones resolved."""
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
            found.append((node.lineno, name))
            found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names  # from agentgym import envs
                      if layer(f"{name}.{alias.name}") != layer(name)]
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


def test_the_scan_reads_every_layer():
    found = {layer(module) for _, module in modules()}
    assert found == set(ALLOWED)
    assert len(modules()) > 150


def test_no_import_breaks_the_layering_rule():
    broken = broken_imports()
    assert not broken, "imports against the layering rule:\n" + "\n".join(broken)


@pytest.mark.parametrize(("source", "expected"), [
    ("from agentgym.envs.web.browser import chromium_path", ["core imports agentgym.envs.web.browser"]),
    ("from agentgym import envs", ["core imports agentgym.envs"]),
    ("def f():\n    import agentgym.trainers.loop", ["core imports agentgym.trainers.loop"]),
    ("from ..sandboxes import base", ["core imports agentgym.sandboxes"]),
    ("from agentgym.core import Env\nimport numpy", []),
])
def test_the_scan_catches_an_import_however_it_is_written(tmp_path, source, expected):
    path = tmp_path / "probe.py"
    path.write_text(source)
    found = [f"core imports {name}" for _, name in imports(path, "agentgym.cluster.probe")
             if layer(name) not in (None, "core")]
    assert found == expected
