"""agentgym: multi-turn environments, asynchronous rollout and training for LLM agents."""

from agentgym.checker import CheckReport, check_env
from agentgym.core import Env
from agentgym.episode import Timeouts, run_episode
from agentgym.episode_fork import afork_episode, fork_episode
from agentgym.errors import (
    AgentGymError,
    ConfigError,
    ContextLimit,
    EnvCheckError,
    EpisodeTimeout,
    ForkError,
    RegistrationError,
    ReplayDiverged,
    ResetNeeded,
    ToolError,
    UnknownEnvError,
)
from agentgym.evaluation import EvalResult, EvalSummary, evaluate
from agentgym.messages import ImagePart, Message, TextPart, ToolCall
from agentgym.parsers import HermesParser, ParseResult, PythonicParser, ToolCallParser, get_parser
from agentgym.policies import OraclePolicy, Policy, PolicySession, RandomPolicy, TextPolicy, get_policy
from agentgym.registration import EnvSpec, families, list_envs, make, register, spec
from agentgym.tasks import Task, TaskSet
from agentgym.tools import ToolSpec, tool
from agentgym.trajectory import Trajectory, Turn

__version__ = "0.1.0"

__all__ = [
    "AgentGymError",
    "CheckReport",
    "ConfigError",
    "ContextLimit",
    "Env",
    "EnvCheckError",
    "EnvSpec",
    "EpisodeTimeout",
    "EvalResult",
    "EvalSummary",
    "ForkError",
    "HermesParser",
    "ImagePart",
    "Message",
    "OraclePolicy",
    "ParseResult",
    "Policy",
    "PolicySession",
    "PythonicParser",
    "RandomPolicy",
    "RegistrationError",
    "ReplayDiverged",
    "ResetNeeded",
    "Task",
    "TaskSet",
    "TextPart",
    "TextPolicy",
    "Timeouts",
    "ToolCall",
    "ToolCallParser",
    "ToolError",
    "ToolSpec",
    "Trajectory",
    "Turn",
    "UnknownEnvError",
    "afork_episode",
    "check_env",
    "evaluate",
    "families",
    "fork_episode",
    "get_parser",
    "get_policy",
    "list_envs",
    "make",
    "register",
    "run_episode",
    "spec",
    "tool",
]
