"""SFT warm start: oracle demonstrations of any registered env, TRL's SFTTrainer, agent-only loss."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from transformers import AutoModelForCausalLM, AutoTokenizer

from agentgym.config import load_config
from agentgym.inference import SamplingParams
from agentgym.inference.torch.engine import TorchEngine
from agentgym.inference.types import GenerationRequest
from agentgym.metrics_log import read_metrics
from agentgym.tasks import TaskSet
from agentgym.trainers.sft import SFTRunConfig, TRLSettings, demonstration_rows, run_sft, sft_trainer
from agentgym.trainers.sft_cli import sft_command

QUICKSTART = Path(__file__).parents[2] / "trainers" / "configs" / "sft-quickstart.yaml"
FAST = [
    "data.episodes=16",
    "data.difficulties=[easy]",
    "trl.learning_rate=1e-3",
    "trl.lr_scheduler_type=constant",
    "trl.num_train_epochs=3",
    "trl.logging_steps=1",
    "trl.seed=0",
]


@pytest.fixture(scope="module")
def sft_run(tiny_model_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft") / "run"
    config = load_config(SFTRunConfig, QUICKSTART, [f"model={tiny_model_dir}", f"output_dir={out}", *FAST])
    return config, run_sft(config)


def test_sft_lowers_the_loss_and_writes_the_run(sft_run):
    config, result = sft_run
    out = config.output_dir
    assert result.demonstrations == 16 and result.steps == 6
    assert result.last_loss < result.first_loss
    losses = [r["sft/loss"] for r in read_metrics(out) if "sft/loss" in r]
    assert losses[0] == pytest.approx(result.first_loss) and losses[-1] == pytest.approx(result.last_loss)
    assert len(losses) == result.steps
    assert all(
        "sft/grad_norm" in r and "sft/learning_rate" in r for r in read_metrics(out) if "sft/loss" in r
    )
    assert load_config(SFTRunConfig, out / "config.yaml") == config
    assert result.model_dir == out / "model"
    assert not list(out.glob("checkpoint-*"))  # no TRL checkpoints left behind


def test_trained_model_prefers_the_oracle_on_held_out_tasks(sft_run, tiny_model_dir):
    config, result = sft_run
    tokenizer = AutoTokenizer.from_pretrained(result.model_dir)
    held_out = demonstration_rows(
        config.data.env,
        tokenizer,
        TaskSet.generate(config.data.env, 8, split="test", difficulties=["easy"]),
        env_kwargs=config.data.env_kwargs,
    )
    before = _mean_agent_logprob(AutoModelForCausalLM.from_pretrained(tiny_model_dir), held_out)
    after = _mean_agent_logprob(AutoModelForCausalLM.from_pretrained(result.model_dir), held_out)
    assert after > before + 1.0


def test_trained_model_loads_in_the_torch_engine(sft_run):
    _, result = sft_run

    async def generate() -> list[int]:
        engine = TorchEngine(result.model_dir, max_batch_size=1)
        try:
            prompt = engine.tokenizer.apply_chat_template(
                [{"role": "user", "content": "hi"}],
                tokenize=True,
                add_generation_prompt=True,
                return_dict=False,
            )
            request = GenerationRequest(
                prompt_ids=prompt, sampling=SamplingParams(temperature=0, max_tokens=4)
            )
            return (await engine.generate(request)).token_ids
        finally:
            await engine.close()

    assert 1 <= len(asyncio.run(generate())) <= 4


def test_only_agent_tokens_carry_loss(tiny_model_dir, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = demonstration_rows("games/FrozenLake-v0", tokenizer, TaskSet.generate("games/FrozenLake-v0", 3))
    trainer = sft_trainer(tiny_model_dir, tokenizer, rows, TRLSettings(max_length=None), tmp_path)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(rows))])
    width = batch["input_ids"].shape[1]
    expected = torch.full((len(rows), width), -100)
    for i, row in enumerate(rows):
        ids, mask = torch.tensor(row["input_ids"]), torch.tensor(row["assistant_masks"])
        assert (
            batch["input_ids"][i, : len(ids)].tolist() == row["input_ids"]
        )  # rows keep their order (no shuffle)
        expected[i, : len(ids)] = torch.where(mask == 1, ids, -100)
    assert torch.equal(batch["labels"], expected)

    trainer.model.eval()
    with torch.no_grad():
        loss = trainer.compute_loss(trainer.model, dict(batch))
        logits = trainer.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    targets = batch["input_ids"][:, 1:]
    agent = expected[:, 1:] != -100
    token_logprobs = torch.log_softmax(logits[:, :-1].float(), -1).gather(-1, targets[..., None])[..., 0]
    assert loss.item() == pytest.approx(-token_logprobs[agent].mean().item(), rel=1e-4)


def test_cli_bad_key_exits_2_naming_it(tmp_path):
    result = CliRunner().invoke(sft_command, [str(QUICKSTART), "trl.learning_rat=1"])
    assert result.exit_code == 2
    assert "trl.learning_rat" in result.stderr and "learning_rate" in result.stderr


def test_cli_missing_model_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(
        sft_command, [str(QUICKSTART), f"model={tmp_path / 'none'}", f"output_dir={tmp_path / 'run'}"]
    )
    assert result.exit_code == 2 and "agentgym model init" in result.stderr


def test_rows_from_another_env_mark_exactly_the_actions(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    rows = demonstration_rows("tools/Calculator-v0", tokenizer, TaskSet.generate("tools/Calculator-v0", 4))
    assert len(rows) == 4
    eos = tokenizer.convert_tokens_to_ids(tokenizer.eos_token)
    for row in rows:
        ids, mask = row["input_ids"], row["assistant_masks"]
        assert len(ids) == len(mask) and mask[0] == 0 and set(mask) == {0, 1}
        ends = [i for i in range(len(ids)) if mask[i] and (i + 1 == len(ids) or not mask[i + 1])]
        assert len(ends) >= 2 and all(ids[i] == eos for i in ends)  # a calculator call, then the answer
        assert "answer" in tokenizer.decode([t for t, m in zip(ids, mask) if m])


def _mean_agent_logprob(model: torch.nn.Module, rows: list[dict[str, list[int]]]) -> float:
    """The mean log-probability the model gives the agent's tokens of ``rows``."""
    total, count = 0.0, 0
    with torch.no_grad():
        for row in rows:
            ids = torch.tensor([row["input_ids"]])
            logprobs = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1).gather(
                -1, ids[0, 1:, None]
            )[:, 0]
            agent = torch.tensor(row["assistant_masks"][1:]) == 1
            total += logprobs[agent].sum().item()
            count += int(agent.sum())
    return total / count


@pytest.mark.parametrize("config", sorted(p.name for p in QUICKSTART.parent.glob("sft-*.yaml")))
def test_every_bundled_sft_config_is_valid(config):
    sources = load_config(SFTRunConfig, QUICKSTART.parent / config).sources
    assert sources and all(source.episodes > 0 for source in sources)


@pytest.mark.parametrize(("showcase", "stages"), [
    ("quickstart", ["sft-quickstart"]),
    ("mixture", ["sft-games", "sft-calculator", "sft-mixture"]),
])
def test_each_showcase_stage_starts_from_the_one_before(showcase, stages):
    """Run by hand as the configs' comments say, each SFT stage reads the model the stage before it wrote, the
    first the tiny model scripts/quickstart.sh builds, and RL the last stage's."""
    from agentgym.trainers import TrainConfig

    model = Path(f"runs/{showcase}/tiny-model")
    for stage in stages:
        config = load_config(SFTRunConfig, QUICKSTART.parent / f"{stage}.yaml")
        assert config.model == model, stage
        model = config.output_dir / "model"
    assert Path(load_config(TrainConfig, QUICKSTART.parent / f"{showcase}.yaml").model.path) == model
