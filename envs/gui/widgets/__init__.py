"""GUI tier 1: MiniWoB++-style widget tasks in a Chromium page, played by coordinates on a 480x360 screen.

Each task (``gui/<Task>-v0``, listed in :mod:`agentgym.envs.gui.widgets.tasks`) generates a small page from
the episode's seed, shows its instruction above the widgets, and is scored from the widgets' state when the
agent calls ``done``."""
