"""The one credential guard at the storage boundary (issue 49 item 1; DESIGN §13).

Every text and JSON column of the platform's models passes this guard on its way into a store: Django
turns a value into its column form with `Field.get_db_prep_save` for every `save()`, `create()`,
`bulk_create()`, `update(field=value)` and `bulk_update()`, and `install()` (run once, from
`sessions.apps`) wraps that method of every `CharField`, `TextField` and `JSONField` of the project's
models — the models of tenancy and billing too, read from the app registry, never imported. The guard
masks what it finds (`[redacted:<rule>:<fingerprint>]`) and logs the field, rule and fingerprint, never
the value. Refusing is the callers' part, before the guard: a caller's text is refused with 422
`secret_in_transcript` where it is written (`sessions.services.refuse_secrets`); what the platform
receives (model replies, tool results, routed reports, receivers' answers) is masked by its writer, and
whatever a writer missed is masked here.

Columns stored on purpose (hashes of tokens, public keys, encrypted secrets, sealed envelopes) are in
`STORED_ON_PURPOSE` with a reason each; `tests/agents_site/test_storage_guard.py` fails on a model field
that is neither guarded nor listed there.

A JSON column is masked value by value (object keys too), so it stays the same JSON; a text column that
holds a JSON document (an event's payload) is masked the same way and written back compactly only when
something was masked. Strings shorter than 12 characters hold no credential any rule knows and are
passed as they are.

`AGENTS_BENCH_STORAGE_GUARD_OFF=1` leaves the guard out of the process (`install()` wraps nothing and logs a
warning): for `bench/guard_ab.py`'s "before" side only, which measures the same code with and without the
guard. Never in a deployment: with it set, nothing masks what a writer missed.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
from pathlib import Path

from django.apps import apps
from django.conf import settings
from django.db import models

from sessions.scanner import redact_json, redact_text

logger = logging.getLogger(__name__)

MIN_LENGTH = 12  # characters: the shortest value a rule takes is longer
_GUARDED = (models.CharField, models.TextField, models.JSONField)
_MARK = "_credential_guard"
_suspended: contextvars.ContextVar[bool] = contextvars.ContextVar("credential_guard_suspended", default=False)

#: `app_label.Model.field` → why the column holds what it holds unmasked.
STORED_ON_PURPOSE: dict[str, str] = {
    "tenancy.ApiKey.key_hash": "SHA-256 of the API key (the key itself is never stored)",
    "tenancy.ApiKey.prefix": "the key's first characters shown to tell keys apart (not enough to use it)",
    "tenancy.Invitation.token_hash": "SHA-256 of the invitation token",
    "targets.ClaimKey.key_hash": "SHA-256 of the claim key",
    "identity.AgentCredential.token_hash": "bcrypt hash of the agent token",
    "identity.AgentKeySet.public_key": "an X25519 public key",
    "identity.AgentKeySet.signing_public_key": "an Ed25519 public key",
    "identity.AgentKeySet.webhook_secret_encrypted": "the webhook secret, Fernet-encrypted under the deployment key",
    "identity.UserKeySet.public_key": "an X25519 public key",
    "identity.UserKeySet.signing_public_key": "an Ed25519 public key",
    "identity.Envelope.body": "an HPKE-sealed envelope the platform cannot read",
    "identity.Delivery.signing_secret_encrypted": "the signing secret, Fernet-encrypted under the deployment key",
    "identity.KeyBackup.blob": "the browser-encrypted key backup",
    "identity.AgentManifest.card": "a signed A2A card: masking would break its signature; its text is scanned (refused) when registered",
    "webhooks.Endpoint.secret_encrypted": "the endpoint's signing secret, Fernet-encrypted under the deployment key",
    "chat.ShareLink.token_hash": "SHA-256 of the share link's token",
    "runs.IdempotencyRecord.request_hash": "SHA-256 of a request body",
    "runs.Approval.arguments": "sealed (Fernet, deployment key) until its call is decided and run, then the masked form "
                               "(runs.approvals.seal_arguments)",
}


def field_label(field) -> str:
    """Return `app_label.Model.field` of a model field (the key of `STORED_ON_PURPOSE`)."""
    return f"{field.model._meta.app_label}.{field.model.__name__}.{field.name}"


def project_models() -> list[type[models.Model]]:
    """Return the models of the project's own apps (those under the repository, not Django's or a library's)."""
    root = Path(settings.BASE_DIR).resolve()
    out = []
    for config in apps.get_app_configs():
        path = Path(config.path).resolve()
        if root in path.parents and ".venv" not in path.parts and "site-packages" not in path.parts:
            out.extend(config.get_models())
    return out


def guarded_fields() -> list:
    """Return every text or JSON field of the project's models (primary keys included)."""
    return [f for model in project_models() for f in model._meta.concrete_fields if isinstance(f, _GUARDED)]


def is_guarded(field) -> bool:
    """Return True when `field`'s writes pass the guard."""
    return bool(getattr(field, _MARK, False))


def guard_value(value, *, where: str = ""):
    """Return `value` with every credential masked: a string, or a JSON-able value (keys too).

    `where` names the column in the log line. Example: `guard_value("key ghp_…")` → `"key [redacted:github-token:3f2a…]"`.
    """
    if _suspended.get():
        return value
    if isinstance(value, str):
        if len(value) < MIN_LENGTH:
            return value
        if value[:1] in "{[" and value[-1:] in "}]":
            try:
                document = json.loads(value)
            except ValueError:
                document = None
            if isinstance(document, (dict, list)):
                masked, findings = redact_json(document)
                if findings:
                    _log(where, findings)
                    return json.dumps(masked, ensure_ascii=False, separators=(",", ":"))
                masked_text, findings = redact_text(value)  # what the JSON decoding could not see (rare)
                if findings:
                    _log(where, findings)
                return masked_text
        masked_text, findings = redact_text(value)
        if findings:
            _log(where, findings)
        return masked_text
    if isinstance(value, (dict, list)):
        masked, findings = redact_json(value)
        if findings:
            _log(where, findings)
        return masked
    return value


def _log(where: str, findings) -> None:
    logger.warning("credential masked at the storage boundary: %s (%s)", where,
                   ", ".join(f"{f.rule}:{f.fingerprint[:12]}" for f in findings))


def _wrap(field) -> None:
    original = field.get_db_prep_save
    where = field_label(field)

    def get_db_prep_save(value, connection):
        return original(guard_value(value, where=where), connection)

    field.get_db_prep_save = get_db_prep_save
    setattr(field, _MARK, True)


def install() -> int:
    """Wrap every text and JSON field of the project's models not in `STORED_ON_PURPOSE`; return how many.

    Idempotent. Runs from `sessions.apps.AgentSessionsConfig.ready()` (the registry is complete then).
    Returns 0 and wraps nothing under `AGENTS_BENCH_STORAGE_GUARD_OFF=1` (benches only; see the module doc).
    """
    if os.environ.get("AGENTS_BENCH_STORAGE_GUARD_OFF") == "1":
        logger.warning("the storage guard is OFF (AGENTS_BENCH_STORAGE_GUARD_OFF=1): for a bench's 'before' side only")
        return 0
    count = 0
    for field in guarded_fields():
        if is_guarded(field) or field_label(field) in STORED_ON_PURPOSE:
            continue
        _wrap(field)
        count += 1
    return count


@contextlib.contextmanager
def suspended():
    """Let writes inside the block pass unguarded (tests that plant a raw credential on purpose, to test
    the scanners that must find one; their stores are then excluded from the suite-end scan by name)."""
    token = _suspended.set(True)
    try:
        yield
    finally:
        _suspended.reset(token)
