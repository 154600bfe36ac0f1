"""The desktop tasks: each is registered as ``gui/Desktop<Name>-v0`` (entry point
:class:`agentgym.envs.gui.desktop.env.DesktopEnv` with ``task=<name>``). Importing this module starts nothing."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from agentgym.envs.gui.desktop import editor_tasks, file_tasks
from agentgym.envs.gui.desktop.episode import Episode
from agentgym.registration import register

ENTRY_POINT = "agentgym.envs.gui.desktop.env:DesktopEnv"
TAGS = ("gui", "desktop", "sandbox", "multi-turn")


@dataclass(frozen=True)
class DesktopTask:
    """A kind of desktop task: its registered name, a one-line description and its episode generator."""

    name: str
    description: str
    generate: Callable[[np.random.Generator, str], Episode]

    @property
    def env_id(self) -> str:
        """The registered id, ``gui/Desktop<Name>-v0``."""
        return f"gui/Desktop{self.name}-v0"


TASKS: dict[str, DesktopTask] = {task.name: task for task in (
    DesktopTask("WriteFile", "Write given lines in the text editor and save them under a given name.",
                editor_tasks.write_file),
    DesktopTask("ReplaceWords", "Replace every occurrence of a word in a file in the text editor and save it.",
                editor_tasks.replace_words),
    DesktopTask("AddLines", "Append lines to a file, or insert one after a given line, in the text editor.",
                editor_tasks.add_lines),
    DesktopTask("CopyParagraph", "Copy a paragraph from one file to the end of another in the text editor.",
                editor_tasks.copy_paragraph),
    DesktopTask("SortLines", "Sort the lines of a file in the text editor and save it.", editor_tasks.sort_lines),
    DesktopTask("LookUp", "Find a value in one file and write it into another in the text editor.",
                editor_tasks.look_up),
    DesktopTask("RenameFiles", "Rename files in the file manager.", file_tasks.rename_files),
    DesktopTask("MoveFiles", "Move the files a description names into a folder in the file manager.",
                file_tasks.move_files),
    DesktopTask("CreateFolders", "Create folders, one inside another when asked, in the file manager.",
                file_tasks.create_folders),
    DesktopTask("DeleteFiles", "Delete the files a description names, and nothing else, in the file manager.",
                file_tasks.delete_files),
    DesktopTask("OpenFile", "Open a file, perhaps folders down, in the text editor from the file manager.",
                file_tasks.open_file),
    DesktopTask("RunScript", "Make a shell script executable and run it in the terminal.", file_tasks.run_script),
)}
"""Every desktop task by name."""


def register_desktop_envs() -> None:
    """Register each desktop task as ``gui/Desktop<Name>-v0``."""
    for task in TASKS.values():
        register(task.env_id, ENTRY_POINT, kwargs={"task": task.name}, tags=TAGS, requires=("docker",), extra="docker",
                 description=f"A desktop in a sandbox: {task.description[0].lower()}{task.description[1:]}")
