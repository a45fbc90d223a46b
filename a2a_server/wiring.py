"""What the A2A face registers with the apps below it (each registry is listed in `server/registries.py`).

Imported once, from `A2aServerConfig.ready()`: its imports reach models, which load after `apps.py`.
"""

from agents.execution.resume import run_resume
from agents_site.vocabulary import RunKind
from chat.rounds import round_resume_prompt, round_resumed
from runs.policies import RunPolicy, register_run_policy


def wire() -> None:
    """Register the rules of the `a2a` runs this app starts (`runs.policies`): an A2A task is a
    conversation round (`chat.rounds`) of kind `a2a`, so a task that waited for an approval
    resumes here exactly as a chat round does — rebuilt on the prompt it opened with, its reply
    posted to its conversation (the task's `contextId`) once it finished."""
    register_run_policy(RunPolicy(kind=RunKind.A2A, resume=run_resume, resume_prompt=round_resume_prompt,
                                  resumed=round_resumed))
