"""TRL interop: env datasets, the env reward function and the multi-turn rollout, in real GRPOTrainer runs."""

from __future__ import annotations

import asyncio
import logging
import shutil
from typing import Any, ClassVar

import pytest
import torch
from datasets import Dataset
from safetensors.torch import load_file
from transformers import AutoTokenizer
from trl import GRPOConfig, GRPOTrainer

import agentgym
from agentgym import Env, Message, tool
from agentgym.errors import AgentGymError
from agentgym.integrations.trl import EnvReward, EnvRollout, _rollout_output, env_dataset, episode_reward
from agentgym.registration import make
from agentgym.trajectory import Trajectory
from tests.whole_text import WholeText


class SayEnv(Env):
    """Two turns of ``say``; each pays the number of distinct characters said / 100 (recorded in ``paid``)."""

    execution = "inline"
    default_max_turns = 2
    paid: ClassVar[list[float]] = []

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(parser=WholeText(), **kwargs)

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        return [Message(role="user", content=f"Say something about {int(self.np_random.integers(1000))}.")]

    @tool
    def say(self, text: str) -> str:
        """Say something.

        Args:
            text: Anything at all.
        """
        reward = len(set(text)) / 100
        self.paid.append(reward)
        self.add_reward(reward)
        return f"You used {len(set(text))} different characters."


class BrokenEnv(Env):
    """By seed % 3: 0 healthy (``ping`` wins), 1 reset fails, 2 every step fails (as if a sandbox died)."""

    execution = "inline"
    default_max_turns = 1

    def setup(self, difficulty: str, options: dict[str, Any]) -> list[Message]:
        if self.np_random_seed % 3 == 1:
            raise ConnectionError("the sandbox did not start")
        return [Message(role="user", content=f"Ping {self.np_random_seed}.")]

    async def astep(self, action: str):
        if self.np_random_seed % 3 == 2:
            raise ConnectionError("the sandbox died")
        return await super().astep(action)

    @tool
    def ping(self) -> str:
        """Ping the server."""
        self.finish(success=True)
        return "pong"

    def oracle_action(self) -> str:
        return self.format_call("ping")


@pytest.fixture(scope="module", autouse=True)
def test_envs():
    specs = [
        agentgym.register("test/Say-v0", "tests.integrations.test_trl:SayEnv"),
        agentgym.register("test/Broken-v0", "tests.integrations.test_trl:BrokenEnv"),
    ]
    yield
    from agentgym import registration

    for spec in specs:
        registration._registry.pop(spec.id, None)


