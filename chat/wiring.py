"""What the chat app registers with the apps below it (each registry is listed in `server/registries.py`).

Imported once, from `ChatConfig.ready()`: its imports reach models, which load after `apps.py`.
"""

from agents.execution.resume import run_resume
from agents_site.vocabulary import RunKind
from chat.rounds import round_resume_prompt, round_resumed
from runs.policies import RunPolicy, register_run_policy


def wire() -> None:
    """Register the `chat` run kind (a coding run posts its reply into a conversation by importing `chat.services`)."""
    # A round calls this deployment's gateway (a preset's fixed reply calls no model: its
    # request says so, and billing's fee for it is 0); a busy or unpaid round is refused. A
    # round waiting for approval resumes here on the prompt it opened with, and its reply is
    # posted to the conversation once it finishes.
    register_run_policy(RunPolicy(kind=RunKind.CHAT, resume=run_resume, resume_prompt=round_resume_prompt,
                                  resumed=round_resumed))
