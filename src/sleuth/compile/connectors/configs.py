"""Each connector kind's configuration, declared once (issue 41): a pydantic model per kind whose fields
and descriptions check a configuration (`parse_config`, in `kinds.build`), describe the kind to a client
(`GET /api/connectors`: the console's form is drawn from it) and name the CLI's flags. A key a kind does
not have is refused, so a typo never passes silently."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from sleuth.compile.connectors.base import ConnectorConfigError

Glob = Annotated[str, Field(min_length=1)]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    include: list[Glob] = Field(
        default_factory=list, max_length=100, description="Only items matching these globs (`docs/**/*.md`)."
    )


class FolderConfig(_Config):
    path: str = Field(
        min_length=1,
        description="The folder's absolute path, below a folder SLEUTH_CONNECTOR_FOLDERS allows.",
    )


class GitConfig(_Config):
    url: str = Field(min_length=1, description="The repository: https:// (or file:// where allowed).")
    ref: str = Field("main", min_length=1, description="The branch or tag.")


class S3Config(_Config):
    bucket: str = Field(min_length=1, description="The bucket's name.")
    prefix: str = Field("", description="Only keys below this prefix.")
    endpoint_url: str | None = Field(None, min_length=1, description="The endpoint of a non-AWS store.")
    region: str | None = Field(None, min_length=1, description="The bucket's region (us-east-1).")


class WebConfig(_Config):
    urls: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, max_length=1000, description="Page URLs to read."
    )
    sitemap: str | None = Field(None, min_length=1, description="A sitemap whose pages to read.")
    prefix: str | None = Field(None, min_length=1, description="Follow links below this URL.")
    max_pages: int = Field(200, ge=1, description="Pages read at most (200).")
    delay_s: float = Field(1.0, ge=0, le=60, description="Seconds between requests to one host (1.0).")

    @model_validator(mode="after")
    def _somewhere(self) -> WebConfig:
        if not self.urls and not self.sitemap:
            raise ValueError("urls or sitemap: where the pages are")
        return self


@dataclass(frozen=True)
class KindSpec:
    """A connector kind: what it is, its configuration's model, and its credentials (sealed, never
    returned), each with what it means."""

    description: str
    config: type[_Config]
    secret: Mapping[str, str]

    def describe(self) -> dict[str, Any]:
        """The kind as `GET /api/connectors` gives it: each field's meaning, and its type for a form."""
        fields = self.config.model_fields
        return {
            "description": self.description,
            "config": {name: field.description or "" for name, field in fields.items()},
            "types": {name: _form_type(field.annotation) for name, field in fields.items()},
            "secret": dict(self.secret),
        }


def _form_type(annotation: Any) -> Literal["list", "number", "text"]:
    text = str(annotation)
    if text.startswith("list"):
        return "list"
    return "number" if annotation in (int, float) else "text"


KIND_SPECS: dict[str, KindSpec] = {
    "folder": KindSpec(
        "Files below a folder of the server (a mounted share included), polled.", FolderConfig, {}
    ),
    "git": KindSpec(
        "A branch or tag of a git repository; only changed files are fetched again.", GitConfig, {}
    ),
    "s3": KindSpec(
        "Objects below a prefix of an S3-compatible bucket; etags say what changed.",
        S3Config,
        {
            "access_key_id": "without keys: public buckets only, unsigned (unless the operator allows "
            "this machine's AWS credentials: SLEUTH_CONNECTOR_S3_INSTANCE_CREDENTIALS)",
            "secret_access_key": "",
            "session_token": "optional",
        },
    ),
    "web": KindSpec(
        "Web pages: URLs, a sitemap, or the links below a prefix; robots.txt honoured.", WebConfig, {}
    ),
}
KINDS = tuple(KIND_SPECS)


def parse_config(kind: str, config: Mapping[str, Any]) -> _Config:
    """`config` checked against its kind's model; `ConnectorConfigError` naming the first problem."""
    spec = KIND_SPECS.get(kind)
    if spec is None:
        raise ConnectorConfigError(f"kind: {kind!r} is not a connector here; one of {', '.join(KINDS)}")
    try:
        return spec.config.model_validate(dict(config))
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "config"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = (
                f"a {kind} connector has no such field (its fields: {', '.join(spec.config.model_fields)})"
            )
        raise ConnectorConfigError(f"{where}: {message}" if where != "config" else message) from None
