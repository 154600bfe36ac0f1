"""The SWE environments' parts that need no sandbox: bug transforms, diffs and what grading keeps of them,
instances in the SWE-bench format, problem statements."""

from __future__ import annotations

import json
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentgym.envs.swe import statements
from agentgym.envs.swe.bugs import KINDS, candidates
from agentgym.envs.swe.instances import Instance, InstanceError, load_instances, write_instances
from agentgym.envs.swe.patches import hunks, make_diff, protected, split_diff, without_protected

SOURCE = textwrap.dedent('''
    def total(xs, limit):
        """Sum the items below the limit; the docstring's 7 is no constant to change."""
        result = 0  # start
        for i in range(1, len(xs)):
            if xs[i] < limit and not xs[i - 1]:
                result += xs[i]
            elif xs[i] == 3:
                result -= 1
            else:
                result = max(result, 2)
        return result if result is not None else xs[1:limit]
''')


def changed_lines(bug):
    """The lines the bug removes and adds."""
    before, after = bug.source.splitlines(), bug.buggy.splitlines()
    return [line for line in before if line not in after], [line for line in after if line not in before]


def test_every_kind_makes_bugs_that_change_only_their_site():
    bugs = candidates("m.py", SOURCE)
    assert {bug.kind for bug in bugs} == set(KINDS)
    for bug in bugs:
        assert bug.function == "total"
        removed, added = changed_lines(bug)
        assert len(removed) <= 7 and len(added) <= 1, bug  # a statement, a branch, or one changed line
        assert "# start" in bug.buggy or "result = 0" in removed[0]


@pytest.mark.parametrize(("kind", "before", "after"), [
    ("flip_comparison", "        if xs[i] < limit and not xs[i - 1]:", "        if xs[i] <= limit and not xs[i - 1]:"),
    ("flip_comparison", "        elif xs[i] == 3:", "        elif xs[i] != 3:"),
    ("off_by_one", "    for i in range(1, len(xs)):", "    for i in range(1, len(xs) + 1):"),
    ("off_by_one", "    return result if result is not None else xs[1:limit]",
     "    return result if result is not None else xs[2:limit]"),
    ("swap_arguments", "    for i in range(1, len(xs)):", "    for i in range(len(xs), 1):"),
    ("wrong_constant", "            result = max(result, 2)", "            result = max(result, 3)"),
    ("invert_condition", "        if xs[i] < limit and not xs[i - 1]:",
     "        if not (xs[i] < limit and not xs[i - 1]):"),
])
def test_a_transform_changes_one_line_as_written(kind, before, after):
    found = {changed_lines(bug)[0][0] + " => " + changed_lines(bug)[1][0]
             for bug in candidates("m.py", SOURCE) if bug.kind == kind and len(changed_lines(bug)[1]) == 1}
    assert f"{before} => {after}" in found


def test_drop_branch_and_remove_statement_take_whole_lines():
    dropped = [bug for bug in candidates("m.py", SOURCE) if bug.kind == "drop_branch"]
    assert any(changed_lines(bug)[0] == ["        else:", "            result = max(result, 2)"] for bug in dropped)
    removed = [bug for bug in candidates("m.py", SOURCE) if bug.kind == "remove_statement"]
    assert any(changed_lines(bug)[0] == ["    result = 0  # start"] for bug in removed)
    assert not any(changed_lines(bug)[0] == ["            result -= 1"] for bug in removed)  # alone in its block
    assert not any("docstring" in line for bug in removed for line in changed_lines(bug)[0])


def test_uncovered_functions_get_no_bugs_and_no_op_changes_are_told_apart():
    assert candidates("m.py", SOURCE, covered=lambda line: False) == []
    same = candidates("m.py", "def f(a, b):\n    return g(a, a)\n")
    assert [bug.kind for bug in same] == []  # swapping two identical arguments is no bug
    assert all(bug.changes_code() for bug in candidates("m.py", SOURCE))


@pytest.mark.parametrize(("path", "kept_out"), [
    ("tests/test_core.py", True), ("pkg/tests/helpers.py", True), ("test_inflection.py", True),
    ("pkg/core_test.py", True), ("conftest.py", True), ("sub/conftest.py", True), ("pytest.ini", True),
    ("tox.ini", True), ("setup.cfg", True), ("pyproject.toml", True), ("sitecustomize.py", True),
    ("usercustomize.py", True), ("evil.pth", True), ("pytest.py", True), ("_pytest/runner.py", True),
    ("pkg/core.py", False), ("src/pkg/testing_utils.py", False), ("README.rst", False), ("contest.py", False),
])
def test_grading_keeps_out_the_files_that_decide_the_grade(path, kept_out):
    assert protected(path) is kept_out


