"""What the server and the runner share, with no Django and nothing of either side (issue 27).

- `toolkit.coding` — the coding tools (`ToolBox`: list/read/write/edit/search files, `run`);
- `toolkit.sandbox` — the sandbox backends (bubblewrap, the owner-allowed unconfined runner)
  and the process runner that kills a command's whole tree on a limit or a stop;
- `toolkit.builtin`, `toolkit.calculator`, `toolkit.shell` — the built-in tools;
- `toolkit.invoke` — the bounds of a tool call (argument and result sizes, error text);
- `toolkit.toolloop` — the tool loop itself (`tool_loop`, a generator of operations both the
  server's `RunLoop` and the runner's `Execution` drive) and its rules (the opening messages, the
  rounds and the last one offered no tools, a call's arguments, a steering message's text);
- `toolkit.events` — the session events a run writes (`tool_call_payload`, `clip`, `valid_text`);
- `toolkit.retry` — the equal-jitter backoff between attempts of a model call;
- `toolkit.outbound` — the one door for HTTP to user-named addresses (resolve once, refuse
  inward addresses, connect to the checked one).

Settings are passed in by the caller (the server reads Django settings, the runner its flags).
The import contract (`.importlinter`, `toolkit` contract) keeps this package free of the
server's apps and of `runner`.
"""
