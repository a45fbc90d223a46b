"""Wire shapes of /v1/agents/repos and /v1/agents/coding (camelCase on the wire)."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema
from pydantic import ConfigDict

from agents_site.schemas import REF_PATTERN, BodySchema, choice, id_field, minted_pattern, required_in_docs, text
from agents_site.vocabulary import CodingTool

# The service strips surrounding whitespace before it checks a name (coding.selectors.NAME_RE).
_NAME = r"^\s*[A-Za-z0-9][A-Za-z0-9._-]{0,99}\s*$"
_NAME_DOC = "1–100 letters, digits, `.`, `_` or `-`, starting with a letter or digit."


class RepoIn(BodySchema):
    """Body of POST /v1/agents/repos (`owner` + `name`, or `repo` "owner/name") and of PATCH."""

    repo: str | None = text(description="`owner/name` (instead of `owner` and `name`).")
    owner: str | None = text(description="Ignored on PATCH (a repository keeps its owner/name).")
    name: str | None = text(description="Ignored on PATCH (a repository keeps its owner/name).")
    cloneUrl: str | None = None
    defaultBranch: str | None = None
    credential: str | None = None


class RepoCreateIn(RepoIn):
    """Body of POST /v1/agents/repos: `owner` + `name` (or `repo` "owner/name"), `cloneUrl`."""

    owner: str | None = text(description=_NAME_DOC, pattern=_NAME)
    name: str | None = text(description=_NAME_DOC, pattern=_NAME)


class RepoOut(Schema):
    """A registered repository. `credential` is the name of a granted credential, never its value."""

    id: str
    repo: str
    owner: str
    name: str
    cloneUrl: str
    defaultBranch: str
    credential: str
    createdAt: str
    updatedAt: str


class RepoListOut(Schema):
    repos: list[RepoOut]


class RepoDeletedOut(Schema):
    deleted: bool
    repo: str


class CodingIn(BodySchema):
    """Body of POST /v1/agents/coding: one autonomous coding run against a registered repo."""

    model_config = ConfigDict(json_schema_extra=required_in_docs("prompt", "repo"))

    prompt: str | None = text(description="What to do, at most 128 KiB of UTF-8; not blank.", pattern=r"\S")
    repo: str | None = text(description="`owner/name` of a repository registered in the org.")
    project: str | None = None
    base: str | None = None
    after: str | None = None
    agentRef: str | None = id_field(REF_PATTERN, description="Name or id of one of the org's agents whose model and instructions drive the run.")
    targetId: str | None = id_field(minted_pattern("tgt"), description="Id of a registered machine of the org to run on (`tgt_` and 32 hex digits).")
    timeoutSeconds: int | None = None
    tool: str | None = choice(CodingTool, description="The engine (default `dev`).")
    replyConversationId: str | None = id_field(minted_pattern("conv"), description="A conversation of the org (`conv_` and 32 hex digits): the run's summary is appended to it as an assistant turn when the run ends (404 when unknown).")
    desktop: Any = Field(None, description="Not supported here: any value is refused with 400.")
    replyChannel: Any = Field(None, description="Not supported here: any value is refused with 400.")
    replyThread: Any = Field(None, description="Not supported here: any value is refused with 400.")
    webhook: str | None = Field(None, description=(
        "A URL to POST this run's `run.finished` event to: it must fall under one of the org's webhook endpoints, else 400."))


class CodingStartedOut(Schema):
    """202 answer: the run's handle (its session id) and where its work lands."""

    sessionId: str
    runId: str
    branch: str
    repo: str
    routed: bool
    targetId: str


class CodingRunOut(Schema):
    """A coding run's record: its branch, commits and the push."""

    runId: str
    sessionId: str
    repo: str
    branch: str
    base: str
    after: str
    status: str
    changed: bool
    pushed: bool
    commitSha: str
    diffstat: str
    commits: list[dict]
    targetId: str
    error: str
    createdAt: str
    replyConversationId: str
