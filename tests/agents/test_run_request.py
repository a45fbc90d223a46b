"""A run request is a value and each run kind has one policy (issue 27 item 2).

`run_start` / `run_starting` take a `RunRequest` and `run_finish` / `run_finishing` plain
values: no callable goes in, so the lifecycle never calls back into the app that started the
run. Every `RunKind` has a `RunPolicy` registered by its app; its fee is billing's.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import inspect
import logging
import typing

import pytest
from django.core.exceptions import ImproperlyConfigured

from agents.models import Agent
from runs.models import Run
from runs import policies
from runs.lifecycle import Outcome, run_finish, run_finishing, run_replay, run_start, run_starting
from runs.policies import RunPolicy, UnknownRunKind, register_run_policy, registered_kinds, run_policy
from runs.request import RunRequest
from agents_site.vocabulary import RefusalAnswer, RunKind, RunStatus
from billing.meter import fee_for_kind
from coding.runs import coding_run_starting
from sessions.models import Session
from tests.agents.conftest import fund, make_agent

pytest_db = pytest.mark.django_db(transaction=True)

LIFECYCLE_ENTRIES = [run_start, run_starting, run_replay, run_finish, run_finishing, coding_run_starting]


def _callable_in(hint) -> bool:
    """Return True when type hint `hint` admits a callable (Callable, Any, object), at any depth."""
    if hint in (typing.Any, object) or hint is collections.abc.Callable or hint is typing.Callable:
        return True
    origin = typing.get_origin(hint)
    if origin in (collections.abc.Callable, typing.Callable):
        return True
    return any(_callable_in(arg) for arg in typing.get_args(hint) if arg is not Ellipsis)


@pytest.mark.parametrize("entry", LIFECYCLE_ENTRIES, ids=lambda f: f.__name__)
def test_the_lifecycle_takes_no_callable_and_no_mode_string(entry):
    hints = typing.get_type_hints(entry)
    parameters = inspect.signature(entry).parameters
    assert parameters, entry
    for name, parameter in parameters.items():
        assert name in hints, f"{entry.__name__}({name}) is not annotated"
        assert not _callable_in(hints[name]), f"{entry.__name__}({name}: {hints[name]}) admits a callable"
        assert not callable(parameter.default) or parameter.default is inspect.Parameter.empty, name
        assert name not in {"within", "check", "refused", "prepare", "on_commit", "finishing"}, name


def test_a_run_request_carries_no_callable():
    hints = typing.get_type_hints(RunRequest)
    for field in dataclasses.fields(RunRequest):
        assert not _callable_in(hints[field.name]), f"RunRequest.{field.name}: {hints[field.name]}"
    assert RunRequest.__dataclass_params__.frozen
    assert list(inspect.signature(run_start).parameters) == ["request"]
    assert typing.get_type_hints(run_start)["request"] is RunRequest


def test_every_run_kind_has_a_policy_registered_by_its_app():
    assert registered_kinds() == frozenset(RunKind.values)
    for kind in RunKind.values:
        assert run_policy(kind).kind == kind


@pytest_db
def test_an_unregistered_kind_fails_loudly_and_records_nothing(org_a):
    with pytest.raises(UnknownRunKind, match="no run policy is registered for run kind 'nope'"):
        run_policy("nope")
    with org_a.context():
        with pytest.raises(UnknownRunKind):
            run_start(RunRequest(kind="nope", agent_name="x", input="hi", actor=f"{org_a.slug}/ann"))
        assert not Run.objects.exists() and not Session.objects.exists()


def test_a_kind_has_one_owner():
    register_run_policy(run_policy(RunKind.CHAT))  # the same policy again: a no-op
    with pytest.raises(ImproperlyConfigured, match="already has a policy"):
        register_run_policy(RunPolicy(kind=RunKind.CHAT, refusals=RefusalAnswer.RECORD))
    from agents.execution.resume import run_resume
    from chat.rounds import round_resume_prompt, round_resumed

    assert run_policy(RunKind.CHAT) == RunPolicy(kind=RunKind.CHAT, resume=run_resume, resume_prompt=round_resume_prompt,
                                                 resumed=round_resumed)
    assert "nope" not in policies._policies


def test_the_policies_say_what_each_kind_may_do():
    assert {kind: run_policy(kind).refusals for kind in RunKind.values} == {
        kind: RefusalAnswer.RECORD if kind == RunKind.SCHEDULED else RefusalAnswer.RAISE for kind in RunKind.values}
    assert {kind for kind in RunKind.values if not run_policy(kind).needs_inference} == {RunKind.ROUTED}
    assert {kind for kind in RunKind.values if run_policy(kind).replays_in_flight} == {RunKind.ROUTED}
    queued = RunRequest(kind=RunKind.RUN, actor="a/u", queued=True)
    assert run_policy(RunKind.RUN).answers_in_flight(queued) and not run_policy(RunKind.RUN).answers_in_flight(
        dataclasses.replace(queued, queued=False))
    fixed = RunRequest(kind=RunKind.CHAT, actor="a/u", calls_model=False)
    assert not run_policy(RunKind.CHAT).infers_here(fixed)
    # A coding run infers here unless it is routed to a machine.
    coding = RunRequest(kind=RunKind.CODING, actor="a/u", queued=True)
    assert run_policy(RunKind.CODING).infers_here(coding)
    assert not run_policy(RunKind.CODING).infers_here(dataclasses.replace(coding, target_id="tgt_1"))


def test_a_kinds_own_code_is_its_policys():
    """Who executes a queued run, who resumes a waiting one and how, the in-flight limit: fields of the kind's policy."""
    from agents.execution.queued import execute_queued
    from agents.execution.resume import run_resume
    from chat.rounds import round_resume_prompt, round_resumed
    from coding.apps import max_in_flight
    from coding.errors import CodingBusy
    from responses_api.services import response_execute_queued
    from runs.policies import InFlightLimit
    from targets.approvals import routed_resume_offer

    def having(field: str) -> dict:
        return {kind: getattr(run_policy(kind), field) for kind in RunKind.values if getattr(run_policy(kind), field) is not None}

    assert having("execute_queued") == {RunKind.RUN: execute_queued, RunKind.SCHEDULED: execute_queued,
                                        RunKind.RESPONSES: response_execute_queued}  # a background response
    assert having("resume") == {kind: run_resume for kind in (RunKind.RUN, RunKind.TOOL, RunKind.SCHEDULED, RunKind.CHAT, RunKind.A2A,
                                                                                RunKind.MCP)}
    assert having("resume_elsewhere") == {RunKind.ROUTED: routed_resume_offer}
    # an A2A task and an MCP tool call are rounds
    assert having("resume_prompt") == {RunKind.CHAT: round_resume_prompt, RunKind.A2A: round_resume_prompt,
                                       RunKind.MCP: round_resume_prompt}
    assert having("resumed") == {RunKind.CHAT: round_resumed, RunKind.A2A: round_resumed, RunKind.MCP: round_resumed}
    assert having("in_flight_limit") == {RunKind.CODING: InFlightLimit(maximum=max_in_flight, error=CodingBusy)}


