"""The examples of the README and of the docs run as written.

Every ```python block in README.md and docs/**/*.md either runs in a test here (:data:`EXAMPLES` names it by its
page and a string only it holds there) or has a comment directly above it that says why it does not run
(``<!-- not run: needs a GPU -->``). A block that is neither fails :func:`test_every_python_block_runs_or_says_why_not`,
so a new example cannot slip in unrun.
"""

from __future__ import annotations

import re
import sys
import textwrap
import types
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
import yaml

import agentgym
from agentgym import registration

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)")
NOT_RUN = re.compile(r"^<!-- not run: \S.* -->$")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page."""

    page: str  # relative to the repository root
    line: int  # of the opening fence, from 1
    lang: str
    code: str
    not_run: bool  # the line directly above says why it does not run

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order (a fence inside another block is that block's text)."""
    lines = page.read_text().splitlines(keepends=True)
    found, index = [], 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence = opening["fence"]
        end = index + 1
        while end < len(lines) and not re.fullmatch(rf"[ \t]*{fence[0]}{{{len(fence)},}}[ \t]*", lines[end].rstrip("\n")):
            end += 1
        above = lines[index - 1].strip() if index else ""
        found.append(Block(str(page.relative_to(ROOT)), index + 1, opening["lang"],
                           textwrap.dedent("".join(lines[index + 1:end])), bool(NOT_RUN.match(above))))
        index = end + 1
    return found


BLOCKS = [block for page in PAGES for block in blocks(page)]
PYTHON = [block for block in BLOCKS if block.lang == "python"]

EXAMPLES = {
    "readme_registration": ("README.md", "agentgym.register("),
    "registration": ("docs/writing-envs.md", "agentgym.register("),
    "usage": ("docs/environments.md", 'agentgym.make("games/FrozenLake-v0"'),
    "rollout": ("docs/inference.md", "RolloutScheduler("),
    "tree": ("docs/inference.md", "generate_tree("),
    "web": ("docs/web-and-gui.md", 'agentgym.make("web/Shop-v0"'),
    "loss": ("docs/training.md", '@register_policy_loss("cispo")'),
    "engine": ("docs/inference.md", "register_engine(EngineSpec("),
}
"""The python blocks the tests run: name -> (page, a string only that block of the page holds)."""


def find(page: str, lang: str, holds: str) -> Block:
    """The one ``lang`` block of ``page`` that holds ``holds``."""
    found = [block for block in BLOCKS if block.page == page and block.lang == lang and holds in block.code]
    assert len(found) == 1, f"{page} has {len(found)} {lang} blocks holding {holds!r}, not one"
    return found[0]


def example(name: str) -> Block:
    """The python block :data:`EXAMPLES` names."""
    page, holds = EXAMPLES[name]
    return find(page, "python", holds)


def run_as_module(block: Block, name: str) -> None:
    """Run ``block`` as a script whose module is importable by name (an env registered as ``__name__:Class``)."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(block.code, str(block), "exec"), module.__dict__)
    finally:
        del sys.modules[name]


def run_on_tiny_model(name: str, tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the example ``name`` from a folder where ``runs/tiny`` is the tiny model, as the page's reader has it."""
    block = example(name)
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "tiny").symlink_to(tiny_model_dir)
    monkeypatch.chdir(tmp_path)
    exec(compile(block.code, str(block), "exec"), {"__name__": f"readme_{name}"})


def test_every_python_block_runs_or_says_why_not():
    run = {example(name) for name in EXAMPLES}
    silent = [str(block) for block in PYTHON if block not in run and not block.not_run]
    assert not silent, (
        f"python blocks neither run by a test in tests/test_readme.py nor marked '<!-- not run: why -->' "
        f"on the line above: {', '.join(silent)}"
    )
    contradicted = [str(block) for block in run if block.not_run]
    assert not contradicted, f"blocks marked 'not run' that a test runs: {', '.join(contradicted)}"


def test_fences_are_found():
    assert len(PYTHON) >= len(EXAMPLES)
    assert {block.page for block in PYTHON} >= {page for page, _ in EXAMPLES.values()}


@pytest.mark.parametrize("name", ["readme_registration", "registration"])
def test_registration_example_runs(name):
    try:
        run_as_module(example(name), f"docs_example_{name}")
        assert "mine/Guess-v0" in [s.id for s in registration.list_envs(family="mine")]
    finally:
        registration._registry.pop("mine/Guess-v0", None)


