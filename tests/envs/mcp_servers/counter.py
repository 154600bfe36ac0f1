"""A counter as an MCP server (stdio), for the tests: a tool that counts, one that never answers in time,
one that kills its own process, and the count as a resource."""

import os
import time

from mcp.server.mcpserver import MCPServer

app = MCPServer("counter")
count = 0


@app.tool()
def increment(by: int = 1) -> str:
    """Add to the counter."""
    global count
    count += by
    return f"The counter is {count}."


@app.tool()
def stall(seconds: float) -> str:
    """Wait, then answer."""
    time.sleep(seconds)
    return "done waiting"


@app.tool()
def crash() -> str:
    """End the server's process at once."""
    os._exit(3)


@app.resource("counter://value")
def value() -> str:
    """The counter."""
    return str(count)


if __name__ == "__main__":
    app.run()
