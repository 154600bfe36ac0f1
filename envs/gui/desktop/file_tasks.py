"""Tasks in the file manager (PCManFM, a detailed list of name, size and type): rename files, move files into a
folder, create folders, delete files and open a file in the editor; and one in the terminal: make a script
executable and run it.

The oracle clicks the rows of the list where the file manager, full screen, draws them: folders first, then
files, each in alphabetical order (the generated names make that order plain), one row per
:data:`ROW_HEIGHT` pixels from :data:`FIRST_ROW`."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from agentgym.envs.gui.desktop.content import FOLDERS, STEMS, filler, names
from agentgym.envs.gui.desktop.episode import (
    FILE_MANAGER,
    TERMINAL,
    Episode,
    State,
    Step,
    click,
    double_click,
    drag,
    key,
    typed,
)
from agentgym.seeding import pick

NAME_X = 260
"""Pixels from the left of the screen to a point on every file's name."""
FIRST_ROW = 129
"""Pixels from the top of the screen to the middle of the first row."""
ROW_HEIGHT = 28


class FolderView:
    """The list the file manager shows of one folder, as the oracle predicts it while it works."""

    def __init__(self, files: Iterable[str], folders: Iterable[str] = ()) -> None:
        self.files, self.folders = set(files), set(folders)

    def row(self, name: str) -> tuple[int, int]:
        """Where to click on ``name``'s row."""
        order = sorted(self.folders) + sorted(self.files)
        return NAME_X, FIRST_ROW + ROW_HEIGHT * order.index(name)


def _here(files: dict[str, str], folder: str = "") -> list[str]:
    """The names of the files directly in ``folder`` (relative to /work)."""
    prefix = f"{folder}/" if folder else ""
    return [path[len(prefix):] for path in files if path.startswith(prefix) and "/" not in path[len(prefix):]]


def _moved(state: State, old: str, new: str, text: str) -> float:
    """1 when ``old`` is now ``new`` (same text), a half when ``new`` is there but so is ``old``."""
    if state.files.get(new) != text:
        return 0.0
    return 0.5 if old in state.files else 1.0


def rename_files(rng: np.random.Generator, difficulty: str) -> Episode:
    """Rename a file (medium: two files; hard: a file inside a subfolder) in the file manager."""
    stems = names(rng, STEMS, 10)
    folder = pick(rng, FOLDERS)
    where = folder if difficulty == "hard" else ""
    files = {f"{stem}{pick(rng, ('.txt', '.md', '.csv'))}": filler(rng) for stem in stems[:5]}
    files |= {f"{folder}/{stem}.txt": filler(rng) for stem in stems[5:8]}
    here = _here(files, where)
    olds = [here[int(i)] for i in rng.permutation(len(here))[: 2 if difficulty == "medium" else 1]]
    pairs = [(old, stem + old[old.index("."):]) for old, stem in zip(olds, stems[8:], strict=False)]
    full = [(f"{where}/{old}" if where else old, f"{where}/{new}" if where else new) for old, new in pairs]
    view = FolderView(here, [] if where else [folder])
    plan: list[Step] = [double_click(FolderView([], [folder]).row(folder))] if where else []
    for old, new in pairs:
        plan += [click(view.row(old)), key("F2"), key("ctrl+a"), *typed(new), key("Enter")]
        view.files = (view.files - {old}) | {new}

    def check(state: State) -> list[float]:
        return [_moved(state, old, new, files[old]) for old, new in full]

    where_said = f" in the folder /work/{folder}" if where else ""
    what = " and ".join(f"{old} to {new}" for old, new in pairs)
    return Episode(
        instruction=f"In the file manager, rename {what}{where_said}.",
        files=files, apps=(FILE_MANAGER,), check=check, changes=frozenset(old for old, _ in full),
        plan=(*plan, ("done", {})),
    )


def move_files(rng: np.random.Generator, difficulty: str) -> Episode:
    """Move a named file (easy), every CSV file (medium), or every log file into a folder still to be made
    (hard) in the file manager."""
    stems = names(rng, STEMS, 9)
    folders = names(rng, FOLDERS, 3)
    target = folders[0]
    kinds = {"easy": (".txt",) * 3 + (".md",) * 3, "medium": (".csv",) * 3 + (".txt", ".md", ".md"),
             "hard": (".log",) * 3 + (".txt", ".csv", ".md")}[difficulty]
    files = {f"{stem}{kind}": filler(rng) for stem, kind in zip(stems, kinds, strict=False)}
    files |= {f"{folder}/{stem}.txt": filler(rng) for folder, stem in zip(folders[1:], stems[6:], strict=False)}
    here = _here(files)
    if difficulty == "easy":
        moving = [pick(rng, sorted(here))]
        what = moving[0]
    else:
        extension = kinds[0]
        moving = sorted(name for name in here if name.endswith(extension))
        what = f"every {extension} file of /work"
    existing = folders[1:] if difficulty == "hard" else folders
    view = FolderView(here, existing)
    plan: list[Step] = []
    if difficulty == "hard":
        plan += [key("ctrl+shift+n"), *typed(target), key("Enter")]
        view.folders.add(target)
    for name in moving:
        plan.append(drag(view.row(name), view.row(target)))
        view.files.discard(name)

    def check(state: State) -> list[float]:
        return [_moved(state, name, f"{target}/{name}", files[name]) for name in moving]

    made = f"a new folder /work/{target}" if difficulty == "hard" else f"the folder /work/{target}"
    return Episode(
        instruction=f"In the file manager, move {what} into {made}.",
        files=files, dirs=tuple(existing), apps=(FILE_MANAGER,), check=check, changes=frozenset(moving), plan=(*plan, ("done", {})),
    )


