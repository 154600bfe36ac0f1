"""``agentgym sandbox exec|reap`` on the command line: output, exit status, 124 on timeout, 2 on bad usage."""

from __future__ import annotations

from tests.core.test_cli import agentgym


def test_exec_prints_the_output_and_exits_with_the_commands_status(backend):
    done = agentgym("sandbox", "exec", "--backend", backend, "--", "python3", "-c",
                    "import sys; print(6 * 7); print('note', file=sys.stderr); sys.exit(7)")
    assert (done.returncode, done.stdout, done.stderr) == (7, "42\n", "note\n")


def test_exec_exits_124_when_the_command_times_out(backend):
    done = agentgym("sandbox", "exec", "--backend", backend, "--timeout", "1", "--", "sleep", "30")
    assert done.returncode == 124


def test_bad_usage_exits_2_naming_the_problem():
    done = agentgym("sandbox", "exec", "--backend", "podman", "--", "true")
    assert done.returncode == 2 and "podman" in done.stderr


def test_reap_reports_what_it_removed(backend):
    done = agentgym("sandbox", "reap")
    assert done.returncode == 0 and done.stdout.startswith("removed ")