@pytest.fixture(autouse=True)
def one_thread(monkeypatch):
    """The tiny model gains nothing from threads, and two threads on cores shared with other work crawl."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def model_dir(tiny_model_dir, tmp_path):
    return shutil.copytree(tiny_model_dir, tmp_path / "model")


def _trainer(model_dir, dataset: Dataset, reward: Any, tmp_path, **kwargs: Any) -> GRPOTrainer:
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        use_cpu=True,
        per_device_train_batch_size=4,
        num_generations=4,
        max_completion_length=24,
        max_steps=2,
        logging_steps=1,
        learning_rate=1e-3,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        seed=0,
    )
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    return GRPOTrainer(
        model=str(model_dir),
        reward_funcs=reward,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        **kwargs,
    )


def _weights_changed(trainer: GRPOTrainer, model_dir) -> bool:
    before = load_file(model_dir / "model.safetensors")
    after = trainer.model.state_dict()
    return any(not torch.equal(before[key], after[key].cpu()) for key in before)


def _logged(trainer: GRPOTrainer, key: str) -> list[float]:
    return [entry[key] for entry in trainer.state.log_history if key in entry]


def test_env_dataset_rows_replay_their_tasks(tiny_model_dir):
    dataset = env_dataset("games/FrozenLake-v0", 3, split="test", start=5, difficulties=("easy", "medium"))
    assert dataset.column_names == ["prompt", "env_id", "seed", "difficulty"]
    assert dataset["seed"] == [1_000_000_005, 1_000_000_006, 1_000_000_007]
    assert dataset["difficulty"] == ["easy", "medium", "easy"]
    env = make("games/FrozenLake-v0")
    messages, _ = env.reset(seed=1_000_000_006, options={"difficulty": "medium"})
    assert dataset[1]["prompt"] == [m.to_openai() for m in messages]
    assert [m["role"] for m in dataset[1]["prompt"]] == ["system", "user"]

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    text = env_dataset("games/FrozenLake-v0", 1, tokenizer=tokenizer)[0]["prompt"]
    messages, _ = env.reset(seed=0)
    expected = tokenizer.apply_chat_template(
        [m.to_openai() for m in messages],
        tools=[t.to_openai() for t in env.tools],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text == expected and '"name": "move"' in text
    env.close()


def test_env_reward_pays_what_the_env_pays():
    kwargs = {"require_calculator": False}
    reward = EnvReward("tools/Calculator-v0", kwargs)
    env = make("tools/Calculator-v0", **kwargs)
    seeds = [0, 1, 2]
    answers = []
    for seed in seeds:
        env.reset(seed=seed, options={"difficulty": "easy"})
        answers.append(env.problem.answer)
    right = env.format_call("answer", value=answers[0])
    wrong = env.format_call("answer", value=answers[1] + 7)
    parsed = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"type": "function", "function": {"name": "answer", "arguments": {"value": answers[2]}}}
            ],
        }
    ]
    env.close()
    rewards = asyncio.run(
        reward(
            prompts=["", "", "", ""],
            completions=[right, wrong, parsed, right],
            env_id=["tools/Calculator-v0"] * 3 + ["games/FrozenLake-v0"],
            seed=[*seeds, 0],
            difficulty=["easy"] * 4,
        )
    )
    assert rewards == [
        1.0,
        0.0,
        1.0,
        None,
    ]  # the last row is another environment's: not this reward's to score
    assert reward.__name__ == "env_reward"


def test_infrastructure_failure_scores_none_not_zero(caplog):
    reward = EnvReward("test/Broken-v0")
    logged = []
    oracle = make("test/Broken-v0").format_call("ping")
    with caplog.at_level(logging.WARNING, logger="agentgym.integrations.trl"):
        rewards = asyncio.run(
            reward(
                prompts=[""] * 3,
                completions=[oracle] * 3,
                env_id=["test/Broken-v0"] * 3,
                seed=[0, 1, 2],
                difficulty=[None] * 3,
                log_metric=lambda name, value: logged.append((name, value)),
            )
        )
    assert rewards == [1.0, None, None]
    assert logged == [("env_reward/error_fraction", pytest.approx(2 / 3))]
    assert "the sandbox did not start" in caplog.text and "the sandbox died" in caplog.text
    assert episode_reward(env_reward=[1.0, None], env_error=[None, "died"]) == [1.0, None]


def test_grpo_trains_on_env_reward_one_turn_per_sample(model_dir, tmp_path):
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    dataset = env_dataset("test/Say-v0", 4, tokenizer=tokenizer)
    SayEnv.paid.clear()
    trainer = _trainer(model_dir, dataset, EnvReward("test/Say-v0"), tmp_path)
    trainer.train()

    paid = list(SayEnv.paid)
    assert len(paid) == 8  # 2 steps x 4 completions, each a one-turn episode
    means = _logged(trainer, "rewards/env_reward/mean")
    assert means == [pytest.approx(sum(paid[:4]) / 4, rel=1e-5), pytest.approx(sum(paid[4:]) / 4, rel=1e-5)]
    assert _logged(trainer, "env_reward/error_fraction") == [0.0, 0.0]
    assert _weights_changed(trainer, model_dir)


def test_env_rollout_plays_whole_episodes_with_the_trainers_model(model_dir, tmp_path):
    dataset = env_dataset("games/FrozenLake-v0", 2, difficulties=("easy",))
    rollout = EnvRollout(dataset)
    trainer = _trainer(model_dir, dataset, episode_reward, tmp_path, rollout_func=rollout)
    prompts = [dataset[0]["prompt"], dataset[0]["prompt"], dataset[1]["prompt"]]
    trainer.model.train()
    out = rollout(prompts, trainer)
    assert trainer.model.training  # the engine's eval mode does not outlive the rollout

    tokenizer = trainer.processing_class
    tools = [t.to_openai() for t in make("games/FrozenLake-v0").tools]
    for i, prompt in enumerate(prompts):
        rendered = tokenizer.apply_chat_template(
            prompt, tools=tools, tokenize=False, add_generation_prompt=True
        )
        assert tokenizer.decode(out["prompt_ids"][i]) == rendered
        mask, logprobs = out["env_mask"][i], out["logprobs"][i]
        assert len(mask) == len(logprobs) == len(out["completion_ids"][i])
        assert (
            mask[0] == mask[-1] == 1 and 0 in mask
        )  # several turns: the environment's tokens are masked out
        assert all((lp < 0) if m else (lp == 0.0) for m, lp in zip(mask, logprobs))
        assert out["env_reward"][i] in (0.0, 1.0) and out["env_error"][i] is None

    broken = Dataset.from_list(
        [
            {
                "prompt": [{"role": "user", "content": f"Ping {seed}."}],
                "env_id": "test/Broken-v0",
                "seed": seed,
                "difficulty": None,
            }
            for seed in range(3)
        ]
    )
    out = EnvRollout(broken)(broken["prompt"], trainer)
    assert out["env_reward"][1:] == [None, None]
    assert "did not start" in out["env_error"][1] and "died" in out["env_error"][2]
    eos = tokenizer.eos_token_id
    assert out["prompt_ids"][1] == out["completion_ids"][1] == [eos]  # reset failed: a masked placeholder
    assert not any(out["env_mask"][1]) and not any(out["env_mask"][2]) and len(out["completion_ids"][2]) > 1

    with pytest.raises(ValueError, match="not in the dataset"):
        rollout([[{"role": "user", "content": "a prompt from elsewhere"}]], trainer)
    trainer.args.top_k = 5
    with pytest.raises(ValueError, match="set top_k=0 in GRPOConfig"):
        rollout(prompts, trainer)


def test_grpo_trains_on_whole_episodes_with_env_rollout(model_dir, tmp_path):
    dataset = env_dataset("test/Say-v0", 4)
    SayEnv.paid.clear()
    trainer = _trainer(model_dir, dataset, episode_reward, tmp_path, rollout_func=EnvRollout(dataset))
    trainer.train()

    paid = list(SayEnv.paid)
    assert len(paid) == 16  # 2 steps x 4 episodes x 2 turns
    means = _logged(trainer, "rewards/episode_reward/mean")
    assert means == [pytest.approx(sum(paid[:8]) / 4, rel=1e-5), pytest.approx(sum(paid[8:]) / 4, rel=1e-5)]
    assert _weights_changed(trainer, model_dir)


def test_env_rollout_with_trls_own_generation_plays_whole_episodes_turn_by_turn(model_dir, tmp_path):
    """``generation="trl"``: every turn of the live episodes is one batch of TRL's own generation path, so a batch
    of two-turn episodes takes two generations, and GRPO trains on the whole episodes."""
    dataset = env_dataset("test/Say-v0", 4)
    SayEnv.paid.clear()
    rollout = EnvRollout(dataset, generation="trl")
    trainer = _trainer(model_dir, dataset, episode_reward, tmp_path, rollout_func=rollout)
    calls = []
    generate_turn = trainer._generate_single_turn

    def counted(prompt_ids, *args):
        calls.append(len(prompt_ids))
        return generate_turn(prompt_ids, *args)

    trainer._generate_single_turn = counted
    trainer.train()

    assert calls == [4, 4, 4, 4]  # 2 steps x 2 turns, each turn of the step's 4 episodes in one batch
    assert len(SayEnv.paid) == 16
    means = _logged(trainer, "rewards/episode_reward/mean")
    assert means == [pytest.approx(sum(SayEnv.paid[:8]) / 4, rel=1e-5), pytest.approx(sum(SayEnv.paid[8:]) / 4, rel=1e-5)]
    assert 0 < rollout.generation_seconds < rollout.seconds
    assert _weights_changed(trainer, model_dir)


def test_an_episode_in_token_segments_is_refused_rather_than_trained_under_another_context():
    """TRL trains a sample as one sequence; a re-rendered second segment would put its turn under both."""
    trajectory = Trajectory(env_id="test/Segments-v0", token_ids=[1, 2, 3, 1, 2, 3, 4], loss_mask=[0, 0, 1, 0, 0, 0, 1],
                            logprobs=[0.0] * 7, versions=[-1] * 7, segments=[3])
    with pytest.raises(AgentGymError, match="2 token segments.*agentgym train"):
        _rollout_output([trajectory], eos=0)