def test_usage_example_runs():
    block = example("usage")
    exec(compile(block.code, str(block), "exec"), {})


@pytest.mark.timeout(300)  # builds the tiny model and plays 16 episodes; slow on a busy machine
def test_rollout_example_runs(tiny_model_dir, tmp_path, monkeypatch, capsys):
    run_on_tiny_model("rollout", tiny_model_dir, tmp_path, monkeypatch)
    printed = capsys.readouterr().out
    assert "'rollout/finished': 16" in printed and "'rollout/errored': 0" in printed


def test_tree_example_runs(tiny_model_dir, tmp_path, monkeypatch, capsys):
    run_on_tiny_model("tree", tiny_model_dir, tmp_path, monkeypatch)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("0 from None at 0") and len(printed) >= 3  # the root, a fork, the counts
    assert printed[-1].startswith("made ")


def test_loss_example_registers_a_loss_a_config_names():
    """The training page's CISPO: a config takes its name, and its gradient is ``-A * clip(ratio) * grad log pi``."""
    from agentgym.algorithms import POLICY_LOSSES, policy_loss
    from agentgym.config import load_config
    from agentgym.trainers.config import TrainConfig

    block = example("loss")
    try:
        exec(compile(block.code, str(block), "exec"), {"__name__": "readme_loss"})
        config = load_config(TrainConfig, overrides=["output_dir=out", "model.path=m", "env.id=games/FrozenLake-v0",
                                                     "algorithm.loss.name=cispo", "algorithm.loss.correction.tis=null"])
        logprobs = torch.tensor([[-1.0, -0.5]], requires_grad=True)
        old = torch.tensor([[-1.5, -0.5]])  # ratios e^0.5, clipped to 1.2, and 1
        loss, _ = policy_loss(logprobs, old, old, torch.tensor([2.0]), torch.ones(1, 2), config.algorithm.loss)
        loss.backward()  # the token mean of -A * w * log_ratio
        torch.testing.assert_close(logprobs.grad, torch.tensor([[-1.2, -1.0]]))
    finally:
        POLICY_LOSSES.pop("cispo", None)


def test_engine_example_registers_an_engine_a_config_trains_on(monkeypatch):
    """The inference page's ``mine``: once registered, a training config takes its name and the trainer its arguments."""
    from agentgym.config import load_config
    from agentgym.inference import EngineSettings, spec
    from agentgym.trainers.config import TrainConfig

    monkeypatch.setattr(spec, "ENGINES", dict(spec.ENGINES))
    module = {"__name__": "readme_engine"}
    exec(compile(example("engine").code, "docs/inference.md", "exec"), module)
    module["register_engines"]()
    config = load_config(TrainConfig, overrides=["output_dir=out", "model.path=m", "env.id=games/FrozenLake-v0",
                                                 "engine.name=mine"])
    settings = EngineSettings(max_batch_size=8, max_context=512, threads=1, device="cpu", dtype=None, sleeps=False)
    assert spec.engine_spec(config.engine.name).kwargs(settings) == {"device": "cpu", "max_model_len": 512}


@pytest.mark.browser
def test_web_example_runs(capsys):
    block = example("web")
    exec(compile(block.code, str(block), "exec"), {})
    printed = capsys.readouterr().out
    assert 'textbox "Search products"' in printed and printed.rstrip().endswith("1 None")


def test_readme_training_config_is_valid(tmp_path):
    from agentgym.config import load_config
    from agentgym.trainers.config import TrainConfig

    path = tmp_path / "lake.yaml"
    path.write_text(find("README.md", "yaml", "output_dir: runs/lake").code)
    config = load_config(TrainConfig, path, ["trainer.steps=20"])  # as `agentgym train lake.yaml trainer.steps=20`
    assert config.trainer.steps == 20 and config.trainer.async_ratio == 2


def test_training_page_shows_the_quickstart_config():
    block = find("docs/training.md", "yaml", "output_dir: runs/quickstart/train")
    bundled = ROOT / "trainers" / "configs" / "quickstart.yaml"
    assert yaml.safe_load(block.code) == yaml.safe_load(bundled.read_text())


def test_core_reference_lists_every_export():
    page = (ROOT / "docs" / "reference" / "core.md").read_text()
    missing = [name for name in agentgym.__all__ if f"[`{name}`]" not in page]
    assert not missing, f"docs/reference/core.md does not list: {', '.join(missing)}"
