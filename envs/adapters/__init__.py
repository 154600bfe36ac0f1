"""Environments from other libraries, played as agentgym environments."""
