#!/usr/bin/env python3
"""The desktop inside the sandbox: start X, the window manager and applications, act on the screen, wait for
it to settle, and read it (the windows, and the frame buffer as a PNG). Python's standard library only; X is
read through libX11 with ctypes and the screen from Xvfb's memory-mapped frame buffer (``-fbdir``).

    desktop session < JSON   start X and the window manager, then each application of {"width", "height",
                             "apps": [{"argv": [...], "geometry": [x, y, width, height], "keys": [...]}]}
                             in turn, waiting for its window and placing it, and when it has "keys" waiting
                             for the screen to settle and pressing each (xdotool's spelling) in it; prints
                             the observation
    desktop act < JSON       run ``xdotool ARGS...`` for each list of ARGS in {"commands": [ARGS, ...],
                             "quiet": SECONDS}, wait for the screen to settle (stay still for SECONDS);
                             prints the observation
    desktop observe          prints the observation: JSON of the mapped windows (top first) and the screen
                             as a base64 PNG
"""

from __future__ import annotations

import base64
import ctypes
import glob
import json
import os
import shutil
import struct
import subprocess
import sys
import time
import zlib

DISPLAY = ":0"
FRAME = "/tmp/fb/Xvfb_screen0"
XDG = "/tmp/xdg"
ENV = {
    "DISPLAY": DISPLAY,
    "HOME": "/work",
    "XDG_CONFIG_HOME": f"{XDG}/config",
    "XDG_CACHE_HOME": f"{XDG}/cache",
    "XDG_DATA_HOME": f"{XDG}/data",
    "XDG_RUNTIME_DIR": f"{XDG}/run",
    "GSETTINGS_BACKEND": "keyfile",
    "GTK_OVERLAY_SCROLLING": "0",
    "NO_AT_BRIDGE": "1",
    "GIO_USE_VFS": "local",
    "GIO_USE_VOLUME_MONITOR": "unix",
    "LANG": "C.UTF-8",
}
"""The applications' environment: settings and caches under /tmp, so that /work holds only the task's files."""
QUIET = 0.12
"""Seconds the frame buffer must stay unchanged for the screen to count as settled."""
START_QUIET = 0.6
"""The same after the applications start (they finish loading, then move the keyboard focus, in idle time)."""
POLL = 0.03
IDLE_CPU = 3_000_000
"""Nanoseconds of running and waiting to run, per poll, below which the processes count as idle."""
_OWN = f"/proc/{os.getpid()}/"
SETTLE_LIMIT = 4.0
"""The longest wait for a settled screen (an animated screen never settles; it is read as it is then)."""
WINDOW_WAIT = 15.0
"""The longest wait for an application's window to appear."""


def session(spec: dict) -> float:
    """Start X, the window manager and the applications of ``spec``, one after the other; return how long the
    screen must then stay still to count as settled (:data:`START_QUIET` unless the last application has
    settled already, before its keys)."""
    for sub in ("config/glib-2.0/settings", "cache", "data", "run", "log"):
        os.makedirs(f"{XDG}/{sub}", mode=0o700, exist_ok=True)
    os.makedirs(os.path.dirname(FRAME), exist_ok=True)
    shutil.copyfile("/etc/desktop/keyfile", f"{XDG}/config/glib-2.0/settings/keyfile")
    _detach(["Xvfb", DISPLAY, "-screen", "0", f"{spec['width']}x{spec['height']}x24", "-fbdir",
             os.path.dirname(FRAME), "-nolisten", "tcp", "-noreset", "-dpi", "96", "-nocursor"], "xvfb")
    display = _until(_open_display, 10.0, "X did not start")
    _detach(["jwm", "-f", "/etc/desktop/jwmrc"], "jwm")
    _until(lambda: _property(display, _root(display), "_NET_SUPPORTING_WM_CHECK"), 10.0,
           "the window manager did not start")
    quiet = START_QUIET
    for app in spec["apps"]:
        before = {w["id"] for w in _windows(display)}
        _detach(app["argv"], os.path.basename(app["argv"][0]))
        window = _until(lambda known=before: next((w["id"] for w in _windows(display) if w["id"] not in known),
                                                  None),
                        WINDOW_WAIT, f"{app['argv'][0]} opened no window within {WINDOW_WAIT:g} s")
        x, y, width, height = app["geometry"]
        _X.XMoveResizeWindow(display, window, x, y, width, height)
        _X.XSync(display, 0)
        if app.get("keys"):
            settle(START_QUIET)  # its window has the focus, and it has finished starting
            act([["key", "--delay", "0", combo] for combo in app["keys"]])
        quiet = QUIET if app.get("keys") else START_QUIET
    _X.XCloseDisplay(display)
    return quiet


