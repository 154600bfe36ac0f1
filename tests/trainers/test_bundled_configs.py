"""The configs in ``trainers/configs/`` given by name to ``agentgym train`` and ``agentgym sft``, from any folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from agentgym.config import load_config
from agentgym.trainers.bundled_configs import ConfigArgument, bundled_names, configs_folder
from agentgym.trainers.cli import train_command
from agentgym.trainers.config import TrainConfig
from agentgym.trainers.sft_cli import sft_command
from agentgym.trainers.sft_config import SFTRunConfig

ROOT = Path(__file__).parents[2]


def test_the_bundled_configs_are_the_source_trees_split_between_the_two_commands():
    files = sorted(path.stem for path in (ROOT / "trainers" / "configs").glob("*.yaml"))
    train, sft = bundled_names(sft=False), bundled_names(sft=True)
    assert "quickstart" in train and "sft-quickstart" in sft
    assert sorted(train + sft) == files and all(name.startswith("sft-") for name in sft)


@pytest.mark.parametrize(("name", "model"), [(name, TrainConfig) for name in bundled_names(sft=False)]
                         + [(name, SFTRunConfig) for name in bundled_names(sft=True)])
def test_a_name_is_its_bundled_config_from_any_folder(name, model, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = ConfigArgument(sft=model is SFTRunConfig).convert(name, None, None)
    assert path == configs_folder() / f"{name}.yaml"
    load_config(model, path)


def test_train_reads_the_bundled_config_it_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(train_command, ["quickstart", "trainer.stepz=1"])
    assert result.exit_code == 2 and "did you mean trainer.steps" in result.stderr  # read, then refused the key
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(("command", "sft"), [(train_command, False), (sft_command, True)])
def test_an_unknown_name_exits_2_listing_the_bundled_names(command, sft, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(command, ["quickstrat"])
    assert result.exit_code == 2 and "'quickstrat' is neither a file nor a bundled config" in result.stderr
    assert result.stderr.strip().rsplit("the bundled configs are ", 1)[1].split(", ") == bundled_names(sft=sft)


def test_a_file_or_a_path_is_never_taken_for_a_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "quickstart").write_text("output_dir: [\n")
    result = CliRunner().invoke(train_command, ["quickstart"])
    assert result.exit_code == 2 and "YAML syntax error" in result.stderr  # the file here, not the bundled one
    for path in ("quickstart.yaml", "configs/quickstart"):
        result = CliRunner().invoke(train_command, [path])
        assert result.exit_code == 2 and f"config file {path} does not exist" in result.stderr
