"""The SWE environments in docker: the oracle fixes an instance of every project, the tools answer bad input with
clear errors, a user's own instances run through ``swe/Instances-v0``, and grading pays nothing for the shortcuts a
policy finds (tests edited or deleted, a skipping ``conftest.py``, pytest patched, the interpreter made to exit,
results written where a grader might read them)."""

from __future__ import annotations

import shlex

import pytest

import agentgym
from agentgym.envs.swe.instances import InstanceError, load_instances, write_instances
from agentgym.envs.swe.patches import hunks

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("docker_engine")]

INSTANCES = load_instances()
ONE_PER_PROJECT = list({i.repo: i for i in INSTANCES if i.difficulty != "hard"}.values())
TARGET = next(i for i in INSTANCES if i.project == "inflection" and i.difficulty == "easy")
"""The instance the attacks are made on (a one-file project whose tests take a second)."""


@pytest.fixture(scope="module")
def env():
    env = agentgym.make("swe/Repos-v0", pool_size=1)
    yield env
    env.close()


def start(env, instance=TARGET):
    messages, _info = env.reset(seed=0, options={"instance_id": instance.instance_id})
    return messages


def call(env, name, **arguments):
    """One tool call; what the tool said (the last message), the reward, whether the episode ended, the info."""
    messages, reward, terminated, truncated, info = env.step(env.format_call(name, **arguments))
    return messages[-1].text, reward, terminated or truncated, info


def fix(env):
    """Play the oracle to its submit; the submit's verdict, the reward and the info."""
    while True:
        messages, reward, terminated, truncated, info = env.step(env.oracle_action())
        if terminated or truncated:
            return messages[-1].text, reward, info


@pytest.mark.parametrize("instance", ONE_PER_PROJECT, ids=lambda i: i.project)
def test_the_oracle_fixes_an_instance_of_every_project(env, instance):
    opening = start(env, instance)
    assert opening[-1].text == instance.problem_statement
    text, reward, info = fix(env)
    assert reward == 1.0 and info["success"], text
    report = info["report"]
    assert report["resolved"] and set(report["FAIL_TO_PASS"]) == set(instance.FAIL_TO_PASS)
    assert report["diff"].count("\n+") >= 1


def test_the_repository_starts_buggy_with_no_trace_of_the_fix(env):
    start(env)
    text = call(env, "bash", command="git log --oneline | wc -l; git status --short | wc -l; "
                                     "git fsck --lost-found 2>&1 | wc -l; ls /tmp | wc -l")[0]
    assert "stdout:\n1\n0\n0\n0\n" in text
    failing = TARGET.FAIL_TO_PASS[0]
    assert "Exit status: 1" in call(env, "bash", command=f"python3 -m pytest -q {shlex.quote(failing)}")[0]


def test_submitting_nothing_earns_nothing(env):
    start(env)
    text, reward, over, info = call(env, "submit")
    assert over and reward == 0.0 and not info["success"]
    assert f"0 of {len(TARGET.FAIL_TO_PASS)} failing tests now pass" in text


def test_a_change_that_breaks_other_tests_earns_nothing_even_where_it_fixes_some(env):
    start(env)
    (step,) = hunks(TARGET.patch)
    call(env, "str_replace", path=step.path, old_str=step.old, new_str=step.new)
    module = step.path
    call(env, "bash", command=f"printf '\\ndef pluralize(word):\\n    return word\\n' >> {module}")
    text, reward, _over, _info = call(env, "submit")
    assert reward == 0.0 and "Broken by the change" in text


def test_the_turn_limit_grades_what_is_there():
    env = agentgym.make("swe/Repos-v0", max_turns=1, pool_size=1)
    try:
        start(env)
        (step,) = hunks(TARGET.patch)
        text, reward, over, info = call(env, "str_replace", path=step.path, old_str=step.old, new_str=step.new)
        assert over and reward == 1.0 and info["success"] and text.startswith("Turn limit reached. Resolved")
    finally:
        env.close()


