"""The runner: the daemon a registered machine runs to take routed runs (DESIGN §6).

`python -m runner --server URL --api-key ak_… [--label …] [--allow-shell DIR]` registers the
machine (re-linking on restart), mints or loads its claim key from a file only its user can
read, heartbeats metrics every 30 s, long-polls for runs addressed to it, executes each run's
agent loop against the machine's own inference gateway (`INFERENCE_BASE_URL`,
`INFERENCE_API_KEY`), streams the steps into the run's session and reports the result.

It talks to the server over HTTP only and imports nothing from the server's code.
"""
