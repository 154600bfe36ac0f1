"""The settings of a training run (``agentgym train CONFIG.yaml``), validated once by pydantic."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from agentgym.algorithms import PolicyLossConfig, get_advantage_fn
from agentgym.algorithms.vcpo import VcpoConfig
from agentgym.cluster.config import BackendConfig
from agentgym.config import Config
from agentgym.episode import Timeouts
from agentgym.inference import engine_spec, engines
from agentgym.inference.types import SamplingParams
from agentgym.policies.context import ContextPolicy
from agentgym.suites import load_suite
from agentgym.tracking.config import TrackingConfig
from agentgym.trainers.curriculum import CurriculumConfig
from agentgym.trainers.mixture import EnvEntry, EnvField, Source, SuiteMixture, sources, with_parser


class LoraSection(Config):
    """LoRA adapters (peft) trained in place of the whole model: the base weights stay frozen."""

    r: int = Field(8, ge=1)
    """Rank of each adapter: its update is ``B @ A`` with ``A`` r x in and ``B`` out x r."""
    alpha: float = Field(16.0, gt=0)
    """The update's scale numerator: ``B @ A`` is multiplied by ``alpha / r``."""
    target_modules: list[str] | Literal["all-linear"] = Field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj"], min_length=1)
    """Linear layers that get an adapter, by name or name suffix; ``all-linear``: every one but the output layer."""
    dropout: float = Field(0.0, ge=0, lt=1)
    """Dropout on each adapter's input while training (above 0 the trainer's logprobs carry its noise)."""

    @property
    def scale(self) -> float:
        """``alpha / r``: what ``B @ A`` is multiplied by."""
        return self.alpha / self.r


class ModelConfig(Config):
    """Which model to train."""

    path: str
    """A local Hugging Face model folder (or a hub id on a GPU machine that has it cached)."""
    dtype: Literal["float32", "bfloat16", "float16"] | None = None
    """Parameter dtype; default float32 on CPU and bfloat16 on GPU."""
    lora: LoraSection | None = None
    """Train LoRA adapters (``{r, alpha, target_modules, dropout}``) instead of every weight; null: full fine-tuning.
    The engines receive the merged weights; checkpoints hold the adapter."""

    @field_validator("lora")
    @classmethod
    def _targets_exist(cls, lora: LoraSection | None, info: ValidationInfo) -> LoraSection | None:
        path = info.data.get("path")
        if lora is not None and path is not None and Path(path).is_dir():
            from agentgym.trainers.lora import check_targets  # torch and transformers only when asked for

            check_targets(Path(path), lora)  # a name matching no linear layer of the model is a bad value here
        return lora


class EngineConfig(Config):
    """The inference engine that samples the rollouts and receives new weights after every step."""

    name: str = "torch"
    """A registered engine that a trainer can drive (:mod:`agentgym.inference.spec`): ``torch`` (in this process,
    the default), ``vllm`` (GPU), or one a package registers."""
    max_batch_size: int = Field(64, ge=1)
    """Requests decoded together (torch engine)."""
    threads: int | None = 1
    """CPU threads for torch (process-wide; the trainer shares them); null leaves torch's default."""
    max_context: int = Field(4096, ge=16)
    """Prompt plus response tokens of an episode; a longer one ends as truncated."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Further engine arguments (for vLLM: ``vllm.AsyncEngineArgs`` fields such as ``gpu_memory_utilization``,
    and ``weight_transport``/``transport_options``)."""

    @field_validator("name")
    @classmethod
    def _trainable(cls, name: str) -> str:
        if not engine_spec(name).trainable:  # an unknown name: a ValueError listing the registered ones
            trainable = ", ".join(other for other, spec in engines().items() if spec.trainable)
            raise ValueError(f"the {name} engine cannot be trained (a trainer needs one that holds the model and "
                             f"sleeps); choose one of: {trainable}")
        return name