def act(commands: list[list[str]]) -> None:
    """Run ``xdotool`` with each argument list in turn; a failure (a bad key name) is reported on stderr with
    exit status 2."""
    for args in commands:
        done = subprocess.run(["xdotool", *args], env={**os.environ, "DISPLAY": DISPLAY}, capture_output=True,
                              text=True, check=False)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            raise SystemExit(2)


def settle(quiet: float = QUIET) -> bytes:
    """The frame buffer once it has stayed the same, and the processes idle, for ``quiet`` seconds (or at the
    time limit): an application still working (saving a file, reading a folder) has not settled."""
    started = time.monotonic()
    deadline = started + SETTLE_LIMIT
    last, busy, since = _frame(), _activity(), started
    while time.monotonic() < deadline:
        time.sleep(POLL)
        now, active = _frame(), _activity()
        if now != last or active - busy > IDLE_CPU:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
        busy = active
    if os.environ.get("DESKTOP_DEBUG"):
        sys.stderr.write(f"settled in {time.monotonic() - started:.3f} s\n")
    return last


def _activity() -> int:
    """Nanoseconds that every thread in the sandbox but this one has spent running or waiting to run, and that
    the sandbox has spent held back by its CPU limit (a thread starved of CPU is not idle)."""
    total = _throttled()
    for path in glob.glob("/proc/[0-9]*/task/[0-9]*/schedstat"):
        if not path.startswith(_OWN):
            try:
                with open(path) as f:
                    running, waiting, _ = f.read().split(maxsplit=2)
                total += int(running) + int(waiting)
            except (OSError, ValueError):
                pass
    return total


def observe(frame: bytes) -> None:
    """Print the windows and ``frame`` as JSON."""
    display = _open_display()
    if display is None:
        raise SystemExit("X is not running")
    windows = _windows(display)
    _X.XCloseDisplay(display)
    json.dump({"windows": windows, "png": base64.b64encode(_png(frame)).decode()}, sys.stdout)


def _throttled() -> int:
    """Nanoseconds the sandbox's cgroup has been throttled by its CPU limit (cgroup v1 or v2; 0 if unknown)."""
    for path, field, scale in (("/sys/fs/cgroup/cpu/cpu.stat", "throttled_time", 1),
                               ("/sys/fs/cgroup/cpu.stat", "throttled_usec", 1000)):
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == field:
                        return int(value) * scale
        except (OSError, ValueError):
            continue
    return 0


# -- X through libX11 ---------------------------------------------------------------------------------------

_X = ctypes.cdll.LoadLibrary("libX11.so.6")
_X.XOpenDisplay.restype = ctypes.c_void_p
_X.XOpenDisplay.argtypes = [ctypes.c_char_p]
_X.XDefaultRootWindow.restype = ctypes.c_ulong
_X.XDefaultRootWindow.argtypes = [ctypes.c_void_p]
_X.XInternAtom.restype = ctypes.c_ulong
_X.XInternAtom.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
_X.XGetWindowProperty.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_long, ctypes.c_long,
                                  ctypes.c_int, ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong),
                                  ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_ulong),
                                  ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.c_void_p)]
