"""``agentgym view`` on the command line: bad arguments exit 2 with a reason, ``--port 0`` prints the port it
took and serves until interrupted (exit status 130, as every command Ctrl-C stops)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import urllib.request

import pytest


def view(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentgym", "view", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_a_missing_folder_or_one_that_is_no_run_exits_2(tmp_path, gui_run):
    missing = view(str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "no such folder" in missing.stderr
    empty = view(str(tmp_path))
    assert empty.returncode == 2 and "holds no run" in empty.stderr and "manifest.json" in empty.stderr
    (tmp_path / "file.txt").write_text("x")
    assert view(str(tmp_path / "file.txt")).returncode == 2
    three = view(str(gui_run), str(gui_run), str(gui_run))
    assert three.returncode == 2 and "one run or two" in three.stderr


def test_a_port_in_use_exits_2(gui_run):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        busy = view(str(gui_run), "--port", str(port))
    assert busy.returncode == 2 and f"{port} is in use" in busy.stderr and "--port 0" in busy.stderr


@pytest.mark.timeout(120)
def test_port_0_serves_on_a_free_port_until_interrupted(gui_run, gui_random_run):
    server = subprocess.Popen([sys.executable, "-m", "agentgym", "view", str(gui_run), str(gui_random_run),
                               "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        printed = server.stdout.readline()
        match = re.fullmatch(r"agentgym view: (http://127\.0\.0\.1:(\d+)/) \(Ctrl-C stops it\)\n", printed)
        assert match is not None and int(match[2]) > 0, printed
        with urllib.request.urlopen(match[1], timeout=30) as response:  # / opens the comparison of the two
            assert response.status == 200 and b"Solved by A, not by B" in response.read()
            assert response.url.endswith("/compare")
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 130  # the CLI's exit on Ctrl-C, as agentgym serve's
        assert server.stderr is not None and "Traceback" not in server.stderr.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
