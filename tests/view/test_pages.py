"""Every page of the viewer over real run folders (web and GUI evaluations with screens, a model's with tokens, a
training run), through HTTP: what each shows, the list's filters, the refresh of a run being written, damaged lines,
and that nothing a run holds reaches the page as markup."""

from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from agentgym.evaluation.compare import compare_runs
from agentgym.evaluation.records import EPISODES, EpisodeRecord
from agentgym.view import create_app
from agentgym.view.app import CONTENT_SECURITY_POLICY
from tests.view.records import HOSTILE, append, copy_run, hostile_copy

RUNS = ["web_run", "gui_run", "model_run", "train_run"]


def client(*paths, **kwargs) -> TestClient:
    return TestClient(create_app(list(paths), refresh_seconds=0, **kwargs))


def links(html: str, pattern: str) -> list[str]:
    return [a.replace("&amp;", "&") for a in re.findall(rf'href="({pattern}[^"]*)"', html)]


def first_record(run) -> EpisodeRecord:
    return EpisodeRecord.model_validate_json((run / EPISODES).read_bytes().split(b"\n")[0])


@pytest.mark.parametrize("run", RUNS)
def test_every_page_of_each_kind_of_run(run, request):
    folder = request.getfixturevalue(run)
    web = client(folder)
    assert web.get("/", follow_redirects=False).headers["location"] == "/run/a"
    page = web.get("/run/a")
    assert page.status_code == 200 and "<svg" in page.text
    assert ("Learning curves" in page.text) == (run == "train_run")
    assert "success by environment" in page.text and "Infrastructure errors" in page.text
    listed = web.get("/run/a/episodes")
    assert listed.status_code == 200
    episodes = links(listed.text, "/run/a/episode/")
    assert episodes
    for url in episodes[:3]:
        shown = web.get(url)
        assert shown.status_code == 200 and "Turn 1" in shown.text, url
    status = web.get("/run/a/status.json").json()
    assert status["episodes"] == sum(s["episodes"] for s in status["sources"].values()) > 0


def test_a_web_episode_shows_its_screens(web_run):
    web = client(web_run)
    shown = web.get("/run/a/episode/episodes/0").text
    screens = re.findall(r'<img src="(/run/a/screens/episodes/[0-9a-f]+\.png)"', shown)
    assert len(screens) >= 9  # the first page and one per turn
    image = web.get(screens[0])
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert image.content.startswith(b"\x89PNG")
    assert "model (raw text)" in shown and "&lt;tool_call&gt;" in shown  # the raw text, escaped
    assert '<span class="fn">fill</span>' in shown  # the parsed call


def test_a_models_episode_shows_parse_errors_and_coloured_tokens(model_run):
    web = client(model_run)
    shown = web.get("/run/a/episode/episodes/0").text
    assert "parse error shown to the agent" in shown and "no tool call found" in shown
    tokens = web.get("/run/a/episode/episodes/0?tab=tokens").text
    assert 'class="token-view mode-behaviour"' in tokens
    assert re.search(r'<span class="tok b\d" title="id \d+ · behaviour logprob', tokens)
    assert '<span class="ver v0" title="policy version 0"><span class="vl">v0</span>' in tokens
    assert "tokenizer: " in tokens and "(not trained)" in tokens  # an evaluation has no trainer logprobs


def test_a_training_runs_rollouts_groups_and_token_ratios(train_run):
    web = client(train_run)
    page = web.get("/run/a").text
    assert "Rollouts by step" in page and "held-out evaluation, step 4" in page
    step2 = web.get("/run/a/episodes?source=rollouts&step=2").text
    keys = re.findall(r">(\d+/\d+c?/\d+)</a>", step2)
    assert keys and all(k.startswith("2/") for k in keys)
    groups = links(step2, "/run/a/group/")
    group = web.get(groups[0])
    assert group.status_code == 200 and group.text.count('<div class="member') == 4
    assert group.text.count("advantage</th>") == 4
    ratio = web.get("/run/a/episode/rollouts/20?tab=tokens&colour=ratio").text
    assert 'class="token-view mode-ratio"' in ratio and re.search(r'class="tok b\d t\d r\d"', ratio)
    assert "trainer logprob" in ratio and "ratio from" in ratio
    held_out = web.get("/run/a/episodes?source=eval-000004")
    assert held_out.status_code == 200 and "held-out evaluation, step 4" in held_out.text
    assert len(links(held_out.text, "/run/a/episode/eval-000004/")) == 8
    trained = web.get("/run/a/episodes?source=rollouts&outcome=trained&outcome=truncated&version=0-0").text
    assert len(links(trained, "/run/a/episode/rollouts/")) == 32  # steps 1 and 2 sampled with version 0


