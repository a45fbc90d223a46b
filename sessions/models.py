"""Sessions and events (each org's own store). Filled in by the sessions capability."""
