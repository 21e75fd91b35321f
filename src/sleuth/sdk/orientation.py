"""The orientation on demand (issue 43): `orientation()` returns what a turn's model is given as its
system message, so a person building on MCP or `sleuth exec` reads what the model reads.

The text is built once, above the SDK (`agent.orientation.orientation_text`), from the contexts'
names and descriptions the SDK cannot see. So the SDK asks whoever runs it (its `Orienter`): inside a
sandbox, the host answers an `orientation` host function call (a turn with its own settings, `sleuth
exec` with a turn's defaults); in a process that reads versions directly (MCP), the default the agent
registers when it is imported. Never a second copy of the builder.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args

from pydantic import Field

from sleuth.sdk.base import KnowledgeBase
from sleuth.sdk.errors import HostError, LimitError
from sleuth.sdk.primitives import primitive
from sleuth.sdk.scoped import ScopedContext

PromptProfile = Literal["standard", "small"]
ToolProtocol = Literal["native", "text"]
MAX_SYSTEM_PROMPT_CHARS = 16_000  # a turn request's bounds (`agent.request.TurnRequest`)
MAX_GUARDRAILS_CHARS = 8_000
MAX_OUTPUT_CHARS = 100_000

ProfileArg = Annotated[
    PromptProfile | None, Field(description="Prompt profile: standard, or small (small local models).")
]
ProtocolArg = Annotated[
    ToolProtocol | None, Field(description="Tool protocol: native, or text (fenced code).")
]
ToolsArg = Annotated[
    Sequence[str] | None, Field(description="The primitives a session enables (default: all).")
]
SystemPromptArg = Annotated[
    str | None, Field(max_length=MAX_SYSTEM_PROMPT_CHARS, description="A session's system prompt.")
]
GuardrailsArg = Annotated[
    str | None, Field(max_length=MAX_GUARDRAILS_CHARS, description="A session's guardrails.")
]
OutputCharsArg = Annotated[
    int | None,
    Field(ge=1, le=MAX_OUTPUT_CHARS, description="Characters of a step's output shown (1-100,000)."),
]


@dataclass(frozen=True)
class OrientationSettings:
    """The request settings a turn's orientation depends on (its model's prompt profile and tool
    protocol, the session's tools, system prompt and guardrails, the step output limit). None: the
    turn's own inside a turn, else the default a turn would take."""

    profile: PromptProfile | None = None
    protocol: ToolProtocol | None = None
    tools: tuple[str, ...] | None = None
    system_prompt: str | None = None
    guardrails: str | None = None
    max_tool_output_chars: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "protocol": self.protocol,
            "tools": None if self.tools is None else list(self.tools),
            "system_prompt": self.system_prompt,
            "guardrails": self.guardrails,
            "max_tool_output_chars": self.max_tool_output_chars,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OrientationSettings:
        """The settings a host function call carries, checked: code in a sandbox may send anything."""
        unknown = set(data) - set(cls().to_json())
        if unknown:
            raise LimitError(f"unknown orientation setting {sorted(unknown)[0]!r}")
        profile, protocol = data.get("profile"), data.get("protocol")
        if profile is not None and profile not in get_args(PromptProfile):
            raise LimitError(f"profile must be one of {', '.join(get_args(PromptProfile))}")
        if protocol is not None and protocol not in get_args(ToolProtocol):
            raise LimitError(f"protocol must be one of {', '.join(get_args(ToolProtocol))}")
        tools = data.get("tools")
        if tools is not None and (
            isinstance(tools, str)
            or not isinstance(tools, Sequence)
            or not all(isinstance(t, str) for t in tools)
        ):
            raise LimitError("tools must be a list of primitive names")
        texts = (("system_prompt", MAX_SYSTEM_PROMPT_CHARS), ("guardrails", MAX_GUARDRAILS_CHARS))
        for name, most in texts:
            value = data.get(name)
            if value is not None and (not isinstance(value, str) or len(value) > most):
                raise LimitError(f"{name} must be a string of at most {most:,} characters")
        chars = data.get("max_tool_output_chars")
        if chars is not None and (
            not isinstance(chars, int) or isinstance(chars, bool) or not 1 <= chars <= MAX_OUTPUT_CHARS
        ):
            raise LimitError(f"max_tool_output_chars must be an integer from 1 to {MAX_OUTPUT_CHARS}")
        return cls(
            profile,
            protocol,
            None if tools is None else tuple(tools),
            data.get("system_prompt"),
            data.get("guardrails"),
            chars,
        )


Orienter = Callable[[Sequence[ScopedContext], OrientationSettings], Awaitable[str]]
"""(the scoped contexts, the settings) → the system message a turn over them gives its model."""

_DEFAULT: list[Orienter] = []


def set_default_orienter(orienter: Orienter) -> None:
    """The orienter of an SDK built without one in this process (`agent.orientation` registers it)."""
    _DEFAULT[:] = [orienter]


def default_orienter() -> Orienter | None:
    return _DEFAULT[0] if _DEFAULT else None


class Orienting(KnowledgeBase):
    """The orientation primitive; `orienter` is set by whoever builds the SDK (a sandbox: the host)."""

    orienter: Orienter | None = None

    @primitive("search", "facts")
    async def orientation(
        self,
        profile: ProfileArg = None,
        protocol: ProtocolArg = None,
        tools: ToolsArg = None,
        system_prompt: SystemPromptArg = None,
        guardrails: GuardrailsArg = None,
        max_tool_output_chars: OutputCharsArg = None,
    ) -> str:
        """The orientation a model is given over these contexts, word for word: a turn's system message
        (rules, SDK reference, each context's documents, types and tables, instructions). In a turn,
        the turn's own; arguments left None take the turn's, else a turn's defaults."""
        settings = OrientationSettings.from_json(
            {
                "profile": profile,
                "protocol": protocol,
                "tools": None if tools is None else [tools] if isinstance(tools, str) else list(tools),
                "system_prompt": system_prompt,
                "guardrails": guardrails,
                "max_tool_output_chars": max_tool_output_chars,
            }
        )
        orienter = self.orienter or default_orienter()
        if orienter is None:
            raise HostError("the orientation is built by whoever runs the SDK, and nothing here builds it")
        scoped = [ScopedContext(ctx.slug, ctx.root) for ctx in self._contexts.values()]
        return await orienter(scoped, settings)
