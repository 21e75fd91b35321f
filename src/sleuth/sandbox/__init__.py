"""The per-turn sandbox (spec/sandbox.md): a zygote forks one locked-down child per turn, which runs
the model's code in a persistent REPL with the retrieval SDK bound."""

from sleuth.sandbox.host import Sandbox, SandboxDied, SandboxHost, SandboxUnavailable, StepResult
from sleuth.sandbox.limits import Limits

__all__ = ["Limits", "Sandbox", "SandboxDied", "SandboxHost", "SandboxUnavailable", "StepResult"]