def test_filters_sort_and_pages_over_a_larger_run(gui_run, tmp_path):
    folder = copy_run(gui_run, tmp_path / "big")
    record = first_record(folder)
    extra = [record.model_copy(update={"key": f"{record.task.id}#{i}", "sample": i, "reward": i / 100,
                                       "success": i % 2 == 0}) for i in range(1, 120)]
    append(folder, b"".join((r.model_dump_json() + "\n").encode() for r in extra))
    web = client(folder)
    first = web.get("/run/a/episodes").text
    assert "123 episodes; 1–50 shown" in first and "page 1 of 3" in first
    third = web.get("/run/a/episodes?page=3").text
    assert "101–123 shown" in third and len(links(third, "/run/a/episode/")) == 23
    best = web.get("/run/a/episodes?sort=-reward").text
    assert re.findall(r">(gui/ClickButton-v0:[^<]+)</a>", best)[:2] == [f"{record.task.id}#119",
                                                                          f"{record.task.id}#118"]
    failures = web.get("/run/a/episodes?outcome=failure").text
    assert "60 episodes" in failures
    searched = web.get("/run/a/episodes?q=ClickButton").text
    assert "123 matches in 123 of 123 episodes" in searched
    # an episode opened from a filtered, sorted page keeps them: its neighbours, and the way back to its page
    url = links(web.get("/run/a/episodes?sort=-reward&outcome=failure&page=2").text, "/run/a/episode/")[0]
    shown = web.get(url).text
    assert "51 of 60" in shown
    back = links(shown, r"/run/a/episodes\?")[0]
    assert "outcome=failure" in back and "sort=-reward" in back and "page=2" in back
    nxt = links(shown, "/run/a/episode/")[1]
    assert "52 of 60" in web.get(nxt).text


