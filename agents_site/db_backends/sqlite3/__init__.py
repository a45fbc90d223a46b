"""SQLite with per-process reuse of idle connections: `ENGINE = "agents_site.db_backends.sqlite3"`."""
