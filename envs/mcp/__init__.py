"""Environments made of MCP servers (``agentgym[mcp]``): the adapter (:mod:`agentgym.envs.mcp.env`) and its client
(:mod:`agentgym.envs.mcp.client`), and ``mcp/IssueTracker-v0``, whose example server is written with the ``mcp``
SDK (``tracker_server.py``)."""

from __future__ import annotations


def register_mcp_envs() -> None:
    """Register the MCP environments; without the ``mcp`` package they are listed as unavailable."""
    from agentgym.registration import register

    register(
        "mcp/IssueTracker-v0",
        "agentgym.envs.mcp.tracker:IssueTrackerEnv",
        tags=("mcp", "tools", "sandbox", "multi-turn"),
        description="Triage a project's issues through an MCP issue-tracker server's tools, then submit.",
        requires=("mcp",),
        extra="mcp",
    )
