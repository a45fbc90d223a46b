"""Public ids: `<prefix>_` + 32 hex characters from a CSPRNG (reference §1.2)."""

import secrets


def mint_id(prefix: str) -> str:
    """Return `prefix + "_" + 32 random hex chars`, e.g. `mint_id("agent")` → `agent_9f…`."""
    return f"{prefix}_{secrets.token_hex(16)}"
