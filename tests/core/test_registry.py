"""The registry: id grammar, lookups with suggestions, make, specs, and third-party plugins."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentgym
from agentgym import EnvSpec, RegistrationError, UnknownEnvError, registration
from tests.conftest import CounterEnv

PLUGIN = Path(__file__).resolve().parents[1] / "fixtures" / "example-plugin"

AGENTGYM = str(Path(sys.executable).with_name("agentgym"))


def test_make_passes_kwargs_and_sets_the_spec(registered_counter):
    env = agentgym.make("test/Counter-v0", parser="pythonic", max_turns=3)
    assert isinstance(env, CounterEnv) and env.spec.id == "test/Counter-v0"
    assert env.max_turns == 3 and env.spec.kwargs == {"parser": "pythonic"}
    env.close()


def test_max_episode_steps_becomes_the_turn_limit():
    agentgym.register("test/Short-v1", "tests.conftest:CounterEnv", max_episode_steps=2)
    try:
        env = agentgym.make("test/Short-v1")
        env.reset(seed=0)
        assert env.step("x")[3] is False and env.step("x")[3] is True
        env.close()
    finally:
        registration._registry.pop("test/Short-v1")


@pytest.mark.parametrize("bad", ["FrozenLake-v0", "games/FrozenLake", "games/FrozenLake-vX", "/X-v0", "games/Frozen Lake-v0"])
def test_malformed_ids_are_refused(bad):
    with pytest.raises(RegistrationError, match="family/Name-vN"):
        agentgym.register(bad, "tests.conftest:CounterEnv")


def test_unknown_ids_suggest_the_closest():
    with pytest.raises(UnknownEnvError, match="Did you mean: games/FrozenLake-v0"):
        agentgym.spec("games/FrozenLak-v0")
    with pytest.raises(UnknownEnvError, match="Registered versions: games/Sokoban-v0"):
        agentgym.make("games/Sokoban-v7")
    with pytest.raises(UnknownEnvError, match="agentgym list"):
        agentgym.spec("zzz/Qqqq-v0")


def test_module_prefix_imports_the_module_first():
    assert "tests.fixtures_registering" not in sys.modules  # no other test imports it in this process
    registered = set(registration._registry)
    try:
        env = agentgym.make("tests.fixtures_registering:test/Imported-v0")
        assert type(env).__name__ == "CounterEnv"
        env.close()
    finally:  # as before the import: the next test to name the module imports it again, registering its ids
        for env_id in set(registration._registry) - registered:
            registration._registry.pop(env_id)
        sys.modules.pop("tests.fixtures_registering", None)


def test_a_family_of_ids_found_on_demand_resolves_through_its_hook(monkeypatch):
    monkeypatch.setattr(registration, "_id_families", dict(registration._id_families))
    asked = []

    def resolve(name: str) -> EnvSpec:
        asked.append(name)
        if name != "Counter-v1":
            raise UnknownEnvError(f"no counter {name!r}")
        return registration.register("counters/Counter-v1", "tests.conftest:CounterEnv")

    registration.register_id_family("counters", resolve)
    try:
        assert agentgym.spec("counters:Counter-v1").id == "counters/Counter-v1"  # module:id form too
        assert agentgym.make("counters/Counter-v1").spec.id == "counters/Counter-v1"
        assert asked == ["Counter-v1"]  # registered by the first lookup, found in the registry after
        with pytest.raises(UnknownEnvError, match="no counter 'Other-v0'"):
            agentgym.spec("counters/Other-v0")
    finally:
        registration._registry.pop("counters/Counter-v1", None)


def test_spec_survives_a_json_round_trip():
    original = agentgym.spec("games/FrozenLake-v0")
    restored = EnvSpec.model_validate_json(original.model_dump_json())
    assert restored == original and (restored.family, restored.name, restored.version) == ("games", "FrozenLake", 0)


def test_entry_points_must_name_an_env_class():
    agentgym.register("test/Broken-v0", "tests.conftest:pytest")
    try:
        with pytest.raises(RegistrationError, match="not a subclass of agentgym.Env"):
            agentgym.make("test/Broken-v0")
    finally:
        registration._registry.pop("test/Broken-v0")
    with pytest.raises(RegistrationError, match="package.module:ClassName"):
        agentgym.register("test/Broken-v0", "no_colon_here")


def test_re_registering_warns(registered_counter):
    with pytest.warns(UserWarning, match="overriding"):
        agentgym.register("test/Counter-v0", "tests.conftest:CounterEnv", tags=("other",))


def test_listing_by_family_and_tag():
    assert {s.id for s in agentgym.list_envs(family="games")} >= {"games/FrozenLake-v0", "games/Sokoban-v0"}
    assert [s.id for s in agentgym.list_envs(tag="math")] == ["tools/Calculator-v0"]
    assert {"games", "tools"} <= set(agentgym.families())


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """The example plugin installed by pip, as a user would, into a directory of its own."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-compile", "--target", str(target), str(PLUGIN)],
        check=True,
    )
    return target


