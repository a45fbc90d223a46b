"""Run, history and dashboard routes (spec 003: POST /{ref}/run, /runs, /activity, /metrics).

Filled in by the runs capability; fixed paths here are mounted before `/{ref}`.
"""

from ninja import Router

router = Router(tags=["runs"])