def test_damaged_lines_are_counted_never_raised(gui_run, tmp_path):
    folder = copy_run(gui_run, tmp_path / "damaged")
    whole = (folder / EPISODES).read_bytes().split(b"\n")[0]
    append(folder, whole[: len(whole) // 2] + b"\n" + b"\x00\xff garbage\n")
    bad_record = whole[: whole.index(b',"trajectory":')] + b',"trajectory":{"turns":"not a list"}}\n'
    append(folder, bad_record.replace(b"#0", b"#7"))
    web = client(folder)
    assert "2 lines could not be read" in web.get("/run/a").text
    listed = web.get("/run/a/episodes").text
    assert "2 lines of episodes.jsonl could not be read" in listed and "5 episodes" in listed
    unreadable = web.get("/run/a/episode/episodes/4")
    assert unreadable.status_code == 422 and "line 7 could not be read" in unreadable.text


def test_a_run_being_written_shows_new_episodes(gui_run, tmp_path):
    folder = copy_run(gui_run, tmp_path / "live")
    web = client(folder)
    assert web.get("/run/a/status.json").json()["episodes"] == 4
    record = first_record(folder)
    fresh = (record.model_copy(update={"key": "fresh#1", "sample": 1}).model_dump_json() + "\n").encode()
    append(folder, fresh)
    assert web.get("/run/a/status.json").json()["episodes"] == 5
    assert "fresh#1" in web.get("/run/a/episodes").text
    torn = (record.model_copy(update={"key": "torn#2", "sample": 2}).model_dump_json() + "\n").encode()
    append(folder, torn[:100])
    assert "torn#2" not in web.get("/run/a/episodes").text
    assert web.get("/run/a/status.json").json()["sources"]["episodes"] == {"episodes": 5, "bad_lines": 0,
                                                                           "read_percent": 100}
    append(folder, torn[100:])
    assert "torn#2" in web.get("/run/a/episodes").text
    page = web.get("/run/a").text
    assert 'data-status="/run/a/status.json" data-episodes="6"' in page


def test_nothing_a_run_holds_reaches_the_page_as_markup(gui_run, tmp_path):
    folder = hostile_copy(gui_run, tmp_path / "hostile")
    web = client(folder)
    pages = [web.get("/run/a"), web.get("/run/a/episodes"), web.get(f"/run/a/episodes?q={HOSTILE}&task={HOSTILE}"),
             web.get("/run/a/episode/episodes/4"), web.get("/run/a/episode/episodes/4?tab=tokens"),
             web.get(f"/run/a/episodes?source={HOSTILE}")]
    for page in pages:
        assert "<script>window" not in page.text and "<img src=x" not in page.text, page.url
        assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    shown = pages[3].text
    assert shown.count("&lt;script&gt;window.pwned=1&lt;/script&gt;") >= 5
    assert "javascript:" not in re.sub(r"&[^;]+;|\s", "", "".join(re.findall(r'(?:href|src)="([^"]*)"', shown)))
    assert "script-src 'self'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
    assert re.findall(r"<script[^>]*>", shown) == ['<script src="/static/view.js" defer>']


def test_the_screen_route_serves_stored_screens_only(web_run, tmp_path):
    folder = copy_run(web_run, tmp_path / "screens")
    (folder / "secret.png").write_bytes(b"\x89PNG secret")
    (folder / "screens" / "linked.png").symlink_to(folder / "secret.png")
    web = client(folder)
    stored = next((folder / "screens").glob("*.png")).name
    assert web.get(f"/run/a/screens/episodes/{stored}").status_code == 200
    for bad in ["..%2Fsecret.png", "%2E%2E%2Fsecret.png", "linked.png", "..%2F..%2Fetc%2Fpasswd", ".hidden.png",
                "manifest.json", "a%00.png"]:
        refused = web.get(f"/run/a/screens/episodes/{bad}")
        assert refused.status_code == 404 and b"secret" not in refused.content, bad
    assert web.get("/run/a/screens/../secret.png").status_code == 404
    assert web.get("/run/a/screens/nosuchsource/" + stored).status_code == 404


def test_missing_things_are_404_pages(gui_run):
    web = client(gui_run)
    for url in ["/run/c", "/run/a/episode/episodes/99", "/run/a/episode/nosuch/0", "/run/a/group/1/0", "/compare",
                "/static/../app.py", "/static/other.js"]:
        missing = web.get(url)
        assert missing.status_code == 404 and "<h1>404</h1>" in missing.text, url


def test_compare_lists_what_one_solved_with_the_paired_statistics(gui_run, gui_random_run):
    web = client(gui_run, gui_random_run)
    assert web.get("/", follow_redirects=False).headers["location"] == "/compare"
    page = web.get("/compare").text
    expected = compare_runs(gui_run, gui_random_run)
    assert f"{expected.p_success:.4f}" in page and "Solved by A, not by B (4)" in page
    assert "Solved by B, not by A (0)" in page
    for task in json.loads(expected.model_dump_json())["largest"]:
        assert task["id"] in page
    a_links, b_links = links(page, "/run/a/episode/episodes/"), links(page, "/run/b/episode/episodes/")
    assert len(a_links) == len(b_links) == 4
    assert web.get(b_links[0]).status_code == 200 and "/run/b/episodes" in web.get("/run/b").text


def test_compare_reads_a_training_runs_latest_evaluation(train_run, model_run):
    page = client(train_run, model_run).get("/compare").text
    assert "held-out evaluation, step 4" in page and "share no scored task" in page


def test_a_malformed_address_is_a_404_page(gui_run):
    web = client(gui_run)
    for url in ["/run/a/episode/episodes/first", "/run/a/group/x/0"]:
        missing = web.get(url)
        assert missing.status_code == 404 and "<h1>404</h1>" in missing.text, url


def test_a_page_that_fails_says_so_and_the_others_go_on(gui_run, monkeypatch):
    from agentgym.view import app

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(app, "breakdown", broken)
    web = TestClient(create_app([gui_run], refresh_seconds=0), raise_server_exceptions=False)
    failed = web.get("/run/a")
    assert failed.status_code == 500 and "RuntimeError: a bug" in failed.text
    assert failed.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert web.get("/run/a/episodes").status_code == 200