_X.XFree.argtypes = [ctypes.c_void_p]
_X.XTranslateCoordinates.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_int, ctypes.c_int,
                                     ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                                     ctypes.POINTER(ctypes.c_ulong)]
_X.XQueryTree.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(ctypes.c_ulong),
                          ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(ctypes.POINTER(ctypes.c_ulong)),
                          ctypes.POINTER(ctypes.c_uint)]
_X.XSetErrorHandler.argtypes = [ctypes.c_void_p]
_X.XMoveResizeWindow.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.c_int, ctypes.c_int, ctypes.c_uint,
                                 ctypes.c_uint]
_X.XSync.argtypes = [ctypes.c_void_p, ctypes.c_int]
_X.XCloseDisplay.argtypes = [ctypes.c_void_p]
_ERROR_HANDLER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)(lambda display, event: 0)
_X.XSetErrorHandler(ctypes.cast(_ERROR_HANDLER, ctypes.c_void_p))
IS_VIEWABLE = 2


class _Attributes(ctypes.Structure):
    _fields_ = [("x", ctypes.c_int), ("y", ctypes.c_int), ("width", ctypes.c_int), ("height", ctypes.c_int),
                ("border_width", ctypes.c_int), ("depth", ctypes.c_int), ("visual", ctypes.c_void_p),
                ("root", ctypes.c_ulong), ("class_", ctypes.c_int), ("bit_gravity", ctypes.c_int),
                ("win_gravity", ctypes.c_int), ("backing_store", ctypes.c_int), ("backing_planes", ctypes.c_ulong),
                ("backing_pixel", ctypes.c_ulong), ("save_under", ctypes.c_int), ("colormap", ctypes.c_ulong),
                ("map_installed", ctypes.c_int), ("map_state", ctypes.c_int), ("all_event_masks", ctypes.c_long),
                ("your_event_mask", ctypes.c_long), ("do_not_propagate_mask", ctypes.c_long),
                ("override_redirect", ctypes.c_int), ("screen", ctypes.c_void_p)]


_X.XGetWindowAttributes.argtypes = [ctypes.c_void_p, ctypes.c_ulong, ctypes.POINTER(_Attributes)]


def _open_display() -> int | None:
    return _X.XOpenDisplay(DISPLAY.encode()) or None


def _root(display: int) -> int:
    return _X.XDefaultRootWindow(display)


def _property(display: int, window: int, name: str) -> bytes | list[int] | None:
    """A window property: bytes for 8-bit data, a list of numbers for 32-bit data, ``None`` when unset."""
    kind, fmt, count, after = ctypes.c_ulong(), ctypes.c_int(), ctypes.c_ulong(), ctypes.c_ulong()
    data = ctypes.c_void_p()
    atom = _X.XInternAtom(display, name.encode(), 0)
    status = _X.XGetWindowProperty(display, window, atom, 0, 1 << 16, 0, 0, ctypes.byref(kind), ctypes.byref(fmt),
                                   ctypes.byref(count), ctypes.byref(after), ctypes.byref(data))
    if status != 0 or not data.value:
        return None
    try:
        if fmt.value == 8:
            return ctypes.string_at(data.value, count.value)
        if fmt.value == 32:
            return list((ctypes.c_ulong * count.value).from_address(data.value))
        return None
    finally:
        _X.XFree(data)


def _windows(display: int) -> list[dict]:
    """The mapped application windows and popups, top of the stack first, with their place on the screen."""
    root = _root(display)
    active = (_property(display, root, "_NET_ACTIVE_WINDOW") or [0])[0]
    found = []
    for window in reversed(_property(display, root, "_NET_CLIENT_LIST_STACKING") or []):
        box = _box(display, root, window)
        if box is not None:
            name = _property(display, window, "_NET_WM_NAME") or _property(display, window, "WM_NAME") or b""
            found.append({"id": window, "title": name.decode(errors="replace"), "focused": window == active,
                          "popup": False, **box})
    for window in _popups(display, root):
        box = _box(display, root, window)
        if box is not None:
            found.insert(0, {"id": window, "title": "", "focused": False, "popup": True, **box})
    return found


