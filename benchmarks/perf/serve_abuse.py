"""``agentgym serve`` under abuse: refusal times, the server's peak RSS and how promptly it keeps answering.

Starts ``agentgym serve`` on the tiny model (built in a temporary folder) as a subprocess on a loopback
port and, while a thread polls ``GET /v1/models`` every 0.1 s and another samples the server's RSS
(psutil) every 0.05 s, sends in turn:

1. 20 MB request bodies, ``--bodies`` one after another and as many at once, half with a
   ``Content-Length`` and half chunked: each must be refused (413) in under a second;
2. prompts over the model's context, as many at once: ~3.9 MB of text (under the body limit, refused by
   the character bound before rendering) and conversations just over the 4,096 tokens (rendered,
   tokenised and refused, 400 ``context_length_exceeded``);
3. ``--streams`` streams of 2,000 tokens opened at once and dropped after their first chunk, then the
   engine's CPU use once they are dropped (it should fall to nothing);
4. one streamed 256-token answer: when its first chunk came, and when its last did;
5. Ctrl-C (SIGINT) with a stream open: seconds until the server has exited.

Reports each phase's refusal times, the ``/v1/models`` latencies (median and worst), the server's RSS at
the start and at its peak, and whether the goal holds: every 20 MB body refused in under a second and the
server under 1.5 GiB RSS throughout. Writes ``benchmarks/results/serve_abuse.json``, the last line printed.
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil

from agentgym.models import init_model
from benchmarks.perf.report import RESULTS, load_average, machine, write_result

AGENTGYM = str(Path(sys.executable).with_name("agentgym"))
GOAL = {"refusal_s": 1.0, "peak_rss_mib": 1536}
"""Refuse a 20 MB body in under a second; stay under 1.5 GiB RSS through the abuse."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Sampler(threading.Thread):
    """Calls ``probe`` every ``every`` seconds until stopped, keeping what it returns."""

    def __init__(self, probe: Callable[[], float | None], every: float) -> None:
        super().__init__(daemon=True)
        self.probe, self.every, self.values = probe, every, []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            value = self.probe()
            if value is not None:
                self.values.append(value)
            self.halt.wait(self.every)


def timed(call: Callable[[], httpx.Response]) -> tuple[float, int]:
    started = time.perf_counter()
    response = call()
    return time.perf_counter() - started, response.status_code


def events(response: httpx.Response) -> Iterator[str]:
    for line in response.iter_lines():
        if line.startswith("data: "):
            yield line


def main(args: argparse.Namespace) -> dict[str, Any]:
    load_before = load_average()
    with tempfile.TemporaryDirectory() as folder:
        model = init_model(Path(folder) / "tiny", "tiny", seed=0)
        port = free_port()
        base = f"http://127.0.0.1:{port}/v1"
        server_log = (Path(folder) / "serve.log").open("w")
        process = subprocess.Popen(
            [AGENTGYM, "serve", "--model", str(model), "--port", str(port)],
            stdout=server_log,
            stderr=server_log,
        )
        server = psutil.Process(process.pid)
        try:
            return run_abuse(args, model, base, process, server) | {
                "machine": machine("torch", load_before=load_before, load_after=load_average())
            }
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            server_log.close()


