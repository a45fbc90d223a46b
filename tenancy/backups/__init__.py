"""Backups of org stores and the default database (issue 35; docs/guides/backups.md).

SQLite mode: `manage.py replicate` supervises one Litestream process that ships the WAL of the
default database and of every org file to `AGENTS_BACKUP_URL` (`replication`), and
`manage.py restore_org` brings one org back to a moment while the others are served (`restore`,
`fence`). PostgreSQL org mode: `pg_dump`/`pg_restore` of one org's database (`postgres`).
`status` reports each org's replica (lag, last snapshot) for `backup_status` and the admin.
"""