class SamplingSection(Config):
    """How the behaviour policy samples (the trainer's logprobs use the same distribution)."""

    temperature: float = Field(1.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(64, ge=1)
    """Tokens per turn."""

    def params(self, temperature: float | None = None) -> SamplingParams:
        """The engine's sampling parameters for this section, at ``temperature`` where given."""
        return SamplingParams(temperature=self.temperature if temperature is None else temperature,
                              top_p=self.top_p, max_tokens=self.max_tokens)


class AlgorithmSection(Config):
    """Advantages, the corrected PPO loss, and where ``pi_old`` comes from."""

    advantage: str = "grpo"
    """The registered advantage estimator (:func:`agentgym.algorithms.register_advantage`): ``grpo``, ``dr_grpo``,
    ``rloo``, ``mc_grpo``, ``reinforce_pp`` or your own."""
    loss: PolicyLossConfig = PolicyLossConfig()
    old_logprobs: Literal["exact", "recompute"] = "exact"
    """``exact``: pi_old of each token is the trainer's forward pass under the weights of the version that
    sampled it (a weight snapshot per live version, cheap for small models); ``recompute``: the current
    weights before the step stand in for every version (AReaL's proximal policy; no snapshots)."""
    skip_uniform_groups: bool = True
    """Leave out groups whose rewards are all equal (their advantages are 0): no compute spent on them."""
    dynamic_sampling: bool = False
    """Fill every step with groups that carry a learning signal (DAPO): a group whose rewards are all equal
    is dropped and counted, and the rollout plays another task in its place."""
    dynamic_sampling_draws: float = Field(4.0, ge=1)
    """The bound on extra rollouts: a step takes at most this many times ``groups_per_step`` groups. One left
    short trains on the groups with signal it found; one that found none stops the run, saying so."""
    entropy_coef: float = Field(0.0, ge=0)
    """Bonus on the mean entropy of agent tokens."""
    epochs: int = Field(1, ge=1)
    """Passes over each step's batch, each an optimizer step (PPO epochs); the weights are published once, after
    the last. More than 1 reuses each rollout more, and makes the training phase longer against the rollout."""
    vcpo: VcpoConfig = VcpoConfig()
    """VCPO's variance control for far off-policy steps: the ESS-scaled learning rate (``lr_scaling``) and the
    minimum-variance baseline (``baseline: min_variance``); off by default."""

    @field_validator("advantage")
    @classmethod
    def _registered(cls, advantage: str) -> str:
        get_advantage_fn(advantage)  # an unknown name is a bad value of this key, listing the registered ones
        return advantage

    @model_validator(mode="after")
    def _baseline_replaces_a_mean(self) -> AlgorithmSection:
        if self.vcpo.baseline == "min_variance" and self.advantage not in ("grpo", "dr_grpo"):
            raise ValueError(f"algorithm.vcpo.baseline: min_variance replaces the group mean of grpo or dr_grpo, "
                             f"not the baseline of {self.advantage}")
        return self


class OptimSection(Config):
    """The torch optimizer and learning-rate schedule."""

    lr: float = Field(1e-4, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float | None = Field(1.0, gt=0)
    """Clip the global gradient norm to this (null: no clipping)."""
    schedule: Literal["constant", "linear", "cosine"] = "constant"
    warmup_steps: int = Field(0, ge=0)


class TrainerSection(Config):
    """The training loop."""

    steps: int = Field(100, ge=1)
    """Optimizer steps (= weight versions published)."""
    groups_per_step: int = Field(16, ge=1)
    """Task groups consumed per step; a step trains on ``groups_per_step * group_size`` trajectories."""
    group_size: int = Field(8, ge=1)
    """Episodes per task (G)."""
    micro_batch_size: int = Field(32, ge=1)
    """Trajectories per forward/backward pass; gradients accumulate over a step's micro-batches."""
    max_tokens_per_micro_batch: int | None = Field(None, ge=1)
    """Also cap each pass at this many tokens, padding included (rows times the longest; with ``sequence_packing``,
    the rows' own tokens): long episodes then go a few to a pass and short ones many, each rank gets about as many
    tokens, and the gradients are the same."""
    sequence_packing: bool = False
    """Run each pass's rows as one packed sequence, position ids restarting at each row, so no padding is computed.
    transformers then masks attention per row (a block-diagonal mask with sdpa or eager attention, varlen kernels
    with flash-attention); the gradients are the same."""
    async_ratio: int = Field(2, ge=0)
    """The most versions a trajectory may lag the weights it trains (max staleness); 0 is the synchronous
    on-policy baseline: rollout waits for each update and the trainer for each full batch."""
    forced_lag: int | None = Field(None, ge=0)
    """Staleness as a controlled variable (null: off): every trajectory is trained exactly this many versions after
    the one that sampled it, whatever the machine's speed. The rollout runs synchronously on weights that trail
    the trainer's by ``forced_lag`` versions (the first steps all sample version 0), and held-out evaluation runs
    on a second engine holding the current weights. Needs ``async_ratio`` 0; keeps ``forced_lag + 1`` copies of
    the weights on the CPU."""
    concurrency: int = Field(64, ge=1)
    """Episodes in flight."""
    group_order: Literal["finish", "handout"] = "finish"
    """Which closed groups a step trains on: the first to finish (a slow group never holds the trainer
    up), or the next in the order their tasks were handed out (``handout``: every step's tasks and episode
    seeds are the same in every run, resumed or not, at the cost of waiting for slow groups)."""
    redundancy: int = Field(0, ge=0)
    """Spare episodes per group; the first ``group_size`` finishers are kept."""
    max_retries: int = Field(2, ge=0)
    seed: int = 0
    device: str = "auto"
    """``cpu``, ``cuda`` or ``auto`` (CUDA when available)."""
    timeouts: Timeouts = Timeouts()
    world_size: int = Field(1, ge=1)
    """Trainer processes (ranks), each with a share of every step's micro-batches; more than 1 runs them as
    Ray actors in one torch.distributed process group (gloo on CPU, nccl on GPU)."""
    strategy: Literal["single", "ddp", "fsdp"] | None = None
    """``single``: one process; ``ddp``: every rank holds the whole model and gradients are all-reduced;
    ``fsdp``: FSDP2 shards weights, gradients and optimizer state over the ranks. Null: ``ddp`` when
    ``world_size`` > 1, else ``single``."""
    collective_timeout: float = Field(300.0, gt=0)
    """Seconds a rank waits in a collective (or the driver for a rank) before the step fails, naming the rank."""
    rank_cpus: float = Field(1.0, ge=0)
    """CPUs Ray reserves for each rank."""
    rank_gpus: float = Field(0.0, ge=0)
    """GPUs Ray reserves for each rank (1 on a GPU cluster; each rank then trains on its own GPU)."""
    rank_resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources each rank asks for: ranks go only to nodes that offer them (a multiplexed job's learner
    asks for its group's training pool)."""
    save_rollouts: bool = True
    """Write ``rollouts.jsonl``: every episode each step took, with its advantage and the trainer's logprobs (what
    ``agentgym view`` browses); a few KB per episode, so a long run with large batches may turn it off."""
    colocate: bool = False
    """The trainer and the engine share the devices: while the trainer steps, the engine sleeps (vLLM's sleep
    mode frees its weights and KV cache; the torch engine moves its weights to the CPU) and rollout waits;
    while the engine generates, the trainer's weights and optimizer state wait on the CPU."""
    activation_checkpointing: bool = False
    """Recompute each layer's activations in the backward pass instead of keeping them: less memory for long
    episodes and larger micro-batches, at about one more forward pass of compute (the same gradients)."""

    @field_validator("strategy")
    @classmethod
    def _one_process_is_single(cls, strategy: str | None, info: ValidationInfo) -> str | None:
        world_size = info.data.get("world_size", 1)
        if strategy == "single" and world_size > 1:
            raise ValueError(f"single trains in one process; world_size {world_size} needs ddp or fsdp")
        return strategy

    @property
    def max_lag(self) -> int:
        """The most versions a trained token may lag the weights: ``async_ratio`` plus any forced lag."""
        return self.async_ratio + (self.forced_lag or 0)

    @property
    def parallel(self) -> Literal["single", "ddp", "fsdp"]:
        """The strategy in force (``strategy``, or its default for ``world_size``)."""
        return self.strategy or ("ddp" if self.world_size > 1 else "single")


class EvalSection(Config):
    """Held-out evaluation before training, every ``every`` steps, and at the end; rollout goes on meanwhile."""

    episodes: int = Field(100, ge=0)
    """Held-out tasks (test split) per evaluation; 0 turns evaluation off. With ``suite``, at most this many
    of the suite's tasks."""
    suite: str | None = None
    """A benchmark suite (e.g. ``games-v0``) whose test-split tasks of the trained environment are the
    held-out set; null: ``episodes`` test-split tasks generated for the trained environment."""
    every: int = Field(0, ge=0)
    """Evaluate every this many steps (0: only before and after)."""
    temperature: float | None = None
    """Sampling temperature for evaluation; null uses the training sampling."""
    concurrency: int = Field(64, ge=1)

    @field_validator("suite")
    @classmethod
    def _bundled_or_folder(cls, suite: str | None) -> str | None:
        if suite is not None:
            load_suite(suite)  # an unknown suite, or a changed task list, is a bad value of this key
        return suite


class CheckpointSection(Config):
    """Atomic checkpoints: weights, optimizer, schedule, RNG and the data position."""

    every: int = Field(10, ge=0)
    """Save every this many steps (and at the end); 0 only at the end."""
    keep: int = Field(2, ge=1)
    """Checkpoints kept (oldest removed)."""


class MuxSection(Config):
    """Running as one of many synchronous jobs on shared pools (RollMux): ``agentgym mux submit`` or
    ``agentgym train CONFIG mux.address=...`` joins the co-execution group where the job adds the least cost."""

    address: str | None = None
    """The Ray cluster whose ``agentgym mux start`` scheduler admits the job (``auto``, ``host:port``); null: the
    job runs alone."""
    job: str | None = None
    """The job's name on the scheduler; null: the run directory's name."""
    slo: float = Field(2.0, ge=1)
    """The most this job's step time may grow against running alone (co-run <= slo x solo)."""
    rollout_seconds: float | None = Field(None, gt=0)
    """Seconds a step's rollout takes alone on the group's rollout pool (with ``train_seconds``; or ``profile_from``)."""
    train_seconds: float | None = Field(None, gt=0)
    """Seconds a step's learning and weight publish take alone on the training pool."""
    profile_from: str | None = None
    """A run directory (the same job run alone) whose ``metrics.jsonl`` gives the phase times (their means and
    spread)."""
    memory_gb: float | None = Field(None, gt=0)
    """Host memory the job's engine and learner keep resident between phases; null: five times the model's size."""
    early_release: float | None = Field(0.8, gt=0, le=1)
    """Once this share of a batch's groups has closed, the rollout pool goes to the next job and this one's
    stragglers finish beside it; null keeps the pool to the end of the batch."""

    @model_validator(mode="after")
    def _profiled(self) -> MuxSection:
        if self.address is not None and self.profile_from is None and \
                (self.rollout_seconds is None or self.train_seconds is None):
            raise ValueError("mux.profile_from: admission needs the job's phase times: name a run of it alone "
                             "(mux.profile_from=RUN_DIR) or give mux.rollout_seconds and mux.train_seconds")
        return self


class TrainConfig(Config):
    """A whole run: ``agentgym train CONFIG.yaml [a.b=value ...]``."""

    output_dir: str
    """The run directory: resolved config, metrics, curves, checkpoints, evaluation report."""
    model: ModelConfig
    env: EnvField
    """One environment ``{id, kwargs, difficulties, seed_start}``; a list of them, each with a sampling
    ``weight`` (a mixture, played in one rollout); or ``{suite: NAME, weights, kwargs}``, the suite's train split."""
    curriculum: CurriculumConfig | None = None
    """``success_window``: move each environment's level mix toward levels whose recent success is in a band."""
    engine: EngineConfig = EngineConfig()
    context: ContextPolicy = ContextPolicy()
    """How episodes keep within ``engine.max_context``: compaction of old turns past a budget, a per-turn
    observation budget, and the outcome of an overflow; an env entry's own ``context`` overrides it."""
    sampling: SamplingSection = SamplingSection()
    algorithm: AlgorithmSection = AlgorithmSection()
    optim: OptimSection = OptimSection()
    trainer: TrainerSection = TrainerSection()
    eval: EvalSection = EvalSection()
    checkpoint: CheckpointSection = CheckpointSection()
    rollout: BackendConfig = BackendConfig()
    """Where episodes and the engine run: ``rollout.backend=ray`` puts them in Ray actors (``rollout.ray.*``)."""
    mux: MuxSection = MuxSection()
    """Sharing pools with other jobs (``mux.address``); off by default."""
    logging: TrackingConfig = TrackingConfig()
    """Experiment trackers the run goes to (``logging.trackers: [tensorboard, wandb, mlflow, trackio]``)."""

    @field_validator("curriculum", mode="before")
    @classmethod
    def _by_name(cls, value: Any) -> Any:
        return {"name": value} if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _parser_from_template(cls, data: Any) -> Any:
        """``parser: auto`` in an environment's kwargs: the tool-call format the model's chat template declares."""
        model = data.get("model") if isinstance(data, dict) else None
        if not isinstance(model, dict) or not isinstance(model.get("path"), str):
            return data
        return {**data, "env": with_parser(data.get("env"), model["path"])}

    @field_validator("env")
    @classmethod
    def _distinct(cls, env: EnvEntry | list[EnvEntry] | SuiteMixture) -> EnvEntry | list[EnvEntry] | SuiteMixture:
        if isinstance(env, list) and not env:
            raise ValueError("list at least one environment")
        sources(env)
        return env

    @model_validator(mode="after")
    def _fits(self) -> TrainConfig:
        if self.trainer.concurrency < self.trainer.group_size:
            raise ValueError("trainer.concurrency must be at least trainer.group_size (a group runs at once)")
        if self.mux.address is not None and self.trainer.async_ratio:
            raise ValueError("trainer.async_ratio: a multiplexed job (mux.address) is synchronous, 0: an "
                             "asynchronous one keeps both pools busy and leaves no bubble for another job to fill")
        if self.algorithm.vcpo.grad_norm == "exact" and self.algorithm.vcpo.baseline == "min_variance" and \
                self.trainer.parallel == "fsdp":
            raise ValueError("algorithm.vcpo.grad_norm: exact takes a backward pass per trajectory through a rank's "
                             "whole model, which fsdp shards; use logits under trainer.strategy fsdp")
        engine = engine_spec(self.engine.name)
        if self.rollout.sampling == "latr" and not engine.trees:
            growers = ", ".join(name for name, spec in engines().items() if spec.trees and spec.trainable)
            raise ValueError(f"rollout.sampling: latr grows trees, which the {self.engine.name} engine cannot; "
                             f"set engine.name to one that can ({growers})")
        if self.rollout.sampling == "latr" and engine.untempered_tree_logprobs and \
                (self.sampling.temperature != 1.0 or self.sampling.top_p != 1.0):
            raise ValueError(f"sampling.temperature: LATR on the {self.engine.name} engine records its tree tokens' "
                             "untempered logprobs, the behaviour policy's only at temperature 1 and top_p 1, so the "
                             "off-policy correction would be wrong; sample at 1 and 1, or use engine.name=torch")
        if self.trainer.forced_lag is not None and (self.trainer.async_ratio or self.mux.address is not None
                                                    or self.trainer.colocate):
            raise ValueError("trainer.forced_lag: a forced lag runs the rollout synchronously on trailing weights "
                             "beside an evaluation engine; set trainer.async_ratio=0, without mux.address or "
                             "trainer.colocate")
        if self.mux.address is not None and self.trainer.colocate:
            raise ValueError("trainer.colocate: a multiplexed job trains on its group's training pool, apart "
                             "from the rollout pool")
        return self

    @property
    def sources(self) -> list[Source]:
        """The environments trained on (one, or a mixture's)."""
        return sources(self.env)

    @property
    def run_dir(self) -> Path:
        return Path(self.output_dir)

    @property
    def batch_size(self) -> int:
        """Trajectories per optimizer step."""
        return self.trainer.groups_per_step * self.trainer.group_size