def create_folders(rng: np.random.Generator, difficulty: str) -> Episode:
    """Create a folder (medium: two; hard: one inside another) in the file manager."""
    stems = names(rng, STEMS, 4)
    new = names(rng, FOLDERS, 3)
    files = {f"{stem}.txt": filler(rng) for stem in stems}
    if difficulty == "hard":
        wanted = [new[0], f"{new[0]}/{new[1]}"]
        what = f"a folder /work/{new[0]} and, inside it, a folder {new[1]}"
    else:
        wanted = new[: 2 if difficulty == "medium" else 1]
        what = " and ".join(f"a folder /work/{name}" for name in wanted)
    plan: list[Step] = []
    for index, path in enumerate(wanted):
        if difficulty == "hard" and index:
            plan.append(double_click(FolderView(files, [new[0]]).row(new[0])))
        plan += [key("ctrl+shift+n"), *typed(path.rpartition("/")[2]), key("Enter")]

    def check(state: State) -> list[float]:
        return [float(path in state.dirs) for path in wanted]

    return Episode(instruction=f"In the file manager, create {what}.", files=files, apps=(FILE_MANAGER,),
                   check=check, plan=(*plan, ("done", {})))


def delete_files(rng: np.random.Generator, difficulty: str) -> Episode:
    """Delete a named file (easy), every .tmp file (medium) or every empty file (hard) in the file manager."""
    stems = names(rng, STEMS, 8)
    if difficulty == "hard":
        files = {f"{stem}{pick(rng, ('.txt', '.md'))}": "" if index < 3 else filler(rng)
                 for index, stem in enumerate(stems)}
        doomed = sorted(name for name, text in files.items() if not text)
        what = "every empty file (0 bytes) in /work"
    else:
        kinds = (".tmp",) * 3 + (".txt", ".txt", ".md", ".csv", ".md")
        files = {f"{stem}{kind}": filler(rng) for stem, kind in zip(stems, kinds, strict=True)}
        tmp = sorted(name for name in files if name.endswith(".tmp"))
        doomed = [pick(rng, sorted(files))] if difficulty == "easy" else tmp
        what = doomed[0] if difficulty == "easy" else "every .tmp file in /work"
    view = FolderView(files)
    plan: list[Step] = []
    for name in doomed:
        plan += [click(view.row(name)), key("Delete")]
        view.files.discard(name)

    def check(state: State) -> list[float]:
        return [float(name not in state.files) for name in doomed]

    return Episode(instruction=f"In the file manager, delete {what}. Delete nothing else.", files=files,
                   apps=(FILE_MANAGER,), check=check, changes=frozenset(doomed), plan=(*plan, ("done", {})))


def open_file(rng: np.random.Generator, difficulty: str) -> Episode:
    """Open a file in the text editor from the file manager: a text file in /work (easy), one in a subfolder
    (medium), or a Markdown or CSV file two folders down (hard). Checked on the application's state: the
    editor's window must show that file."""
    stems = names(rng, STEMS, 10)
    outer, inner, spare = names(rng, FOLDERS, 3)
    levels = ["", outer, f"{outer}/{inner}"]
    files = {f"{level}/{stem}{pick(rng, ('.txt', '.md', '.csv'))}".lstrip("/"): filler(rng)
             for index, level in enumerate(levels) for stem in stems[1 + 3 * index:4 + 3 * index]}
    depth = {"easy": 0, "medium": 1, "hard": 2}[difficulty]
    name = f"{stems[0]}{pick(rng, ('.md', '.csv')) if difficulty == 'hard' else '.txt'}"
    path = f"{levels[depth]}/{name}".lstrip("/")
    files[path] = filler(rng)
    subfolders = {levels[0]: [outer, spare], levels[1]: [inner], levels[2]: []}
    plan: list[Step] = []
    for at, level in enumerate(levels[: depth + 1]):
        opened = name if at == depth else levels[at + 1].rpartition("/")[2]
        plan.append(double_click(FolderView(_here(files, level), subfolders[level]).row(opened)))
    title = f"~/{path} - Mousepad"

    def check(state: State) -> list[float]:
        return [float(any(window.lstrip("*") == title for window in state.windows))]

    return Episode(instruction=f"In the file manager, open /work/{path} in the text editor.", files=files,
                   dirs=(spare,), apps=(FILE_MANAGER,), check=check, plan=(*plan, ("done", {})))


def run_script(rng: np.random.Generator, difficulty: str) -> Episode:
    """Make a shell script executable and run it in the terminal (medium: with an argument; hard: a script in a
    subfolder, run from /work with an argument); the script writes result.txt in the current folder."""
    token = "".join(pick(rng, "ABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(8))
    stem = pick(rng, STEMS)
    path = f"tools/{stem}.sh" if difficulty == "hard" else f"{stem}.sh"
    argument = "" if difficulty == "easy" else pick(rng, FOLDERS)
    wanted = f"{argument}-{token}" if argument else token
    script = (f'#!/bin/sh\n# Writes the report token into result.txt in the current folder.\n'
              f'echo "{"$1-" if argument else ""}{token}" > result.txt\n')
    files = {path: script, **{f"{s}.txt": filler(rng) for s in names(rng, STEMS, 3) if s != stem}}
    with_argument = f" with the argument {argument}" if argument else ""

    def check(state: State) -> list[float]:
        runnable = bool(state.modes.get(path, 0) & 0o100)
        return [float(runnable), float((state.files.get("result.txt") or "").strip() == wanted)]

    return Episode(
        instruction=(f"In the terminal, make /work/{path} executable and run it from /work{with_argument}; it "
                     "writes /work/result.txt."),
        files=files, apps=(TERMINAL,), check=check,
        plan=(*typed(f"chmod +x {path} && ./{path}{' ' + argument if argument else ''}\n"), ("done", {})),
    )
