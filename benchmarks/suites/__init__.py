"""The bundled benchmark suites (data only): one folder per suite version, loaded by :mod:`agentgym.suites`."""
