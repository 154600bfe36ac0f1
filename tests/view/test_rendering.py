"""What the pages are made of: the safe Markdown subset, token colouring and version spans, the SVG charts."""

from __future__ import annotations

import math

from agentgym.trajectory import Trajectory
from agentgym.view import charts
from agentgym.view.markdown import render, screen_link
from agentgym.view.tokens import (
    FOLD_KEEP,
    probability_bucket,
    ratio_bucket,
    token_texts,
    token_view,
)
from tests.view.records import HOSTILE


def url(name: str) -> str:
    return f"/run/a/screens/episodes/{name}"


def test_markdown_marks_up_only_escaped_text():
    html = str(render(f"# Title {HOSTILE}\n**bold** and `code <b>`\n```\n<pre>{HOSTILE}\n```\n"
                      "![screen](screens/0123abcd.png) ![x](https://example.com/x.png) ![y](screens/../../etc.png)"
                      " [link](javascript:alert(1))", url))
    assert '<span class="h h1">Title &lt;script&gt;' in html
    assert "<strong>bold</strong>" in html and "<code>code &lt;b&gt;</code>" in html
    assert '<pre class="code">&lt;pre&gt;&lt;script&gt;' in html
    assert '<img src="/run/a/screens/episodes/0123abcd.png" alt="screen"' in html
    assert "![x](https://example.com/x.png)" in html and "![y](screens/../../etc.png)" in html  # left as text
    assert "<script" not in html and "<a href" not in html.replace('<a class="screen" href="/run/a/screens/', "")
    assert "<img src=x" not in html


def test_a_screen_part_is_told_from_text():
    assert screen_link("![screen](screens/94ef7af3880ae832.png)") == "94ef7af3880ae832.png"
    assert screen_link("see ![screen](screens/94ef.png)") is None
    assert screen_link("![screen](screens/../x.png)") is None


def test_colour_buckets():
    assert probability_bucket(0.0) == 0 and probability_bucket(math.log(0.6)) == 2
    assert probability_bucket(-20.0) == 7
    assert ratio_bucket(0.0) == 4 and ratio_bucket(-2.0) == 0 and ratio_bucket(2.0) == 8
    assert ratio_bucket(0.2) == 6 and ratio_bucket(-0.05) == 3


def test_tokens_in_spans_of_one_version_with_their_colours():
    context = 60
    trajectory = Trajectory(env_id="games/Guess-v0", token_ids=list(range(context + 4)),
                            loss_mask=[0] * context + [1, 1, 1, 1],
                            logprobs=[0.0] * context + [-0.01, -0.01, -3.0, -0.5],
                            versions=[-1] * context + [2, 2, 3, 3])
    view = token_view(trajectory, [0.0] * context + [-0.01, -1.0, -3.0, -0.3], None, "no tokenizer")
    context_span, v2, v3 = view.spans
    assert not context_span.agent and len(context_span.folded) == context - FOLD_KEEP
    assert (v2.version, [t.id for t in v2.tokens]) == (2, [context, context + 1])
    assert v3.version == 3 and view.versions == {2: 2, 3: 2} and view.trained
    assert v2.tokens[0].classes == "tok b0 t0 r4" and v2.tokens[1].classes.endswith("r1")
    assert v3.tokens[1].classes.endswith("r6") and view.off_tokens == 2
    assert "[60]" in token_texts(None, [60]) and v2.tokens[0].text == f"[{context}]"
    assert "ratio 1.0000" in v2.tokens[0].title
    untrained = token_view(trajectory, [], None, "")
    assert not untrained.trained and untrained.spans[1].tokens[0].classes == "tok b0"
    page = token_view(trajectory, [], None, "", start=58, shown=4)
    assert (page.start, page.stop, page.total) == (58, 62, 64) and len(page.spans) == 2


def test_charts_escape_their_labels_and_draw_what_they_have():
    curve = str(charts.line_chart(HOSTILE, {HOSTILE: [(1, 0.5), (2, float("nan")), (3, 0.75)]}, unit_range=True))
    assert "<script" not in curve and curve.count("<circle") == 3  # two points and the legend's dot
    assert "no values yet" in str(charts.line_chart("empty", {"a": []}))
    bars = str(charts.bar_chart("success", [("easy", 1.0), (HOSTILE, None)]))
    assert "<script" not in bars and "n/a" in bars and "100%" in bars