def test_a_kind_resumes_here_or_elsewhere_not_both():
    with pytest.raises(ImproperlyConfigured, match="not both"):
        RunPolicy(kind="x", resume=lambda run: "", resume_elsewhere=lambda run: None)


def test_the_fee_of_every_kind_comes_from_billing(settings):
    settings.CLOUD_AGENT_FEE_CENTS = 100
    settings.AGENTS_CHAT_FEE_CENTS = 5
    settings.AGENTS_OPENAI_FEE_CENTS = 7
    settings.AGENTS_CODING_FEE_CENTS = 30
    fees = {kind: run_policy(kind).fee_cents(RunRequest(kind=kind, actor="a/u")) for kind in RunKind.values}
    assert fees == {RunKind.RUN: 100, RunKind.SCHEDULED: 100, RunKind.ROUTED: 100, RunKind.TOOL: 100,
                    RunKind.CHAT: 5, RunKind.OPENAI: 7, RunKind.CODING: 30, RunKind.A2A: 100, RunKind.MCP: 100,
                    RunKind.RESPONSES: 7}
    assert fees == {kind: fee_for_kind(kind) for kind in RunKind.values}
    # A round a preset's handler answers calls no model: billing's fee for it is 0.
    assert run_policy(RunKind.CHAT).fee_cents(RunRequest(kind=RunKind.CHAT, actor="a/u", calls_model=False)) == 0


