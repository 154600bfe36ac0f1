"""How many checks ``agentgym check`` starts at once: the bounds, and a check to run on its own."""

from __future__ import annotations

from agentgym.check_pool import HEAVY_CHECK_BYTES, _startable, heavy_limits
from agentgym.registration import EnvSpec

SPECS = [EnvSpec(id=f"test/Browser{i}-v0", entry_point="m:C", tags=("browser",)) for i in range(3)] + [
    EnvSpec(id="test/Plain-v0", entry_point="m:C"),
    EnvSpec(id="test/Desktop-v0", entry_point="m:C", tags=("gui", "sandbox")),
]


def test_checks_start_up_to_the_concurrency_and_each_heavy_tag_up_to_its_bound():
    limits = {"browser": 1, "sandbox": 1}
    assert _startable(SPECS, [0, 1, 2, 3, 4], [], set(), 3, limits) == [0, 3, 4]
    assert _startable(SPECS, [1, 2, 4], [0, 3], set(), 3, limits) == [4]
    assert _startable(SPECS, [1, 2], [0, 3, 4], set(), 5, limits) == []
    assert _startable(SPECS, [1, 2], [3], set(), 5, {"browser": 2}) == [1, 2]


def test_a_check_to_run_alone_waits_for_the_others_and_nothing_starts_beside_it():
    assert _startable(SPECS, [3, 1], [0], {3}, 4, {"browser": 2}) == [1]
    assert _startable(SPECS, [3, 1], [], {3}, 4, {"browser": 2}) == [3]


def test_heavy_checks_are_bounded_by_the_concurrency_and_the_memory(monkeypatch):
    monkeypatch.setattr("agentgym.check_pool.available_memory", lambda: 3 * HEAVY_CHECK_BYTES + 1)
    assert heavy_limits(2) == {"browser": 2, "sandbox": 2}
    assert heavy_limits(8) == {"browser": 3, "sandbox": 3}
    monkeypatch.setattr("agentgym.check_pool.available_memory", lambda: 0)
    assert heavy_limits(8) == {"browser": 1, "sandbox": 1}
    monkeypatch.setattr("agentgym.check_pool.available_memory", lambda: None)
    assert heavy_limits(8) == {"browser": 8, "sandbox": 8}
