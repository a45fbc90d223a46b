"""Every private (undocumented) Django name the fast path touches, in one place (issue 27 item 3).

The fast path — the ASGI handler (`server/asgi.py`), the inline middleware
(`server/inline_middleware.py`) and the pooled SQLite engine (`agents_site/db_backends/sqlite3`)
— subclasses Django classes and overrides or calls methods Django does not document as API.
Each is listed here with the part that relies on it and, for a method whose body the fast path
re-implements or wraps, a SHA-256 of Django's source at the pinned version: a Django upgrade
that changes one fails `tests/agents_site/test_django_private.py` by name, before it can break a
request in production.

The upgrade path (docs/operations/upgrades.md, "Upgrading Django"): bump the pin in requirements.txt; run that test;
for every name it reports, read Django's change to that method and port it into our override
(or drop the override); update the hash here; then run `make test` — which also runs the API
tests on Django's stock handler and engine (`AGENTS_FAST_HANDLER=0 AGENTS_POOLED_SQLITE=0`) — and
the request-path benches. Each part can be switched off by its setting while it is being ported.
"""

from __future__ import annotations

from dataclasses import dataclass

# The Django release these names and hashes were read from (requirements.txt pins it exactly).
DJANGO_VERSION = "5.2.19"


@dataclass(frozen=True)
class PrivateName:
    """One Django name outside its documented API.

    `path`: dotted import path, `module:Qualified.name`; `part`: our module that relies on it;
    `how`: `calls` (we call it), `overrides` (we replace it in a subclass and may call super),
    `reimplements` (our code is a port of its body); `source_sha256`: for `reimplements` and
    `overrides`, the hash of Django's source of that function at `DJANGO_VERSION` ("" otherwise).
    """

    path: str
    part: str
    how: str
    source_sha256: str = ""


NAMES: tuple[PrivateName, ...] = (
    # server/asgi.py: Django 5.2's ASGIHandler.handle, ported with a one-crossing branch.
    PrivateName("django.core.handlers.asgi:ASGIHandler.handle", "server/asgi.py", "reimplements",
                "98faeb5bef800331e6a8002fbc96b30e4122a23438ae45a047190a531ea11323"),
    PrivateName("django.core.handlers.asgi:ASGIHandler.read_body", "server/asgi.py", "calls"),
    PrivateName("django.core.handlers.asgi:ASGIHandler.create_request", "server/asgi.py", "calls"),
    PrivateName("django.core.handlers.asgi:ASGIHandler.send_response", "server/asgi.py", "calls"),
    PrivateName("django.core.handlers.asgi:ASGIHandler.listen_for_disconnect", "server/asgi.py", "calls"),
    PrivateName("django.core.handlers.asgi:ASGIHandler.chunk_size", "server/asgi.py", "calls"),
    PrivateName("django.core.handlers.asgi:get_script_prefix", "server/asgi.py", "calls"),
    PrivateName("django.core.handlers.base:BaseHandler.load_middleware", "server/asgi.py", "calls"),
    PrivateName("django.core.handlers.base:BaseHandler.resolve_request", "server/asgi.py", "overrides",
                "ff178c3d63eebcd3e38110341593518dcd67d84cff94bbc7dd5aa323637cba6d"),
    PrivateName("django.core.handlers.asgi:ASGIHandler.run_get_response", "server/asgi.py", "calls"),
    # server/inline_middleware.py: MiddlewareMixin.__acall__ re-implemented inline.
    PrivateName("django.utils.deprecation:MiddlewareMixin.__acall__", "server/inline_middleware.py", "reimplements",
                "adf8cbcaf9f11e45c4ac1953556ac422f2a6fe4193df5edbed186b2b66bea729"),
    PrivateName("django.utils.deprecation:MiddlewareMixin.async_mode", "server/inline_middleware.py", "calls"),
    PrivateName("django.contrib.messages.storage.base:BaseStorage.added_new", "server/inline_middleware.py", "calls"),
    # agents_site/db_backends/sqlite3/base.py: the pooled engine.
    PrivateName("django.db.backends.sqlite3.base:DatabaseWrapper._start_transaction_under_autocommit",
                "agents_site/db_backends/sqlite3/base.py", "overrides", "7315cfc61c1dde12afa3e1dd77790b874b07c8261f505760fcd5f169d1aae763"),
    PrivateName("django.db.backends.base.base:BaseDatabaseWrapper._commit", "agents_site/db_backends/sqlite3/base.py", "overrides",
                "8ebc361e1e8fcb8d33ccb0e4074b5d638269a87a037b7013d6a86fe116388b39"),
    PrivateName("django.db.backends.base.base:BaseDatabaseWrapper._rollback", "agents_site/db_backends/sqlite3/base.py", "overrides",
                "d671ec3bb3c8ed44da28e4a9c17ad387daa3eaee712d38b7af61219492916e07"),
    PrivateName("django.db.backends.base.base:BaseDatabaseWrapper._close", "agents_site/db_backends/sqlite3/base.py", "overrides",
                "d1a3f0e9a11cd0842ea402c2f180e6d1f116753ccc15064e1daef66faa531e7a"),
    PrivateName("django.db.backends.sqlite3.base:DatabaseWrapper.get_new_connection", "agents_site/db_backends/sqlite3/base.py", "overrides",
                "99ddcd0012130edd98ad85bc9354b476fb061c0a84561f05a4fb221265c1c381"),
    PrivateName("django.db.backends.sqlite3.base:DatabaseWrapper.is_in_memory_db", "agents_site/db_backends/sqlite3/base.py", "calls"),
    PrivateName("django.db.backends.sqlite3.base:DatabaseWrapper.transaction_mode", "agents_site/db_backends/sqlite3/base.py", "calls"),
    PrivateName("django.db.backends.sqlite3.base:DatabaseWrapper.init_commands", "agents_site/db_backends/sqlite3/base.py", "calls"),
    # tests/conftest.py: pytest-django's TestCase hooks that keep org aliases out of its database guard.
    PrivateName("django.test.testcases:SimpleTestCase.ensure_connection_patch_method", "tests/conftest.py", "overrides",
                "875eedd7ca0fbb7fb2a0cbbe087ba7af57fece724a782dd981be221f4f5648d1"),
    PrivateName("django.test.testcases:SimpleTestCase._add_databases_failures", "tests/conftest.py", "overrides",
                "73adff8e31635b90a629851b459dc197d528b6e6b3137f9a08938877d331136c"),
    PrivateName("django.test.testcases:SimpleTestCase._remove_databases_failures", "tests/conftest.py", "overrides",
                "87ac5017823865bc5d8d9eeb3f1d627b2cbb114ce22c11e81ef988d171660e7d"),
)
