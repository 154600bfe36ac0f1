"""``agentgym view RUN_DIR [RUN_DIR_B]``: serve the viewer on this machine until Ctrl-C."""

from __future__ import annotations

import errno
import importlib.util
import socket
from pathlib import Path

import click

from agentgym.view.runs import NotARun

DEFAULT_PORT = 8700


@click.command("view")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path), metavar="RUN_DIR [RUN_DIR_B]")
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True,
              help="Port to listen on (0: a free one, printed).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to listen on; the default serves this machine only.")
def view_command(run_dirs: tuple[Path, ...], port: int, host: str) -> None:
    """Browse a run in the web browser: an evaluation's folder (agentgym eval --out) or a training run's
    (agentgym train), its curves, episodes turn by turn with their screens, tokens coloured by logprob, groups;
    with two runs, the tasks one solved and the other did not. New episodes show as the run writes them."""
    if len(run_dirs) > 2:
        raise click.UsageError(f"view one run or two, not {len(run_dirs)}")
    missing = [name for name in ("fastapi", "uvicorn", "jinja2") if importlib.util.find_spec(name) is None]
    if missing:
        raise click.UsageError(f"agentgym view needs {', '.join(missing)}: pip install 'agentgym[view]'")
    import uvicorn

    from agentgym.view.app import create_app

    try:
        app = create_app(run_dirs)
    except NotARun as exc:
        raise click.UsageError(str(exc)) from None
    listener = listen_on(host, port)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"agentgym view: http://{shown}:{listener.getsockname()[1]}/ (Ctrl-C stops it)", err=False)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    try:
        server.run(sockets=[listener])
    finally:
        listener.close()
    if server.should_exit:  # stopped by a signal, however uvicorn passed it on (SIGTERM, SIGHUP: 128 + theirs)
        raise SystemExit(130)


def listen_on(host: str, port: int) -> socket.socket:
    """A socket listening on ``host:port`` (uvicorn serves it), or a usage error that says why it cannot be."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise click.UsageError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            raise click.UsageError(f"--port {port}: {host}:{port} is in use; choose another port, "
                                   "or --port 0 for a free one") from None
        raise click.UsageError(f"--host {host} --port {port}: cannot listen there ({exc.strerror})") from None
    listener.listen(128)  # connections wait in the backlog from the moment the URL is printed
    return listener
