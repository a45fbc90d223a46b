"""Fixtures of the Responses API's tests: one real daphne and one django-q2 cluster for the package
(background responses are executed by a worker), the official `openai` SDK pointed at them, a funded
org with an agent, what was stored or billed, and OpenAI's own OpenAPI document to judge every body
and stream event by."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import jsonschema
import openai
import pytest
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.support.faces import debits, funded_org, make_agent, stored_runs, upstream_env  # noqa: F401 (the tests import them from here)
from tests.support.live import ROOT, LiveServer
from tests.support.qcluster import QCluster

FEE_CENTS = 7
BASE_PATH = "/v1/agents/openai/v1"
#: OpenAI's OpenAPI document, in the shared folder beside the clone (`../shared/reference/`).
REFERENCE_NAME = "openai-openapi-2.3.0.json"


@pytest.fixture(scope="package")
def live(django_db_setup, django_db_blocker, upstream_server):
    """One daphne and one worker cluster for every test here: inference is the loopback upstream,
    a response costs 7 cents (`AGENTS_OPENAI_FEE_CENTS`)."""
    env = upstream_env(upstream_server, AGENTS_OPENAI_FEE_CENTS=str(FEE_CENTS), AGENTS_Q_WORKERS="1", AGENTS_Q_POLL_SECONDS="0.05")
    server = LiveServer(env).start()
    cluster = QCluster(env, name="qcluster-responses").start()
    server.cluster = cluster
    yield server
    cluster.stop()
    server.stop()


def sdk(live, key: str) -> openai.OpenAI:
    """Return the official SDK client of `key` against the endpoint (no retries: each call is one request)."""
    return openai.OpenAI(base_url=live.url + BASE_PATH, api_key=key, max_retries=0, timeout=60)


@pytest.fixture
def org(make_org, upstream):
    """A funded org (1000 cents) with agent `writer` (instructions "Be brief.")."""
    return funded_org(make_org, "rsp")


@pytest.fixture
def client(live, org):
    """The SDK as `org`'s API key sees the endpoint."""
    return sdk(live, org.key)


def reference_path() -> Path:
    """Return the path of OpenAI's OpenAPI document (the shared folder beside the clone, or above a worktree)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        candidate = base / "shared" / "reference" / REFERENCE_NAME
        if candidate.exists():
            return candidate
    raise AssertionError(f"{REFERENCE_NAME} is not in ../shared/reference/ beside the clone")


@functools.cache
def _registry() -> Registry:
    document = json.loads(reference_path().read_text())
    return Registry().with_resource("urn:openai", Resource.from_contents(document, default_specification=DRAFT202012))


def conforms(instance, schema_name: str) -> None:
    """Fail unless `instance` validates against `#/components/schemas/<schema_name>` of OpenAI's document."""
    validator = jsonschema.Draft202012Validator({"$ref": f"urn:openai#/components/schemas/{schema_name}"},
                                                registry=_registry())
    errors = sorted(validator.iter_errors(instance), key=lambda error: list(error.path))
    assert not errors, f"{schema_name}: " + "; ".join(f"{list(e.path)}: {e.message[:300]}" for e in errors[:5])


def sse_events(text: str) -> list[dict]:
    """Return the `data:` JSON of each frame of an event stream (comments skipped), checking each
    frame's `event:` line names its `type`."""
    events = []
    for frame in text.split("\n\n"):
        lines = [line for line in frame.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        event = next((line[len("event: "):] for line in lines if line.startswith("event: ")), None)
        data = json.loads("".join(line[len("data: "):] for line in lines if line.startswith("data: ")))
        assert event == data["type"], frame
        events.append(data)
    return events


@functools.cache
def _event_schemas() -> dict[str, str]:
    """Return `{event type: schema name}` for every member of OpenAI's `ResponseStreamEvent`."""
    schemas = json.loads(reference_path().read_text())["components"]["schemas"]
    names = [member["$ref"].rsplit("/", 1)[-1] for member in schemas["ResponseStreamEvent"]["anyOf"]]
    return {kind: name for name in names for kind in schemas[name]["properties"]["type"].get("enum", [])}


def event_conforms(event: dict) -> None:
    """Fail unless `event` is a `ResponseStreamEvent` of OpenAI's document, judged by its own type's schema."""
    name = _event_schemas().get(event.get("type"))
    assert name is not None, f"{event.get('type')!r} is no event type of ResponseStreamEvent"
    conforms(event, name)