@pytest_db
def test_a_run_holds_the_fee_its_policy_asks_billing_for(org_a, upstream, settings):
    settings.AGENTS_OPENAI_FEE_CENTS = 7
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(RunRequest(kind=RunKind.OPENAI, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
        fixed = run_start(RunRequest(kind=RunKind.CHAT, agent_name="system", model="fixed-reply", input="hi",
                                     actor=f"{org_a.slug}/ann", calls_model=False))
        assert (Run.objects.get(pk=run.id).fee_cents, Run.objects.get(pk=fixed.id).fee_cents) == (7, 0)
        assert Run.objects.get(pk=fixed.id).model == "fixed-reply"


@pytest_db
def test_a_scheduled_run_without_inference_is_recorded_not_started_and_the_body_writes_nothing(org_a, upstream, settings):
    fund(org_a)
    make_agent(org_a, "cron")
    settings.INFERENCE_BASE_URL = ""
    with org_a.context():
        agent = Agent.objects.get(name="cron")
        with run_starting(RunRequest(kind=RunKind.SCHEDULED, agent=agent, input="", actor=f"scheduler:{org_a.slug}/cron",
                                     queued=True, title="scheduled run")) as run:
            assert not run.started_here and not run.replayed
        stored = Run.objects.get(pk=run.id)
        assert (stored.status, stored.fee_cents) == (RunStatus.ERROR, 0)
        assert stored.error == "not started: inference is not configured on this deployment"
        assert Session.objects.get(pk=stored.session_id).status == "error"
        # the same refusal for a kind that raises: nothing recorded
        from runs.lifecycle import InferenceUnavailable

        with pytest.raises(InferenceUnavailable):
            run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="x", actor=f"{org_a.slug}/ann", queued=True))
        assert Run.objects.count() == 1
    assert upstream.chat_requests == []


@pytest_db
def test_the_body_of_run_starting_commits_with_the_run_and_a_replay_gets_no_body_writes(org_a, upstream):
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        request = RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann", idempotency_key="k-1", queued=True)
        with run_starting(request) as run:
            assert run.started_here and not run.replayed
            Session.objects.filter(pk=run.session_id).update(title="written in the body")
        assert Run.objects.get(pk=run.id).status == RunStatus.QUEUED
        assert Session.objects.get(pk=run.session_id).title == "written in the body"
        assert run_replay(request).id == run.id  # the same key and input: the earlier run, in flight (queued)
        with run_starting(request) as again:
            assert again.replayed and not again.started_here and again.id == run.id
        assert Run.objects.count() == 1


@pytest_db
def test_what_the_body_of_run_finishing_raises_is_logged_and_never_undoes_the_finish(org_a, upstream, caplog):
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
        with caplog.at_level(logging.ERROR, logger="runs.lifecycle"):
            with run_finishing(run_id=run.id, outcome=Outcome(status=RunStatus.OK, output="done", model="m")) as row:
                assert row.status == RunStatus.OK
                Session.objects.filter(pk=run.session_id).update(title="rolled back with the body")
                raise RuntimeError("the caller's write failed")
        assert "the writes committed with its finish failed" in caplog.text
        stored = Run.objects.get(pk=run.id)
        session = Session.objects.get(pk=run.session_id)
        assert (stored.status, stored.output, session.status) == (RunStatus.OK, "done", "done")
        assert session.title != "rolled back with the body"
        # a run already finished: the body gets None (and must write nothing)
        with run_finishing(run_id=run.id, outcome=Outcome.failed("late")) as late:
            assert late is None
        assert Run.objects.get(pk=run.id).status == RunStatus.OK
