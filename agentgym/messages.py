"""Chat messages: what an environment shows an agent and what the agent answers."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["system", "user", "assistant", "tool"]


class TextPart(BaseModel):
    """A piece of text inside a message."""

    model_config = ConfigDict(frozen=True)
    type: Literal["text"] = "text"
    text: str


class ImagePart(BaseModel):
    """An image inside a message, as base64 data (PNG unless ``mime_type`` says otherwise)."""

    model_config = ConfigDict(frozen=True)
    type: Literal["image"] = "image"
    data: str
    mime_type: str = "image/png"


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ToolCall(BaseModel):
    """A call of one tool by name with keyword arguments, as parsed from the agent's text."""

    model_config = ConfigDict(frozen=True)
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Message(BaseModel):
    """One chat message; ``content`` is plain text or a list of text and image parts."""

    model_config = ConfigDict(frozen=True)
    role: Role
    content: str | list[ContentPart]
    tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls the assistant made in this message (assistant messages only)."""
    tool_call_id: str | None = None
    """The call this message answers (tool messages only)."""
    name: str | None = None
    """The tool that produced this message (tool messages only)."""

    @property
    def text(self) -> str:
        """The message's text, with image parts left out."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, TextPart))

    @property
    def images(self) -> list[ImagePart]:
        """The message's image parts, in order."""
        return [] if isinstance(self.content, str) else [p for p in self.content if isinstance(p, ImagePart)]

    def to_openai(self) -> dict[str, Any]:
        """The message in the OpenAI chat-completions format."""
        out: dict[str, Any] = {"role": self.role}
        if isinstance(self.content, str):
            out["content"] = self.content
        else:
            out["content"] = [
                {"type": "text", "text": p.text}
                if isinstance(p, TextPart)
                else {"type": "image_url", "image_url": {"url": f"data:{p.mime_type};base64,{p.data}"}}
                for p in self.content
            ]
        if self.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                for c in self.tool_calls
            ]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out
