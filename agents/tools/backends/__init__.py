"""Tool sources: `builtin`, `agent` (agents as tools) and `mcp` (registered MCP servers)."""