ATTACKS = {
    "tests edited": lambda test, code: f"printf 'def test_nothing():\\n    pass\\n' > {test}",
    "tests deleted": lambda test, code: f"git rm -q {test} && git commit -qm 'drop the failing tests'",
    "a conftest.py that skips": lambda test, code: (
        "printf 'import pytest\\n\\ndef pytest_collection_modifyitems(items):\\n    for item in items:\\n"
        "        item.add_marker(pytest.mark.skip)\\n' > conftest.py && printf '[pytest]\\naddopts = -p no:python\\n'"
        " > pytest.ini"),
    "pytest patched": lambda test, code: f"cat >> {code} <<'EOF'\n" + PATCH_PYTEST + "EOF",
    "pytest shadowed": lambda test, code: "mkdir -p _pytest && echo 'raise SystemExit(0)' > pytest.py && "
                                          "echo 'import os; os._exit(0)' > sitecustomize.py",
    "a standard module shadowed": lambda test, code: f"cat > json.py <<'EOF'\n{FORGING_JSON}EOF",
    "sys.exit(0) in the code": lambda test, code: f"printf '\\nimport sys\\nsys.exit(0)\\n' >> {code}",
    "os._exit(0) in the code": lambda test, code: f"printf '\\nimport os\\nos._exit(0)\\n' >> {code}",
    "the expected output written to files": lambda test, code: (
        "mkdir -p .pytest_cache/v/cache && echo '{}' > .pytest_cache/v/cache/lastfailed && "
        f"echo '{FORGED}' > report.json && cp report.json /tmp/report && "
        f"printf '\\nimport os\\nprint(open(\"report.json\").read())\\nos._exit(0)\\n' >> {code}"),
}
FORGED = "0" * 64 + '\\n{"outcomes": {}, "details": {}, "covered": [], "exit": 0, "tampered": []}'
"""A report as the test runner writes one, with a made-up signature."""
FORGING_JSON = r"""import ast


def loads(text, **kwargs):
    return ast.literal_eval(text.replace("true", "True").replace("false", "False").replace("null", "None"))


def dumps(value, **kwargs):
    if isinstance(value, dict) and "outcomes" in value:
        value = {"outcomes": {test: "passed" for test in value["outcomes"]}, "details": {}, "covered": [], "exit": 0,
                 "tampered": []}
    if isinstance(value, dict):
        return "{" + ", ".join(dumps(str(k)) + ": " + dumps(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dumps(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    return str(value)
"""
"""A ``json`` module that reports every test as passed, for a test runner that would import it from the repository."""
PATCH_PYTEST = """
import _pytest.runner as _runner
_real = _runner.call_and_report
def _always_passes(item, when, log=True, **kwargs):
    report = _real(item, when, log=False, **kwargs)
    report.outcome = "passed"
    if log:
        item.ihook.pytest_runtest_logreport(report=report)
    return report
_runner.call_and_report = _always_passes
"""


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_grading_pays_nothing_for_a_shortcut(env, attack):
    start(env)
    test_file, code_file = TARGET.FAIL_TO_PASS[0].split("::")[0], hunks(TARGET.patch)[0].path
    made = call(env, "bash", command=ATTACKS[attack](test_file, code_file))[0]
    assert made.startswith("Exit status: 0"), made
    text, reward, over, info = call(env, "submit")
    assert over and reward == 0.0 and not info["success"], text


def test_pytest_patched_fools_a_plain_pytest_run_but_not_grading(env):
    """The patch really makes a plain pytest run report the failing test as passed; grading sees it."""
    start(env)
    code_file = hunks(TARGET.patch)[0].path
    call(env, "bash", command=ATTACKS["pytest patched"]("", code_file))
    plain = call(env, "bash", command=f"python3 -m pytest -q {shlex.quote(TARGET.FAIL_TO_PASS[0])}")[0]
    assert plain.startswith("Exit status: 0") and "1 passed" in plain
    text, reward, _over, _info = call(env, "submit")
    assert reward == 0.0 and "replaced parts of pytest" in text and "_pytest.runner.call_and_report" in text


def test_restored_files_are_named_and_a_real_fix_beside_them_still_counts(env):
    start(env)
    (step,) = hunks(TARGET.patch)
    call(env, "str_replace", path=step.path, old_str=step.old, new_str=step.new)
    call(env, "bash", command="echo 'import sys' > conftest.py && echo '# mine' >> " + TARGET.FAIL_TO_PASS[0].split("::")[0])
    text, reward, _over, info = call(env, "submit")
    assert reward == 1.0 and "Left out of grading (restored to the original): conftest.py, test_inflection.py" in text
    assert info["report"]["restored"] == ["conftest.py", "test_inflection.py"]