def run_abuse(
    args: argparse.Namespace, model: Path, base: str, process: subprocess.Popen, server: psutil.Process
) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/models", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("agentgym serve did not start") from None
        time.sleep(0.2)
    start_rss = server.memory_info().rss

    def rss() -> float | None:
        try:
            return server.memory_info().rss
        except psutil.NoSuchProcess:
            return None

    poller = httpx.Client(timeout=30)  # one connection: the latency is the server's, not a client's set-up

    def models_latency() -> float | None:
        try:
            return timed(lambda: poller.get(f"{base}/models"))[0]
        except httpx.TransportError:
            return None

    memory, models = Sampler(rss, 0.05), Sampler(models_latency, 0.1)
    memory.start()
    models.start()
    name = model.name
    url = f"{base}/chat/completions"
    content = b"a" * 20_000_000
    body = b'{"model": "%s", "messages": [{"role": "user", "content": "%s"}]}' % (name.encode(), content)
    headers = {"content-type": "application/json"}

    def send_body(index: int) -> tuple[float, int]:
        chunked = index % 2 == 1
        payload = (body[i : i + 2**20] for i in range(0, len(body), 2**20)) if chunked else body
        return timed(lambda: httpx.post(url, content=payload, headers=headers, timeout=120))

    log(f"1. {args.bodies} bodies of 20 MB one after another, then {args.bodies} at once")
    sequential = [send_body(i) for i in range(args.bodies)]
    with ThreadPoolExecutor(args.bodies) as pool:
        concurrent = list(pool.map(send_body, range(args.bodies)))
    bodies = sequential + concurrent

    log(f"2. {args.prompts} prompts of ~3.9 MB and {args.prompts} just over the context, at once")
    huge = {"model": name, "messages": [{"role": "user", "content": "word " * 780_000}], "max_tokens": 8}
    over = {
        "model": name,
        "messages": [{"role": "user", "content": "the weather in Paris is sunny today. " * 245}],
        "max_tokens": 8,
    }

    def send_prompt(index: int) -> tuple[float, int]:
        return timed(lambda: httpx.post(url, json=huge if index % 2 == 0 else over, timeout=120))

    with ThreadPoolExecutor(2 * args.prompts) as pool:
        prompts = list(pool.map(send_prompt, range(2 * args.prompts)))

    log(f"3. {args.streams} streams of 2,000 tokens dropped after their first chunk")
    stream_body = {"model": name, "prompt": "Hello", "seed": 1, "max_tokens": 2000, "stream": True}

    def abandon(index: int) -> float:
        started = time.perf_counter()
        with httpx.stream(
            "POST", f"{base}/completions", json=stream_body | {"seed": index}, timeout=120
        ) as r:
            next(events(r))
        return time.perf_counter() - started

    with ThreadPoolExecutor(args.streams) as pool:
        first_chunks = list(pool.map(abandon, range(args.streams)))
    time.sleep(1.0)  # the engine drops them at its next step
    server.cpu_percent(None)
    time.sleep(2.0)
    idle_cpu = server.cpu_percent(None)

    log("4. one streamed 256-token answer")
    started = time.perf_counter()
    arrivals, tokens = [], 0
    answer = {
        "model": name,
        "prompt": "Hello",
        "seed": 1,
        "max_tokens": 256,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", f"{base}/completions", json=answer, timeout=300) as response:
        for event in events(response):
            arrivals.append(time.perf_counter() - started)
            if event != "data: [DONE]" and json.loads(event[6:]).get("usage"):
                tokens = json.loads(event[6:])["usage"]["completion_tokens"]

    memory.halt.set()
    models.halt.set()
    memory.join()
    models.join()
    poller.close()

    log("5. SIGINT with a stream open")
    with httpx.stream("POST", f"{base}/completions", json=stream_body, timeout=60) as response:
        next(events(response))
        process.send_signal(signal.SIGINT)
        interrupted = time.perf_counter()
        try:
            process.wait(timeout=60)
            sigint_stop_s: float | None = round(time.perf_counter() - interrupted, 2)
        except subprocess.TimeoutExpired:
            sigint_stop_s = None

    mib = 2**20
    body_times = [round(seconds, 3) for seconds, _ in bodies]
    peak = max(memory.values) / mib
    result = {
        "benchmark": "serve_abuse",
        "bodies_20mb": {
            "statuses": sorted({status for _, status in bodies}),
            "seconds": body_times,
            "max_s": max(body_times),
        },
        "prompts_over_context": {
            "statuses": sorted({status for _, status in prompts}),
            "max_s_huge": round(max(s for s, _ in prompts[::2]), 3),
            "max_s_just_over": round(max(s for s, _ in prompts[1::2]), 3),
        },
        "abandoned_streams": {
            "count": args.streams,
            "first_chunk_max_s": round(max(first_chunks), 2),
            "server_cpu_percent_after": idle_cpu,
        },
        "stream_256_tokens": {
            "first_chunk_s": round(arrivals[0], 2),
            "last_chunk_s": round(arrivals[-1], 2),
            "chunks": len(arrivals),
            "tokens": tokens,
        },
        "models_latency_s": {
            "median": round(statistics.median(models.values), 3),
            "max": round(max(models.values), 3),
            "samples": len(models.values),
        },
        "rss_mib": {"start": round(start_rss / mib, 1), "peak": round(peak, 1)},
        "sigint_stop_s": sigint_stop_s,
        "goal": GOAL,
        "meets_goal": max(body_times) < GOAL["refusal_s"] and peak < GOAL["peak_rss_mib"],
        "params": {"bodies": args.bodies, "prompts": args.prompts, "streams": args.streams},
    }
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--bodies", type=int, default=8, help="20 MB bodies sent in a row, then as many at once"
    )
    parser.add_argument(
        "--prompts", type=int, default=8, help="prompts of each kind over the context, at once"
    )
    parser.add_argument("--streams", type=int, default=32, help="streams opened at once and abandoned")
    parser.add_argument("--quick", action="store_true", help="4 bodies, 4 prompts of each kind, 8 streams")
    parser.add_argument("--out", type=Path, default=RESULTS / "serve_abuse.json")
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.bodies, arguments.prompts, arguments.streams = 4, 4, 8
    outcome = main(arguments)
    bodies, rss, stream = outcome["bodies_20mb"], outcome["rss_mib"], outcome["stream_256_tokens"]
    print(
        f"20 MB bodies: {bodies['statuses']} in at most {bodies['max_s']} s; peak RSS {rss['peak']} MiB "
        f"(start {rss['start']}); /v1/models worst {outcome['models_latency_s']['max']} s; first of 256 tokens "
        f"after {stream['first_chunk_s']} s (last {stream['last_chunk_s']} s); SIGINT stop "
        f"{outcome['sigint_stop_s']} s; goal met: {outcome['meets_goal']}"
    )
    write_result(outcome, arguments.out)
