"""Software-engineering tasks: real Python projects with injected bugs, fixed in docker sandboxes and graded by their
own tests, in the SWE-bench format (``swe/Repos-v0``, the bundled instances; ``swe/Instances-v0``, your own)."""

from agentgym.registration import register

SWE = {"tags": ("swe", "code", "sandbox", "multi-turn"), "requires": ("docker",), "extra": "docker"}


def register_swe_envs() -> None:
    """Register the SWE environments."""
    register("swe/Repos-v0", "agentgym.envs.swe.env:SweEnv", **SWE,
             description="Fix a bug injected into a real Python project so that its tests pass, then submit.")
    register("swe/Instances-v0", "agentgym.envs.swe.env:SweEnv", **SWE,
             description="Your own SWE-bench-format instances: instances=FILE.jsonl, image=a name or a pattern.")
