"""The episode index: summary fields from the JSON before the trajectory, appended lines indexed as they come, torn
and damaged lines left out and counted; the list's filters, sorts, search and pages over it."""

from __future__ import annotations

import os

from agentgym.view.index import EpisodeIndex
from agentgym.view.listing import PAGE_SIZE, Listing, Query, parse_range, search_lines
from tests.view.records import episode, line, rollout


def _index(path, **kwargs) -> EpisodeIndex:
    return EpisodeIndex(path, refresh_seconds=0, **kwargs)


def test_summary_fields_are_read_without_the_trajectory(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(line(episode(1, reward=1.0, success=True, turns=3)) + line(episode(2, status="truncated"))
                     + line(episode(3, status="error")))
    index = _index(path)
    assert index.refresh() == 3
    first, second, third = index.entries
    assert (first.key, first.task_id, first.env_id, first.difficulty) == (
        "games/Guess-v0:easy:1#0", "games/Guess-v0:easy:1", "games/Guess-v0", "easy")
    assert (first.reward, first.turns, first.result, first.line) == (1.0, 3, "success", 1)
    assert (second.result, third.result, third.scored) == ("truncated", "error", False)
    assert index.record(second).trajectory.turns[1].action == "guess 1"
    assert index.line_bytes(first) == line(episode(1, reward=1.0, success=True, turns=3))[:-1]


def test_appended_lines_are_indexed_and_a_torn_one_waits_for_its_end(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(line(episode(1)))
    index = _index(path)
    assert index.refresh() == 1
    whole = line(episode(2))
    with path.open("ab") as f:
        f.write(whole[:40])
    assert index.refresh() == 0 and index.bad_lines == 0
    with path.open("ab") as f:
        f.write(whole[40:])
    assert index.refresh() == 1 and index.entries[1].key == "games/Guess-v0:easy:2#0"
    assert index.indexed_to == path.stat().st_size


def test_damaged_lines_are_skipped_and_counted(tmp_path):
    path = tmp_path / "episodes.jsonl"
    good = line(episode(1))
    path.write_bytes(good + good[:len(good) // 2] + b"\n" + b"not json at all\n" + b"\n" + b'{"key": 1}\n'
                     + line(episode(2)))
    index = _index(path)
    index.refresh()
    assert [e.key for e in index.entries] == ["games/Guess-v0:easy:1#0", "games/Guess-v0:easy:2#0"]
    assert index.bad_lines == 3  # the blank line is not counted
    assert index.entries[1].line == 6


def test_a_summary_field_holding_the_marker_is_read_from_the_whole_line(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(line(episode(1, options={"a": 1, "trajectory": 2})))
    index = _index(path)
    index.refresh()
    assert index.entries[0].task_id == "games/Guess-v0:easy:1" and index.bad_lines == 0


def test_a_rewritten_file_is_indexed_again(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(line(episode(1)) + line(episode(2)))
    index = _index(path)
    index.refresh()
    replacement = tmp_path / "new.jsonl"
    replacement.write_bytes(line(episode(3)))
    os.replace(replacement, path)
    index.refresh()
    assert [e.key for e in index.entries] == ["games/Guess-v0:easy:3#0"] and index.generation == 1


def test_refreshes_are_spaced(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(line(episode(1)))
    index = EpisodeIndex(path, refresh_seconds=3600)
    assert index.refresh() == 1
    path.write_bytes(line(episode(1)) + line(episode(2)))
    assert index.refresh() == 0 and index.refresh(force=True) == 1


def test_rollout_records_carry_their_group(tmp_path):
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(line(rollout(1, 0, 0, reward=1.0)) + line(rollout(2, 3, 1, reward=0.0, versions=(0, 1)))
                     + line(rollout(2, 4, 0, reward=0.5, outcome="uniform")))
    index = _index(path, rollouts=True)
    index.refresh()
    first, second, third = index.entries
    assert (first.step, first.position, first.outcome, first.advantage) == (1, 0, "trained", 0.5)
    assert (second.version_min, second.version_max, second.group) == (0, 1, (2, 3, False))
    assert (third.outcome, third.advantage) == ("uniform", None)
    assert index.record(second).trainer_logprobs == [0.0, 0.0, -0.1, -0.9, -1.0, -0.05]


def test_filters_sorts_and_pages(tmp_path):
    path = tmp_path / "episodes.jsonl"
    records = [episode(i, reward=i / 100, success=i % 3 == 0, turns=1 + i % 5,
                       env_id="games/Guess-v0" if i % 2 else "games/Other-v0") for i in range(120)]
    path.write_bytes(b"".join(line(r) for r in records))
    index = _index(path)
    index.refresh()
    listing = Listing()
    page = listing.page(index, Query(source="episodes"))
    assert (page.total, page.pages, len(page.entries), page.first) == (120, 3, PAGE_SIZE, 1)
    last = listing.page(index, Query(source="episodes", page=99))
    assert last.page == 3 and len(last.entries) == 20
    odd = listing.page(index, Query(source="episodes", env="games/Guess-v0", outcome=("success",)))
    assert odd.total == 20 and all(e.env_id == "games/Guess-v0" and e.success for e in odd.entries)
    best = listing.page(index, Query(source="episodes", sort="-reward")).entries
    assert best[0].reward == 1.19 and best[1].reward == 1.18
    fewest = listing.page(index, Query(source="episodes", sort="turns")).entries
    assert [e.turns for e in fewest[:3]] == [1, 1, 1]
    assert listing.page(index, Query(source="episodes", task=":easy:11")).total == 11  # 11, 110..119


def test_the_text_search_reads_the_lines_and_says_when_it_was_cut_short(tmp_path):
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(b"".join(line(episode(i, text="Needle" if i % 10 == 0 else "hay")) for i in range(50)))
    index = _index(path)
    index.refresh()
    found = search_lines(index, index.entries, "needle")
    assert len(found.matches) == 5 and found.searched == 50 and not found.cut_short
    assert search_lines(index, index.entries, 'say "hi"').matches == []
    cut = search_lines(index, index.entries, "needle", max_bytes=1)
    assert cut.cut_short and cut.searched < 50
    listed = Listing().page(index, Query(source="episodes", text="NEEDLE", sort="-reward"))
    assert listed.total == 5 and listed.search is not None


def test_step_and_version_ranges(tmp_path):
    assert parse_range("4") == (4, 4) and parse_range("2-6") == (2, 6) and parse_range("3-")[0] == 3
    assert parse_range("x") is None and parse_range("") is None
    path = tmp_path / "rollouts.jsonl"
    path.write_bytes(line(rollout(1, 0, 0, reward=1.0)) + line(rollout(2, 1, 0, reward=0.0, versions=(1, 2)))
                     + line(rollout(3, 2, 0, reward=0.0, versions=(2, 2), outcome="stale")))
    index = _index(path, rollouts=True)
    index.refresh()
    listing = Listing()
    assert [e.step for e in listing.page(index, Query(source="rollouts", step="2-3")).entries] == [2, 3]
    assert [e.step for e in listing.page(index, Query(source="rollouts", version="2")).entries] == [2, 3]
    assert [e.step for e in listing.page(index, Query(source="rollouts", outcome=("stale",))).entries] == [3]
    assert listing.page(index, Query(source="rollouts", step="soon")).problems


def test_a_large_stretch_is_indexed_by_a_thread(tmp_path, monkeypatch):
    from agentgym.view import index as index_module

    monkeypatch.setattr(index_module, "SYNC_BYTES", 4096)
    path = tmp_path / "episodes.jsonl"
    path.write_bytes(b"".join(line(episode(i)) for i in range(40)) + b"broken\n")
    index = EpisodeIndex(path, refresh_seconds=0)
    assert index.refresh() == 0  # handed to the thread
    assert index.wait(timeout=30)
    assert len(index.entries) == 40 and index.bad_lines == 1 and index.indexed_to == path.stat().st_size
    with path.open("ab") as f:
        f.write(line(episode(40)))
    assert index.refresh() == 1  # a few new lines: read by the call that finds them
    assert [e.number for e in index.entries] == list(range(41))
