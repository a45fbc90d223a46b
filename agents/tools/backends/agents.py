"""Other agents of the org as tools, named `agent_<name>` (never the calling agent itself).

Calling one is a run of that agent through the one run path (`run_execute`, the `tool` kind's
`RunPolicy.execute`: this backend sits below the executor whose loop resolves it), as the calling
run's actor, one level deeper, with its session a child of the calling run's session: it is
gated, recorded and debited like any run. Its output (or its error) is the tool's result.
A stop of the calling run stops the child run too (its stop signal is the parent's child).
"""

from __future__ import annotations

from agents.models import Agent
from agents.tools.backends.base import Resolution, Tool, ToolBackend, ToolContext, ToolError
from agents_site.errors import ApiError, InvalidRequest
from agents_site.vocabulary import RunKind, RunStatus, ToolSource
from runs.policies import run_policy

PREFIX = "agent_"
PARAMETERS = {
    "type": "object",
    "properties": {"input": {"type": "string", "description": "what to ask this agent"}},
    "required": ["input"],
}


def _invoker(agent_name: str):
    def invoke(arguments: dict, context: ToolContext) -> str:
        agent = Agent.objects.filter(name=agent_name).first()
        if agent is None:
            raise ToolError(f"agent {agent_name!r} no longer exists")
        try:
            run = run_policy(RunKind.TOOL).execute(
                agent=agent,
                input=str(arguments.get("input") or ""),
                actor=context.actor,
                request_id=context.request_id,
                parent_session_id=context.session_id,
                parent_run_id=context.run_id,
                depth=context.depth + 1,
                deadline=context.deadline,
                kind=RunKind.TOOL,
                stop=context.stop.child() if context.stop is not None else None,  # it stops with its parent
            )
        except ApiError as exc:
            raise ToolError(exc.message) from exc
        if run.status != RunStatus.OK:
            raise ToolError(run.error or "the agent's run failed")
        return run.output

    return invoke


class AgentTools(ToolBackend):
    """Agents of the current org, offered as tools to each other."""

    source = ToolSource.AGENT

    def owns(self, name: str) -> bool:
        """Return True for names starting `agent_`."""
        return name.startswith(PREFIX)

    def validate(self, names: list[str], *, agent_name: str) -> None:
        """Refuse the agent itself and names of agents the org does not have (400)."""
        wanted = {name[len(PREFIX) :]: name for name in names}
        if agent_name in wanted:
            raise InvalidRequest(f'tool "{wanted[agent_name]}": an agent cannot call itself as a tool')
        known = set(Agent.objects.filter(name__in=list(wanted)).values_list("name", flat=True))
        for target, name in wanted.items():
            if target not in known:
                raise InvalidRequest(f'unknown tool "{name}": the org has no agent named "{target}"')

    def resolve(self, names: list[str], *, agent_name: str) -> Resolution:
        """Offer each named agent that still exists, never `agent_<self>`."""
        resolution = Resolution()
        wanted = [name[len(PREFIX) :] for name in names]
        found = {a.name: a for a in Agent.objects.filter(name__in=wanted).only("name", "description")}
        for name, target in zip(names, wanted, strict=True):
            if target == agent_name:
                resolution.not_offered[name] = "an agent is never offered itself"
            elif target not in found:
                resolution.not_offered[name] = "no such agent"
            else:
                description = found[target].description or f"agent {target}"
                resolution.tools.append(
                    Tool(name=name, description=description, parameters=PARAMETERS, source=self.source, invoke=_invoker(target))
                )
        return resolution
