"""Tools an agent may call: built-ins, other agents of the org, and MCP servers' tools.

`registry.validate_tool_names` refuses unknown names at agent create/patch;
`registry.resolve_tools` builds what a run offers; `invoke.invoke_tool` runs one call.
"""
