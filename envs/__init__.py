"""The environments bundled with agentgym, one subpackage per family (``games``, ``tools``, ``web``, ``gui``,
``miniwob``, ``mcp``, ``swe``)."""

from agentgym.envs.gui.desktop.tasks import register_desktop_envs
from agentgym.envs.gui.widgets.tasks import register_widget_envs
from agentgym.envs.gymnasium.env import GYMNASIUM, register_gymnasium, register_gymnasium_classics
from agentgym.envs.mcp import register_mcp_envs
from agentgym.envs.miniwob import register_miniwob_envs
from agentgym.envs.swe import register_swe_envs
from agentgym.envs.textarena.env import register_textarena_envs
from agentgym.registration import register, register_id_family

WEB = {"requires": ("playwright", "fastapi", "jinja2", "uvicorn", "PIL"), "extra": "web"}
"""What the web and widget environments need beyond agentgym's core (their sites, the browser)."""


def register_envs() -> None:
    """Register the bundled environments (called by the registry on its first lookup)."""
    register(
        "games/FrozenLake-v0",
        "agentgym.envs.games.frozen_lake:FrozenLakeEnv",
        tags=("games", "grid", "multi-turn"),
        description="Walk across a frozen lake to the goal without falling into a hole.",
    )
    register(
        "games/Sokoban-v0",
        "agentgym.envs.games.sokoban:SokobanEnv",
        tags=("games", "grid", "planning", "multi-turn"),
        description="Push every box onto a target in a generated, always solvable warehouse.",
    )
    register(
        "tools/Calculator-v0",
        "agentgym.envs.tools.calculator:CalculatorEnv",
        tags=("tools", "math", "multi-turn"),
        description="Solve an arithmetic word problem with a calculator tool, then answer.",
    )
    register(
        "tools/PythonSandbox-v0",
        "agentgym.envs.tools.python_sandbox:PythonSandboxEnv",
        tags=("tools", "code", "sandbox", "multi-turn"),
        description="Write and run Python in a sandbox to answer a puzzle or a question about data files.",
    )
    register(
        "tools/Shell-v0",
        "agentgym.envs.tools.shell:ShellEnv",
        tags=("tools", "shell", "sandbox", "multi-turn"),
        description="Find, fix and transform files in a sandbox with bash, then submit.",
    )
    register(
        "web/Shop-v0",
        "agentgym.envs.web.shop:ShopEnv",
        tags=("web", "browser", "shopping", "multi-turn"),
        **WEB,
        description="Find the product an instruction describes in a web shop, choose its options and buy it.",
    )
    register(
        "web/Booking-v0",
        "agentgym.envs.web.booking:BookingEnv",
        tags=("web", "browser", "forms", "multi-turn"),
        **WEB,
        description=("Book the hotel stay a request describes through a booking site's search and forms, "
                     "cancelling or changing an existing booking first where asked."),
    )
    register(
        "web/Mail-v0",
        "agentgym.envs.web.mail:MailEnv",
        tags=("web", "browser", "mail", "multi-turn"),
        **WEB,
        description="Read, search, answer, forward and file mail in a webmail client, as a request describes.",
    )
    register_widget_envs()
    register_desktop_envs()
    register_textarena_envs()
    register_miniwob_envs()
    register_mcp_envs()
    register_swe_envs()
    register_id_family(GYMNASIUM, register_gymnasium)
    register_gymnasium_classics()