def test_third_party_package_registers_through_the_entry_point(plugin_site, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_site))
    monkeypatch.setattr(registration._plugins, "loaded", False)
    assert "example/GuessNumber-v0" in [s.id for s in agentgym.list_envs(family="example")]
    env = agentgym.make("example/GuessNumber-v0")
    agentgym.check_env(env)
    env.close()
    registration._registry.pop("example/GuessNumber-v0")


def test_cli_lists_the_third_party_environment(plugin_site):
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_site), os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run([AGENTGYM, "list", "--json", "--family", "example"], env=environ,
                            capture_output=True, text=True, check=True)
    assert [s["id"] for s in json.loads(listed.stdout)] == ["example/GuessNumber-v0"]


def test_an_env_whose_extra_is_missing_is_listed_unavailable_and_not_made(registered_counter):
    spec = agentgym.register("test/NeedsExtra-v0", "tests.conftest:CounterEnv", requires=("agentgym_no_such_module",),
                             extra="nothing")
    try:
        assert spec.unavailable == ("needs agentgym_no_such_module, which is not installed: "
                                    "pip install 'agentgym[nothing]'")
        with pytest.raises(RegistrationError, match=r"test/NeedsExtra-v0 cannot be made here: .*agentgym\[nothing\]"):
            agentgym.make("test/NeedsExtra-v0")
        assert registered_counter.unavailable is None
    finally:
        registration._registry.pop(spec.id)


def test_without_the_optional_packages_the_adapters_are_listed_unavailable_with_the_install_command(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(  # a None in sys.modules is how Python spells "not installed"
        "import sys\nfor name in ('mcp', 'textarena', 'miniwob'):\n    sys.modules[name] = None\n")
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    listed = subprocess.run([AGENTGYM, "list", "--json"], env=environ, capture_output=True, text=True, check=True)
    rows = {row["id"]: row for row in json.loads(listed.stdout)}
    assert "pip install 'agentgym[mcp]'" in rows["mcp/IssueTracker-v0"]["unavailable"]
    assert "pip install 'agentgym[textarena]'" in rows["textarena/TicTacToe-v0"]["unavailable"]
    assert "pip install 'agentgym[miniwob]'" in rows["miniwob/*"]["unavailable"]
    assert rows["games/FrozenLake-v0"]["unavailable"] is None
    table = subprocess.run([AGENTGYM, "list", "--family", "miniwob"], env=environ, capture_output=True, text=True)
    assert "miniwob/*" in table.stdout and "unavailable" in table.stdout
    for env_id in ("mcp/IssueTracker-v0", "miniwob/click-test-v0"):
        made = subprocess.run([AGENTGYM, "check", env_id], env=environ, capture_output=True, text=True)
        assert made.returncode == 2 and "cannot be made here" in made.stderr and "Traceback" not in made.stderr
