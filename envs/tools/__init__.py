"""Tool-use environments: the agent calls tools to reach a verifiable answer."""
