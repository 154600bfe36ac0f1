"""``agentgym model``: once as a user runs it (a subprocess of the installed script), then in-process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from agentgym.cli import cli

AGENTGYM = str(Path(sys.executable).with_name("agentgym"))


def test_init_prints_one_json_line_and_refuses_a_non_empty_folder(tmp_path):
    out = tmp_path / "model"
    done = subprocess.run([AGENTGYM, "model", "init", "--preset", "tiny", "--corpus-episodes", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    details = json.loads(done.stdout)
    assert details["arch"] == "Qwen2ForCausalLM" and details["parameters"] > 100_000 and details["vocab_size"] > 256
    assert details["path"] == str(out) and (out / "model.safetensors").is_file()

    refused = subprocess.run([AGENTGYM, "model", "init", str(out)], capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.strip().count("\n") == 0 and "--force" in refused.stderr and str(out) in refused.stderr


def test_force_writes_into_a_non_empty_folder_and_info_describes_it(tmp_path):
    (tmp_path / "notes.txt").write_text("x")
    runner = CliRunner()
    done = runner.invoke(cli, ["model", "init", "--arch", "llama", "--corpus-episodes", "1", "--force", str(tmp_path)])
    assert done.exit_code == 0, done.output
    assert "LlamaForCausalLM" in done.output and "parameters" in done.output and str(tmp_path) in done.output
    info = runner.invoke(cli, ["model", "info", str(tmp_path)])
    assert info.exit_code == 0 and "LlamaForCausalLM" in info.output and "chat template  yes" in info.output
    as_json = json.loads(runner.invoke(cli, ["model", "info", "--json", str(tmp_path)]).output)
    assert as_json["arch"] == "LlamaForCausalLM" and as_json["chat_template"] is True


def test_bad_arguments_exit_2_with_one_line(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(cli, ["model", "info", str(tmp_path / "nowhere")])
    assert missing.exit_code == 2 and "config.json" in missing.output
    bad = runner.invoke(cli, ["model", "init", "--preset", "huge", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "tiny" in bad.output and not (tmp_path / "x").exists()
