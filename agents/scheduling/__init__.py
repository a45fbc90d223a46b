"""The cron scheduler of long-running agents (spec 003: POST/PATCH /v1/agents; reference §6.2).

- `slots`: pure slot arithmetic (croniter in the agent's time zone, DST rules, backoff).
- `models`: the slot ledger (`ScheduleSlot`, unique per agent and scheduled minute), the
  per-agent `ScheduleState` (cursor, failure streak, backoff, in-flight run) and `RunTask`
  (the durable task carrying a queued run: task id, worker, heartbeat lease).
- `ticker`: one tick across every org — decides each due slot exactly once and fires it.
- `fire`: the seam between a decided slot and the one run path.
- `selectors`: the schedule overview the admin shows.
"""