def _box(display: int, root: int, window: int) -> dict | None:
    attributes = _Attributes()
    if not _X.XGetWindowAttributes(display, window, ctypes.byref(attributes)):
        return None
    if attributes.map_state != IS_VIEWABLE or attributes.width < 2 or attributes.height < 2:
        return None
    x, y, child = ctypes.c_int(), ctypes.c_int(), ctypes.c_ulong()
    _X.XTranslateCoordinates(display, window, root, 0, 0, ctypes.byref(x), ctypes.byref(y), ctypes.byref(child))
    return {"x": x.value, "y": y.value, "width": attributes.width, "height": attributes.height}


def _popups(display: int, root: int) -> list[int]:
    """Mapped override-redirect children of the root (menus, completion lists), bottom first."""
    parent, back = ctypes.c_ulong(), ctypes.c_ulong()
    children, count = ctypes.POINTER(ctypes.c_ulong)(), ctypes.c_uint()
    if not _X.XQueryTree(display, root, ctypes.byref(back), ctypes.byref(parent), ctypes.byref(children),
                         ctypes.byref(count)):
        return []
    windows = [children[i] for i in range(count.value)]
    if children:
        _X.XFree(children)
    popups = []
    for window in windows:
        attributes = _Attributes()
        if (_X.XGetWindowAttributes(display, window, ctypes.byref(attributes)) and attributes.override_redirect
                and attributes.map_state == IS_VIEWABLE and attributes.width > 8 and attributes.height > 8):
            popups.append(window)
    return popups


# -- the frame buffer ---------------------------------------------------------------------------------------

_HEADER = struct.Struct(">25I")


def _frame() -> bytes:
    with open(FRAME, "rb") as f:
        return f.read()


def _png(frame: bytes) -> bytes:
    """Xvfb's XWD frame buffer (24-bit colour in 32-bit pixels) as an RGB PNG."""
    fields = _HEADER.unpack_from(frame)
    header_size, width, height = fields[0], fields[4], fields[5]
    byte_order, bits_per_pixel, bytes_per_line, colours = fields[7], fields[11], fields[12], fields[19]
    if bits_per_pixel != 32:
        raise SystemExit(f"unexpected frame buffer: {bits_per_pixel} bits per pixel")
    start = header_size + 12 * colours
    pixels = frame[start:start + bytes_per_line * height]
    if bytes_per_line != width * 4:
        pixels = b"".join(pixels[row * bytes_per_line:row * bytes_per_line + width * 4] for row in range(height))
    red, green, blue = (2, 1, 0) if byte_order == 0 else (1, 2, 3)
    rgb = bytearray(width * height * 3)
    rgb[0::3], rgb[1::3], rgb[2::3] = pixels[red::4], pixels[green::4], pixels[blue::4]
    stride = width * 3
    raw = b"".join(b"\0" + bytes(rgb[row * stride:(row + 1) * stride]) for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))


# -- plumbing -----------------------------------------------------------------------------------------------

def _detach(argv: list[str], log: str) -> None:
    """Start ``argv`` in a session of its own, so that it outlives this command."""
    with open(f"{XDG}/log/{log}.log", "ab") as out:
        subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                         env={**os.environ, **ENV}, cwd="/work")


def _until(check, seconds: float, failure: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    raise SystemExit(failure)


def main(argv: list[str]) -> None:
    command = argv[0] if argv else ""
    quiet = QUIET
    if command == "session":
        quiet = session(json.load(sys.stdin))
    elif command == "act":
        request = json.load(sys.stdin)
        act(request["commands"])
        quiet = request.get("quiet", QUIET)
    elif command != "observe":
        raise SystemExit(f"unknown command {command!r}")
    observe(settle(quiet))


if __name__ == "__main__":
    main(sys.argv[1:])
