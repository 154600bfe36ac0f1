"""Where untrusted agent work runs: the Sandbox protocol, its backends and the pool (arriving with the sandbox issue)."""
