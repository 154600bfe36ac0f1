"""A machine's Ray placement labels come from the probes registered under ``agentgym.node_labels``: the envs'
``chromium`` and the sandboxes' ``docker``, each what its probe says here; a broken probe earns nothing and
warns instead of keeping the cluster from starting."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pytest

pytest.importorskip("ray", reason="the ray backend needs Ray: pip install 'agentgym[ray]'")
from agentgym.cluster import placement  # imported after the skip, which needs Ray
from agentgym.envs.web.browser import has_chromium
from agentgym.sandboxes.docker_engine import engine_answers


def test_the_bundled_probes_are_registered_and_say_what_this_machine_has():
    labels = placement.local_labels()
    assert ("chromium" in labels) == has_chromium()
    assert ("docker" in labels) == engine_answers()
    assert set(labels.values()) <= {1.0}


def test_a_probe_that_fails_earns_nothing_and_warns(monkeypatch):
    probes = [EntryPoint("never", "builtins:bool", placement.LABEL_GROUP),  # bool() is False: no label
              EntryPoint("broken", "no.such.module:probe", placement.LABEL_GROUP),
              EntryPoint("always", "tests.cluster.test_node_labels:_always", placement.LABEL_GROUP)]
    monkeypatch.setattr(placement, "entry_points", lambda group: probes if group == placement.LABEL_GROUP else [])
    with pytest.warns(UserWarning, match=r"the node label probe 'broken' \(no.such.module:probe\) failed"):
        assert placement.local_labels() == {"always": 1.0}


def _always() -> bool:
    return True
