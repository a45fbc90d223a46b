"""Django database engines of the platform's own (`DATABASES[...]["ENGINE"]`)."""
