"""LiveProgress: a rich bar on a terminal; plain lines, at a bounded rate, anywhere else."""

from __future__ import annotations

import io
import re
import threading

from rich.console import Console

from agentgym.progress import LiveProgress
from tests.waiting import until


def plain() -> tuple[Console, io.StringIO]:
    printed = io.StringIO()
    return Console(file=printed), printed


def lines(printed: io.StringIO) -> list[str]:
    """The printed lines with their elapsed time left out."""
    return [re.sub(r" \d+:\d\d:\d\d", "", line) for line in printed.getvalue().splitlines()]


def test_off_a_terminal_each_move_prints_a_line_and_the_end_prints_what_is_left():
    console, printed = plain()
    with LiveProgress("train step", 3, console=console, status="waiting") as progress:
        progress.update(advance=1, status="reward 0.1")
        progress.update(advance=1, status="reward 0.2")
        progress.update(status="held-out 50%")  # the count did not move: printed at the end
    assert lines(printed) == [
        "train step 0/3  waiting",
        "train step 1/3  reward 0.1",
        "train step 2/3  reward 0.2",
        "train step 2/3  held-out 50%",
    ]


def test_lines_come_at_most_every_few_seconds_but_always_when_flushed_and_at_the_last():
    console, printed = plain()
    with LiveProgress("agent", 5, console=console, every=3600) as progress:
        progress.update(advance=1)
        progress.update(completed=2, description="env · agent")
        progress.update(status="note", flush=True)
        progress.update(advance=2)
        progress.update(completed=5)
    assert lines(printed) == ["agent 0/5", "env · agent 2/5  note", "env · agent 5/5  note"]


def test_a_heartbeat_line_breaks_a_long_silence_and_its_thread_ends_with_the_progress():
    console, printed = plain()
    with LiveProgress("eval", 2, console=console, status="playing", heartbeat=0.1):
        until(lambda: len(lines(printed)) >= 3, "two heartbeat lines")
        assert "agentgym-progress" in [t.name for t in threading.enumerate()]
    assert lines(printed)[:3] == ["eval 0/2  playing"] + ["eval 0/2  still running"] * 2
    assert "agentgym-progress" not in [t.name for t in threading.enumerate()]


def test_on_a_terminal_it_is_a_bar():
    printed = io.StringIO()
    with LiveProgress("train step", 4, console=Console(file=printed, force_terminal=True, width=100),
                      status="[not markup]") as progress:
        progress.update(advance=3)
    shown = printed.getvalue()
    assert "━" in shown and "3/4" in shown and "[not markup]" in shown
    assert "train step 0/4" not in shown  # no plain line
