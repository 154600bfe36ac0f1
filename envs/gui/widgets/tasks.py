"""The widget tasks, and their registration as ``gui/<Task>-v0`` (importing this module starts no browser)."""

from __future__ import annotations

from agentgym.envs.gui.widgets.choices import (
    ChooseRadio,
    ClickCheckboxes,
    CloseDialog,
    CustomDropdown,
    ExpandSection,
    NavigateTabs,
)
from agentgym.envs.gui.widgets.clicks import (
    ClickButton,
    ClickLink,
    ContextMenu,
    DoubleClickItem,
    ScrollToItem,
)
from agentgym.envs.gui.widgets.pickers import NumberSpinner, PickDate
from agentgym.envs.gui.widgets.pointer import DragToTarget, ReorderList, SetSlider
from agentgym.envs.gui.widgets.task import WidgetTask
from agentgym.envs.gui.widgets.text import (
    CopyPaste,
    EditText,
    EnterPassword,
    EnterText,
    KeyboardForm,
    LoginForm,
    PressShortcut,
)
from agentgym.registration import register

TASKS: dict[str, WidgetTask] = {
    task.name: task
    for task in (
        ClickButton(),
        ClickLink(),
        ClickCheckboxes(),
        ChooseRadio(),
        EnterText(),
        EditText(),
        EnterPassword(),
        LoginForm(),
        KeyboardForm(),
        PressShortcut(),
        CopyPaste(),
        PickDate(),
        NumberSpinner(),
        SetSlider(),
        ReorderList(),
        DragToTarget(),
        NavigateTabs(),
        ExpandSection(),
        CustomDropdown(),
        CloseDialog(),
        ScrollToItem(),
        DoubleClickItem(),
        ContextMenu(),
    )
}
"""Every widget task by name."""
TAGS = ("gui", "widgets", "browser", "multi-turn")


def register_widget_envs() -> None:
    """Register each widget task as ``gui/<Task>-v0``, a :class:`~agentgym.envs.gui.widgets.env.WidgetEnv`."""
    for name, task in TASKS.items():
        register(
            f"gui/{name}-v0",
            "agentgym.envs.gui.widgets.env:WidgetEnv",
            kwargs={"task": name},
            tags=TAGS,
            description=task.description,
            requires=("playwright", "PIL"),
            extra="web",
        )
