"""`python -m agents_identity mcp`: the same as the `agents-identity` command."""

from agents_identity.cli import main

main()