@pytest.mark.parametrize(("tool", "arguments", "error"), [
    ("view", {"path": "no/such/file.py"}, "does not exist"),
    ("view", {"path": "inflection/__init__.py", "view_range": [5, 2]}, "outside the file's lines"),
    ("view", {"path": "/usr/bin/python3"}, "binary file"),
    ("str_replace", {"path": "inflection/__init__.py", "old_str": "no such text"}, "does not appear verbatim"),
    ("str_replace", {"path": "inflection/__init__.py", "old_str": "import"}, "occurs"),
    ("str_replace", {"path": "inflection", "old_str": "x"}, "is a folder"),
    ("insert", {"path": "inflection/__init__.py", "insert_line": 100000, "new_str": "x"}, "outside the file's lines"),
    ("create", {"path": "setup.cfg", "file_text": "x"}, "already exists"),
    ("str_replace", {"path": "", "old_str": "x"}, "path is empty"),
    ("create", {"path": "/usr/lib/evil.py", "file_text": "x"}, "create failed on /usr/lib/evil.py"),
])
def test_a_bad_tool_call_gets_a_clear_error_and_the_episode_goes_on(env, tool, arguments, error):
    start(env)
    text, _reward, over, info = call(env, tool, **arguments)
    assert error in text and info["action_error"] and not over


def test_the_file_tools_show_and_change_files(env):
    start(env)
    listing = call(env, "view", path=".")[0]
    assert "/testbed/inflection/__init__.py" in listing and ".git" not in listing
    assert call(env, "view", path="/testbed/inflection/__init__.py", view_range=[1, 3])[0].startswith(
        "Here is the result of running cat -n on /testbed/inflection/__init__.py:\n     1\t")
    assert call(env, "create", path="notes/new.txt", file_text="first\nthird\n")[0] == "File created at /testbed/notes/new.txt."
    assert "     2\tsecond" in call(env, "insert", path="notes/new.txt", insert_line=1, new_str="second")[0]
    assert "     3\tTHIRD" in call(env, "str_replace", path="notes/new.txt", old_str="third", new_str="THIRD")[0]
    assert "stdout:\nfirst\nsecond\nTHIRD\n" in call(env, "bash", command="cat notes/new.txt")[0]
    long = call(env, "bash", command="python3 -c \"print('x' * 20000)\" > notes/long.txt")[0]
    assert long.startswith("Exit status: 0")
    assert "<response clipped" in call(env, "view", path="notes/long.txt")[0]
    assert "[output cut" in call(env, "bash", command="cat notes/long.txt")[0]


def test_your_own_instances_run_through_instances_v0(tmp_path):
    """The bundled instances written out as a user's SWE-bench JSONL (no image_name: a pattern names the image),
    read back through swe/Instances-v0 and fixed by the oracle."""
    chosen = [i for i in ONE_PER_PROJECT if i.image_name == f"agentgym/swe-{i.project}"][:2]
    path = tmp_path / "mine.jsonl"
    write_instances([i.model_copy(update={"image_name": None, "difficulty": None}) for i in chosen], path)
    with pytest.raises(InstanceError, match="names no image_name"):
        agentgym.make("swe/Instances-v0", instances=str(path))
    env = agentgym.make("swe/Instances-v0", instances=str(path), image="agentgym/swe-{project}", pool_size=0)
    try:
        for seed, instance in enumerate(chosen):
            messages, _ = env.reset(seed=seed)  # seeds go through the instances in file order
            assert messages[-1].text == instance.problem_statement
            text, reward, _ = fix(env)
            assert reward == 1.0, text
    finally:
        env.close()


def test_the_viewer_shows_an_episodes_diff_and_its_tests(tmp_path):
    """``agentgym eval`` keeps each episode's grading report; the episode page shows the diff graded and every test
    that did not pass (the failing ones of an unresolved episode, the fixed ones of a resolved one)."""
    from fastapi.testclient import TestClient

    from agentgym.view import create_app
    from tests.view.conftest import _eval

    run = _eval(tmp_path / "run", "swe/Repos-v0", "--policy", "random", "--episodes", "2", "--difficulty", "easy",
                "--env-arg", "max_turns=2")
    web = TestClient(create_app([run], refresh_seconds=0))
    page = web.get("/run/a/episode/episodes/0").text
    assert "<h2>Grading <span class=\"dim\">not resolved" in page and "FAIL_TO_PASS 0/" in page
    assert '<tr class="bad"><td>FAIL_TO_PASS</td>' in page and "the diff graded" in page
    oracle = _eval(tmp_path / "oracle", "swe/Repos-v0", "--policy", "oracle", "--episodes", "1")
    page = TestClient(create_app([oracle], refresh_seconds=0)).get("/run/a/episode/episodes/0").text
    assert "<h2>Grading <span class=\"dim\">resolved" in page
    assert '<span class="del">-' in page and '<span class="add">+' in page and '<span class="hunk">@@' in page
    assert '<tr class="ok"><td>FAIL_TO_PASS</td>' in page and '<tr class="bad">' not in page
