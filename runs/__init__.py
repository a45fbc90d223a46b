"""The run machinery (issue 27 item 2): every kind of run's lifecycle, in one app below `agents`.

`runs.lifecycle` (start and finish, DESIGN §4), `runs.background` (queued runs and their worker),
`runs.lease`, `runs.recovery`, `runs.reaper`, `runs.shutdown`, `runs.sweeps`, `runs.streaming`
(SSE replies), `runs.drive` (run steps), `runs.approvals` (runs waiting for a person),
`runs.idempotency`, `runs.tracing`, `runs.run_session`, `runs.dispatch`, `runs.tasks` and the
models `Run`, `RunTask`, `Approval`, `IdempotencyRecord`. It sits above `sessions` and below
`agents` and every app that starts runs: it never imports them, not even inside a function
(`.importlinter`); what it needs of them (executing a run through the agent loop, resuming one)
they register in `runs.hooks`.
"""
