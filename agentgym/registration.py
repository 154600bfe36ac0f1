"""The environment registry: ids of the form ``family/Name-vN``, specs, ``make`` and plugin discovery.

Bundled environments and third-party packages register through the entry-point group
``agentgym.envs`` (an entry point names a function that calls :func:`register`, or a module that
does so on import). Plugins are loaded on the first lookup, never at import time. A family whose ids are
found on demand (``gymnasium/Taxi-v3`` reaches any Gymnasium environment) registers a resolver with
:func:`register_id_family`; the registry itself imports no environment.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import re
import warnings
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentgym.core import Env
from agentgym.errors import RegistrationError, UnknownEnvError
from agentgym.plugins import EntryPointGroup

ENTRY_POINT_GROUP = "agentgym.envs"
ADAPTED = "adapted"
"""The tag of environments whose tasks come from another package (Gymnasium, TextArena, MiniWoB++): they may
have no oracle, and the bundled environments' checks and the tokenizer's corpus leave them out."""
_ID = re.compile(r"^(?P<family>[A-Za-z][\w.-]*)/(?P<name>[A-Za-z][\w.]*(?:-[\w.]+)*?)-v(?P<version>\d+)$")
"""``family/Name-vN``: the name starts with a letter and may hold hyphens (``miniwob/click-tab-2-v0``)."""


class EnvSpec(BaseModel):  # type: ignore[no-redef]  # pydantic's plugin: the field `kwargs` vs __init__'s **kwargs
    """Everything needed to build an environment by id; survives a JSON round trip."""

    model_config = ConfigDict(frozen=True)
    id: str
    entry_point: str
    """``package.module:ClassName``, imported only when the environment is made."""
    max_episode_steps: int | None = None
    """The turn limit; ``None`` leaves it to the environment (it may depend on the difficulty)."""
    kwargs: dict[str, Any] = Field(default_factory=dict)
    """Constructor arguments; ``make`` merges its own on top."""
    tags: tuple[str, ...] = ()
    description: str = ""
    nondeterministic: bool = False
    """True if the same seed may give different episodes (Gymnasium's checker then skips determinism)."""
    requires: tuple[str, ...] = ()
    """Modules the environment imports that agentgym's core does not install."""
    extra: str | None = None
    """The ``agentgym[extra]`` that installs :attr:`requires`."""

    @property
    def unavailable(self) -> str | None:
        """Why the environment cannot be made here (a missing module, and the command that installs it), or
        ``None`` when it can."""
        return _missing(self.requires, self.extra)

    @property
    def family(self) -> str:
        return parse_id(self.id)[0]

    @property
    def name(self) -> str:
        return parse_id(self.id)[1]

    @property
    def version(self) -> int:
        return parse_id(self.id)[2]

    def load(self) -> type[Env]:
        """Import and return the environment class."""
        return load_entry_point(self.entry_point)

    def make(self, **kwargs: Any) -> Env:
        """Build the environment from this spec (see :func:`make`)."""
        return make(self, **kwargs)


_registry: dict[str, EnvSpec] = {}
_unavailable_families: dict[str, str] = {}
_id_families: dict[str, Callable[[str], EnvSpec]] = {}
_family_descriptions: dict[str, str] = {}
_plugins = EntryPointGroup(ENTRY_POINT_GROUP)


def parse_id(env_id: str) -> tuple[str, str, int]:
    """Split ``family/Name-vN`` into its parts; raise :class:`RegistrationError` if it is malformed."""
    match = _ID.match(env_id)
    if match is None:
        raise RegistrationError(f"malformed environment id {env_id!r}: expected 'family/Name-vN', e.g. 'games/FrozenLake-v0'")
    return match["family"], match["name"], int(match["version"])


def register(
    id: str,
    entry_point: str,
    *,
    max_episode_steps: int | None = None,
    kwargs: dict[str, Any] | None = None,
    tags: tuple[str, ...] | list[str] = (),
    description: str = "",
    nondeterministic: bool = False,
    requires: tuple[str, ...] = (),
    extra: str | None = None,
) -> EnvSpec:
    """Register an environment under ``id``; registering an id again replaces it with a warning. An
    environment that needs modules of an optional extra names them (``requires``) and the extra: where they
    are missing it is listed as unavailable, and making it says how to install them."""
    parse_id(id)
    if not isinstance(entry_point, str) or ":" not in entry_point:
        raise RegistrationError(f"entry_point for {id} must be 'package.module:ClassName', got {entry_point!r}")
    spec = EnvSpec(
        id=id,
        entry_point=entry_point,
        max_episode_steps=max_episode_steps,
        kwargs=dict(kwargs or {}),
        tags=tuple(tags),
        description=description,
        nondeterministic=nondeterministic,
        requires=tuple(requires),
        extra=extra,
    )
    previous = _registry.get(id)
    if previous is not None and previous != spec:
        warnings.warn(f"overriding the registered environment {id}", stacklevel=2)
    _registry[id] = spec
    return spec


def register_id_family(family: str, resolve: Callable[[str], EnvSpec]) -> None:
    """Let an unregistered id ``family/<name>`` (or ``family:<name>``) be found by ``resolve(name)``, which
    registers it and returns its spec or raises :class:`UnknownEnvError` (how ``gymnasium/...`` reaches any of
    Gymnasium's environments)."""
    _id_families[family] = resolve


def spec(env_id: str) -> EnvSpec:
    """The spec registered under ``env_id`` (``module:id`` imports ``module`` first). An id of a family that
    resolves ids on demand (:func:`register_id_family`), such as ``gymnasium:Taxi-v3`` or ``gymnasium/Taxi-v3``,
    is registered as the latter on first use."""
    _plugins.load()
    env_id = _import_prefix(env_id)
    found = _registry.get(env_id)
    family, _, name = env_id.partition("/")
    if found is None and family in _id_families:
        return _id_families[family](name)
    if found is None:
        parsed = _ID.match(env_id)
        missing = _unavailable_families.get(parsed["family"]) if parsed else None
        raise UnknownEnvError(f"{env_id} cannot be made here: {missing}" if missing else _unknown_message(env_id))
    return found


def register_unavailable_family(family: str, description: str, *, requires: tuple[str, ...], extra: str) -> None:
    """Record that the family's environments, whose ids come from a package that is not installed, cannot
    be listed or made here; :func:`unavailable_families` and lookups in the family say how to install it."""
    reason = _missing(requires, extra)
    if reason is not None:
        _unavailable_families[family] = reason
        _family_descriptions[family] = description


def unavailable_families() -> dict[str, tuple[str, str]]:
    """Family -> (description, why it is unavailable) for the families whose package is missing here."""
    _plugins.load()
    return {family: (_family_descriptions[family], reason) for family, reason in sorted(_unavailable_families.items())}


def make(env_id: str | EnvSpec, **kwargs: Any) -> Env:
    """Build an environment by id or spec; ``kwargs`` override the spec's constructor arguments."""
    env_spec = env_id if isinstance(env_id, EnvSpec) else spec(env_id)
    if (reason := env_spec.unavailable) is not None:
        raise RegistrationError(f"{env_spec.id} cannot be made here: {reason}")
    arguments = {**env_spec.kwargs, **kwargs}
    if env_spec.max_episode_steps is not None:
        arguments.setdefault("max_turns", env_spec.max_episode_steps)
    env_cls = env_spec.load()
    try:
        env = env_cls(**arguments)
    except TypeError as exc:
        raise RegistrationError(f"could not build {env_spec.id} with arguments {sorted(arguments)}: {exc}") from exc
    made_with = {k: v for k, v in arguments.items() if k != "max_turns"}
    env.spec = env_spec.model_copy(update={"kwargs": made_with})  # type: ignore[assignment]  # ours, not Gymnasium's
    return env


def list_envs(family: str | None = None, tag: str | None = None) -> list[EnvSpec]:
    """The registered specs, sorted by id, optionally only one family or tag."""
    _plugins.load()
    return [
        s
        for _, s in sorted(_registry.items())
        if (family is None or s.family == family) and (tag is None or tag in s.tags)
    ]


def families() -> list[str]:
    """The families that have at least one registered environment."""
    return sorted({s.family for s in list_envs()})


def load_entry_point(entry_point: str) -> type[Env]:
    """Import ``package.module:ClassName`` and check that it is an agentgym environment."""
    module_name, _, attr = entry_point.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise RegistrationError(f"cannot load entry point {entry_point!r}: {exc}") from exc
    if not (isinstance(obj, type) and issubclass(obj, Env)):
        raise RegistrationError(f"entry point {entry_point!r} is not a subclass of agentgym.Env")
    return obj


def _import_prefix(env_id: str) -> str:
    """Import the module of a ``module:family/Name-vN`` id and return the plain id (``family:Name-vN`` of a
    family of :func:`register_id_family` becomes ``family/Name-vN``)."""
    module, sep, rest = env_id.partition(":")
    if not sep or "/" in module:
        return env_id
    if module in _id_families:
        return f"{module}/{rest}"
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise RegistrationError(f"cannot import {module!r} to find {rest}: {exc}") from exc
    return rest


def _missing(modules: tuple[str, ...], extra: str | None) -> str | None:
    """Which of ``modules`` cannot be imported here, and the command that installs them; ``None`` if none."""
    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if not missing:
        return None
    install = f"pip install 'agentgym[{extra}]'" if extra else f"pip install {' '.join(missing)}"
    return f"needs {', '.join(missing)}, which is not installed: {install}"


def _unknown_message(env_id: str) -> str:
    """Why ``env_id`` was not found, with the nearest registered ids."""
    known = sorted(_registry)
    try:
        family, name, _ = parse_id(env_id)
    except RegistrationError as exc:
        family, name = None, None
        prefix = f"{exc}."
    else:
        prefix = f"no environment registered as {env_id!r}."
    versions = [i for i in known if family is not None and i.rsplit("-v", 1)[0] == f"{family}/{name}"]
    if versions:
        return f"{prefix} Registered versions: {', '.join(versions)}"
    lowered = {i.lower(): i for i in known}
    close = difflib.get_close_matches(env_id.lower(), list(lowered), n=3, cutoff=0.5)
    if close:
        return f"{prefix} Did you mean: {', '.join(lowered[c] for c in close)}?"
    return f"{prefix} See `agentgym list` for the registered ids."
