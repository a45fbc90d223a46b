"""Wire shapes of /v1/agents/repos and /v1/agents/coding (camelCase on the wire)."""

from __future__ import annotations

from typing import Any

from ninja import Field, Schema

from agents_site.schemas import BodySchema


class RepoIn(BodySchema):
    """Body of POST /v1/agents/repos (`owner` + `name`, or `repo` "owner/name") and of PATCH."""

    repo: str | None = None
    owner: str | None = None
    name: str | None = None
    cloneUrl: str | None = None
    defaultBranch: str | None = None
    credential: str | None = None


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

    prompt: str | None = None
    repo: str | None = None
    project: str | None = None
    base: str | None = None
    after: str | None = None
    agentRef: str | None = None
    targetId: str | None = None
    timeoutSeconds: int | None = None
    tool: str | None = None
    replyConversationId: str | None = Field(None, description="A conversation of the org: the run's summary is appended to it as an assistant turn when the run ends (404 when unknown).")
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