def test_a_diff_loses_only_its_protected_files():
    diff = make_diff({"pkg/core.py": "a = 1\n", "tests/test_core.py": "assert a == 2\n"},
                     {"pkg/core.py": "a = 2\n", "tests/test_core.py": "assert True\n", "conftest.py": "x = 1\n"})
    assert [part.new for part in split_diff(diff)] == ["conftest.py", "pkg/core.py", "tests/test_core.py"]
    kept, dropped = without_protected(diff)
    assert [part.new for part in split_diff(kept)] == ["pkg/core.py"]
    assert dropped == ["conftest.py", "tests/test_core.py"]


lines = st.lists(st.text(alphabet="ab -+@\\", max_size=6).map(lambda s: s + "\n"), max_size=12)


@given(before=lines, after=lines)
@settings(max_examples=200, deadline=None)
def test_the_hunks_of_a_diff_turn_the_old_text_into_the_new(before, after):
    """Replaced in turn, each hunk's old text by its new one (as the oracle does with str_replace), the file
    becomes the new version; lines that look like diff headers ("--- x", "+++") are content inside a hunk."""
    old, new = "".join(before), "".join(after)
    text = old
    for hunk in hunks(make_diff({"f.py": old}, {"f.py": new})):
        assert hunk.path == "f.py"
        if hunk.old:
            assert hunk.old in text
            text = text.replace(hunk.old, hunk.new, 1)
        else:
            text = hunk.new + text
    assert text == new


def instance(**fields):
    base = {"instance_id": "p-1.flip__00", "repo": "owner/p", "patch": "diff --git a/x b/x\n",
            "FAIL_TO_PASS": ["t.py::a"], "PASS_TO_PASS": ["t.py::b"], "problem_statement": "broken"}
    return {**base, **fields}


def test_instances_read_swe_bench_s_json_string_lists_and_keep_other_fields(tmp_path):
    path = tmp_path / "i.jsonl"
    swe_bench_style = instance(FAIL_TO_PASS=json.dumps(["t.py::a"]), PASS_TO_PASS="[]", hints_text="look at x")
    path.write_text(json.dumps(swe_bench_style) + "\n\n")
    (loaded,) = load_instances(path)
    assert loaded.FAIL_TO_PASS == ["t.py::a"] and loaded.PASS_TO_PASS == [] and loaded.project == "p"
    write_instances([loaded], tmp_path / "back.jsonl")
    assert json.loads((tmp_path / "back.jsonl").read_text())["hints_text"] == "look at x"


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "i.jsonl:2 is not a SWE-bench instance"),
    (json.dumps(instance(FAIL_TO_PASS=[])), "i.jsonl:2 is not a SWE-bench instance"),
    (json.dumps({k: v for k, v in instance().items() if k != "patch"}), "patch"),
    (json.dumps(instance()), "appears twice"),
])
def test_a_bad_instance_names_its_line(tmp_path, line, message):
    path = tmp_path / "i.jsonl"
    path.write_text(json.dumps(instance()) + "\n" + line + "\n")
    with pytest.raises(InstanceError, match=message):
        load_instances(path)


def test_a_missing_or_empty_instance_file_is_a_clear_error(tmp_path):
    with pytest.raises(InstanceError, match="cannot read"):
        load_instances(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(InstanceError, match="no instances"):
        load_instances(tmp_path / "empty.jsonl")


def test_the_bundled_instances_cover_six_projects_and_three_levels_and_train_on_other_bugs():
    bundled = load_instances()
    test = [i for i in bundled if i.split == "test"]
    assert len(test) >= 60 and len({i.repo for i in test}) >= 6
    assert {i.difficulty for i in test} == {i.difficulty for i in bundled if i.split == "train"} == {
        "easy", "medium", "hard"}
    for item in bundled:
        assert isinstance(item, Instance) and item.image_name and item.setup_patch and item.patch
        assert not set(item.FAIL_TO_PASS) & set(item.PASS_TO_PASS)
    bugs = {split: {(h.path, h.old, h.new) for i in bundled if i.split == split for h in hunks(i.setup_patch)}
            for split in ("train", "test")}
    assert bugs["train"] and not bugs["train"] & bugs["test"]  # no test instance's bug is trained on


OUTPUT = "tests/test_x.py:12: in test_sum\n    assert total([1]) == 1\nE   AssertionError: assert 0 == 1\n"


def test_statements_say_as_much_as_their_level_allows():
    easy = statements.easy("tests/test_x.py::test_sum", OUTPUT, "pkg/core.py")
    assert "tests/test_x.py::test_sum" in easy and "pkg/core.py" in easy and "assert 0 == 1" in easy
    medium = statements.medium(OUTPUT)
    assert "assert 0 == 1" in medium and "pkg/core.py" not in medium
    hard = statements.hard([OUTPUT, "E   KeyError: 'b'\n"])
    assert "1. `AssertionError: assert 0 == 1`" in hard and "2. `KeyError: 'b'`" in hard
    assert "tests/test_x.py" not in hard
    assert statements.medium("§" * 5000).count("§") == statements.OUTPUT_CHARS
