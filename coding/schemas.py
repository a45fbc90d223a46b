"""Wire shapes of /v1/agents/repos and /v1/agents/coding (camelCase on the wire)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from ninja import Field, Schema
from pydantic import ConfigDict, model_validator

from agents_site.errors import InvalidRequest
from agents_site.schemas import REF_PATTERN, BodySchema, choice, id_field, minted_pattern, required_in_docs, text
from agents_site.vocabulary import CodingTool
from coding.git import valid_branch

#: The longest prompt a coding run takes (bytes of UTF-8).
MAX_PROMPT_BYTES = 128 * 1024
#: The longest `project` label (characters, once stripped).
MAX_PROJECT_CHARS = 128
# The public implementation's Slack/desktop narration fields (reference §8.2): refused, not ignored.
UNSUPPORTED_FIELDS = ("desktop", "replyChannel", "replyThread")

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

    @model_validator(mode="after")
    def _check_fields(self) -> CodingIn:
        """Refuse a field no lookup is needed to judge (400 `invalid_request`), and fill the defaults.

        In this order, the first refusal wins: a field of `UNSUPPORTED_FIELDS` the body carried
        ("not supported here") → `tool` (`dev` only: the message names the supported ones) →
        `prompt` (required, at most `MAX_PROMPT_BYTES`) → `project` (at most 128 characters once
        stripped) → `base` (a branch name, not a ref such as `refs/heads/main`) → `timeoutSeconds`
        (1 to `max_timeout_seconds()`). After it: `tool` is a `CodingTool`, `project` and `base`
        are stripped strings ("" for none), `prompt` a non-blank string. What needs the org's
        data (repo, `after`, `agentRef`, `targetId`, `replyConversationId`) `coding_start` judges.
        """
        for name in UNSUPPORTED_FIELDS:
            if name in self.model_fields_set:
                raise InvalidRequest(f"{name} is not supported here: this platform does not narrate runs into Slack or a "
                                     "desktop; use replyConversationId to have the result posted into a conversation")
        self.tool = CodingTool.DEV if self.tool in (None, "") else self.tool
        if self.tool not in CodingTool.values:
            raise InvalidRequest(f"tool {self.tool!r} is not supported; supported: {', '.join(CodingTool.values)}")
        if not isinstance(self.prompt, str) or not self.prompt.strip():
            raise InvalidRequest("prompt is required")
        if len(self.prompt.encode()) > MAX_PROMPT_BYTES:
            raise InvalidRequest("prompt too large")
        self.project = self.project.strip() if isinstance(self.project, str) else ""
        if len(self.project) > MAX_PROJECT_CHARS:
            raise InvalidRequest("project too long")
        self.base = _branch_name(self.base)
        if self.timeoutSeconds is not None and not 1 <= self.timeoutSeconds <= max_timeout_seconds():
            raise InvalidRequest(f"timeoutSeconds must be an integer from 1 to {max_timeout_seconds()}")
        return self


def max_timeout_seconds() -> int:
    """Return the longest time a coding run may ask for (the task queue's timeout less 60 s)."""
    return max(settings.AGENTS_RUN_TIMEOUT_SECONDS - 60, 30)


def _branch_name(value: str | None) -> str:
    """Return branch name `value` stripped ("" for none); 400 for an invalid name or a ref (`refs/heads/main`).

    A ref is refused because git would look for `refs/heads/refs/heads/…` (also on a machine).
    """
    if value in (None, ""):
        return ""
    if not valid_branch(value.strip()):
        raise InvalidRequest("base is not a valid branch name")
    base = value.strip()
    if base.startswith("refs/"):
        short = base.removeprefix("refs/heads/")
        raise InvalidRequest(f"base is a branch name: write {short!r}, not the ref {base!r}" if short != base
                             else f"base is a branch name, not the ref {base!r}")
    return base


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
