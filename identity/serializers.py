"""Request and response shapes of the identity API (spec 001 field rules, snake_case wire).

Input serializers check each field's shape and rule (lengths, patterns, choices); the rules
that need the store or settings run in `identity.services`. Output serializers document the
answers in the OpenAPI document (views render `identity.presenters`).
"""

from __future__ import annotations

import re

from django.core.validators import RegexValidator
from rest_framework import serializers

from agents_site.schemas import scan_caller_text
from agents_site.vocabulary import AnomalyKind, ConnectionMode, EnvelopeDirection, IdentityCategory, KeyStatus, WebhookEventType

CUSTOM_ID_PATTERN = r"^[a-z0-9_]{4,30}$"
#: What an anomaly's `conversation_id` may hold: an id-like word (no `/`, no dots, no markup), or nothing.
ANOMALY_CONVERSATION_PATTERN = r"^[A-Za-z0-9_-]{0,64}$"
#: The conversation ids the console links to (rows stored before the pattern may hold anything).
CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_CUSTOM_ID_AGENT_NAME = r"^[a-z0-9][a-z0-9_]{3,29}$"  # also a valid agent name: no leading "_"


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans (DRF would turn `0` into `"0"`)."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    """A ChoiceField whose refusal lists the choices and never echoes the value sent."""

    def __init__(self, choices, **kwargs):
        super().__init__(choices, **kwargs)
        allowed = ", ".join(str(key) for key in self.choices)
        self.error_messages["invalid_choice"] = f"must be one of: {allowed}"


class _Strict(serializers.Serializer):
    """Base of every request body of the identity API: strict and scanned (issue 29).

    A field the route does not know is refused 400 naming it (a typo must not pass silently;
    the document says `additionalProperties: false`, `identity.openapi.strict_request_bodies`).
    Every text the caller wrote passes the credential scanner once the fields are valid
    (`agents_site.schemas.scan_caller_text`): a credential is 422 `secret_in_transcript` with
    findings naming the field, nothing stored. `unscanned` names fields that are not words
    (public keys, a webhook secret the agent registers on purpose, sealed envelopes, the
    encrypted backup): they are validated by shape instead.
    """

    unscanned: frozenset[str] = frozenset()

    def to_internal_value(self, data):
        if isinstance(data, dict):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        return super().to_internal_value(data)

    def validate(self, attrs):
        """Scan every caller-written text of the valid body (422 on a credential)."""
        scan_caller_text({name: value for name, value in attrs.items() if name not in self.unscanned})
        return attrs


def _custom_id_rule(value: str) -> str:
    if value and not re.fullmatch(_CUSTOM_ID_AGENT_NAME, value):
        raise serializers.ValidationError(f"must match {CUSTOM_ID_PATTERN} and start with a letter or digit")
    return value


class AgentCreateIn(_Strict):
    """POST /v1/identity/agents: the creation form (spec 001)."""

    display_name = StrictCharField(min_length=2, max_length=32)
    custom_id = StrictCharField(required=False, allow_blank=True, allow_null=True, max_length=30,
                                validators=[RegexValidator("^$|" + _CUSTOM_ID_AGENT_NAME, f"must match {CUSTOM_ID_PATTERN} and start with a letter or digit"),
                                            _custom_id_rule])
    bio = StrictCharField(required=False, allow_blank=True, max_length=500, trim_whitespace=False)
    avatar_url = StrictCharField(required=False, allow_blank=True, allow_null=True, max_length=2048)
    category = StrictChoiceField(choices=IdentityCategory.choices, required=False, allow_blank=True, allow_null=True)
    connection_mode = StrictChoiceField(choices=ConnectionMode.choices)
    webhook_url = StrictCharField(required=False, allow_blank=True, allow_null=True, max_length=2048)
    health_check_url = StrictCharField(required=False, allow_blank=True, allow_null=True, max_length=2048)


class AgentPatchIn(AgentCreateIn):
    """PATCH /v1/identity/agents/{id}: any subset of the creation fields; custom_id immutable."""

    display_name = StrictCharField(min_length=2, max_length=32, required=False)
    connection_mode = StrictChoiceField(choices=ConnectionMode.choices, required=False)


class RegenerateIn(_Strict):
    """POST …/token/regenerate: `emergency` revokes the old token and keys at once."""

    emergency = serializers.BooleanField(required=False, default=False)


#: Standard base64 with its padding (what `base64.b64decode(validate=True)` reads), non-empty.
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"
#: The base64 of 32 bytes (a raw X25519 or Ed25519 public key): 43 characters and one `=`.
KEY_PATTERN = r"^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"


class KeysRegisterIn(_Strict):
    """POST …/keys/register (agent token): base64 X25519 and Ed25519 public keys, webhook secret."""

    unscanned = frozenset({"public_key", "signing_public_key", "webhook_secret"})

    public_key = StrictCharField(trim_whitespace=True, max_length=100, validators=[RegexValidator(KEY_PATTERN, "must be the base64 of 32 bytes")])
    signing_public_key = StrictCharField(trim_whitespace=True, max_length=100, validators=[RegexValidator(KEY_PATTERN, "must be the base64 of 32 bytes")])
    webhook_secret = StrictCharField(required=False, allow_blank=True, allow_null=True, max_length=400)


class EnvelopeIn(_Strict):
    """A v1 envelope (docs/envelopes.md): `v1.<header>.<sealed>.<signature>`, at most 256 KiB."""

    unscanned = frozenset({"envelope"})  # sealed: the platform cannot read it (the client scans before sealing)

    envelope = StrictCharField(trim_whitespace=True, max_length=None)


class UserKeysIn(_Strict):
    """PUT /v1/identity/users/me/keys: the user's base64 X25519 and Ed25519 public keys."""

    unscanned = frozenset({"public_key", "signing_public_key"})

    public_key = StrictCharField(trim_whitespace=True, max_length=100, validators=[RegexValidator(KEY_PATTERN, "must be the base64 of 32 bytes")])
    signing_public_key = StrictCharField(trim_whitespace=True, max_length=100, validators=[RegexValidator(KEY_PATTERN, "must be the base64 of 32 bytes")])


# ---- answers (documentation) ----


class ErrorOut(serializers.Serializer):
    """The one error shape: `{status, code, error}` plus named extras."""

    status = serializers.IntegerField()
    code = serializers.CharField()
    error = serializers.CharField()


class LimitErrorOut(ErrorOut):
    """409: `agent_exists`, or `agent_limit_exceeded` with `error_code` AGT_008 and the `limit`."""

    error_code = serializers.CharField(required=False)
    limit = serializers.IntegerField(required=False)


class RateErrorOut(ErrorOut):
    """429: `retry_after` seconds."""

    retry_after = serializers.IntegerField()


class HealthOut(serializers.Serializer):
    status = serializers.CharField()
    detail = serializers.CharField(allow_null=True)
    checked_at = serializers.CharField(allow_null=True)


class PublicKeysOut(serializers.Serializer):
    """A registered key set's public half: seal to `current`, accept `current` and `grace`."""

    kid = serializers.CharField()
    public_key = serializers.CharField()
    signing_kid = serializers.CharField()
    signing_public_key = serializers.CharField()
    status = StrictChoiceField(choices=KeyStatus.choices)
    registered_at = serializers.CharField()
    expires_at = serializers.CharField(allow_null=True)
    revoked_at = serializers.CharField(allow_null=True)


class ManifestIn(_Strict):
    """POST …/manifest (agent token): the signed capability manifest, an A2A agent card (docs/manifests.md)."""

    # Checked by its own rules (identity.manifest_format): the card's text is scanned without its
    # signatures (base64url JWS parts are not words), in identity.services.manifest_register.
    unscanned = frozenset({"manifest"})

    manifest = serializers.JSONField(help_text="the signed A2A agent card (proto3 JSON, with signatures)")


class ManifestVerificationOut(serializers.Serializer):
    """The platform's check of a stored manifest now, with the agent's current and in-grace signing keys."""

    verifies = serializers.BooleanField(help_text="one signature verifies with a current or in-grace signing key of the agent")
    kid = serializers.CharField(allow_null=True, help_text="the key id that verified (null when none did)")
    reason = serializers.CharField(allow_null=True, help_text="why it does not verify (a manifest_invalid reason, e.g. bad_signature)")
    field = serializers.CharField(allow_null=True, help_text="the JSON path at fault (e.g. signatures)")


class ManifestOut(serializers.Serializer):
    """An identity agent's registered capability manifest, the status of the key that signed it and whether it verifies now."""

    agent_id = serializers.CharField()
    manifest = serializers.JSONField()
    signing_kid = serializers.CharField()
    signing_key_status = serializers.ChoiceField(choices=KeyStatus.values)
    verification = ManifestVerificationOut()
    registered_at = serializers.CharField()


class KeySetOut(PublicKeysOut):
    webhook_secret_set = serializers.BooleanField()


class AgentKeysOut(serializers.Serializer):
    """An identity agent's key sets, newest first (the last 20, revoked ones included)."""

    agent_id = serializers.CharField()
    keys = PublicKeysOut(many=True)


class UserKeysOut(serializers.Serializer):
    """A user's key sets in the org, newest first (the last 20, superseded ones included)."""

    user_id = serializers.CharField()
    keys = PublicKeysOut(many=True)


class AgentOut(serializers.Serializer):
    """An identity agent (never its token or secrets)."""

    agent_id = serializers.CharField()
    custom_id = serializers.CharField()
    display_name = serializers.CharField()
    bio = serializers.CharField()
    avatar_url = serializers.CharField(allow_null=True)
    category = serializers.CharField(allow_null=True)
    connection_mode = serializers.CharField()
    webhook_url = serializers.CharField(allow_null=True)
    health_check_url = serializers.CharField(allow_null=True)
    health = HealthOut()
    hosting = serializers.CharField()
    creator_id = serializers.CharField()
    public_keys = KeySetOut(many=True)
    created_at = serializers.CharField()
    updated_at = serializers.CharField()


class AgentCreatedOut(AgentOut):
    """201: the agent and its token (shown this once)."""

    agent_token = serializers.CharField()


class AgentListOut(serializers.Serializer):
    agents = AgentOut(many=True)


class TokenOut(serializers.Serializer):
    """A regenerated token (shown this once) and until when the old one stays valid."""

    agent_id = serializers.CharField()
    agent_token = serializers.CharField()
    emergency = serializers.BooleanField()
    previous_valid_until = serializers.CharField(allow_null=True)


class PreviewOut(serializers.Serializer):
    affected_h2a_count = serializers.IntegerField()
    affected_users_count = serializers.IntegerField()


class RelationOut(serializers.Serializer):
    agent_id = serializers.CharField()
    user_id = serializers.CharField()
    status = serializers.CharField()
    created_at = serializers.CharField()
    ended_at = serializers.CharField(allow_null=True)


class RelationListOut(serializers.Serializer):
    relations = RelationOut(many=True)


class PublicAgentOut(serializers.Serializer):
    agent_id = serializers.CharField()
    custom_id = serializers.CharField()
    display_name = serializers.CharField()
    avatar_url = serializers.CharField(allow_null=True)
    category = serializers.CharField(allow_null=True)


class UserContextOut(serializers.Serializer):
    user_id = serializers.CharField()
    agents = PublicAgentOut(many=True)


class EnvelopeOut(serializers.Serializer):
    envelope_id = serializers.CharField()
    message_id = serializers.CharField(allow_null=True)
    direction = StrictChoiceField(choices=EnvelopeDirection.choices)
    agent_id = serializers.CharField()
    user_id = serializers.CharField()
    envelope = serializers.CharField()
    size_bytes = serializers.IntegerField()
    created_at = serializers.CharField()


class ConversationOut(serializers.Serializer):
    """The envelopes between the caller and an agent, both ways, newest first."""

    envelopes = EnvelopeOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class EnvelopeAcceptedOut(serializers.Serializer):
    envelope_id = serializers.CharField()
    message_id = serializers.CharField()
    delivery_id = serializers.CharField(allow_null=True)
    created_at = serializers.CharField()


class SystemOut(serializers.Serializer):
    type = serializers.CharField()
    code = serializers.CharField()
    data = serializers.DictField()


class InboxItemOut(serializers.Serializer):
    id = serializers.CharField()
    kind = serializers.CharField()
    agent_id = serializers.CharField()
    created_at = serializers.CharField()
    envelope = EnvelopeOut(required=False)
    system = SystemOut(required=False)


class InboxOut(serializers.Serializer):
    items = InboxItemOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class AttemptOut(serializers.Serializer):
    number = serializers.IntegerField()
    status_code = serializers.IntegerField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    response_body = serializers.CharField(allow_null=True, help_text="At most 4 KiB of the receiver's answer, credentials masked.")
    duration_ms = serializers.IntegerField()
    at = serializers.CharField()


class DeliveryOut(serializers.Serializer):
    delivery_id = serializers.CharField()
    type = serializers.ChoiceField(choices=[WebhookEventType.ENVELOPE, WebhookEventType.SECURITY_ALERT], help_text="What the delivery carries: an envelope, or a security alert (a system message).")
    envelope_id = serializers.CharField(allow_null=True, help_text="The envelope delivered; null for a security alert.")
    agent_id = serializers.CharField()
    url = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    last_status_code = serializers.IntegerField(allow_null=True)
    last_error = serializers.CharField(allow_null=True)
    next_attempt_at = serializers.CharField(allow_null=True)
    created_at = serializers.CharField()
    delivered_at = serializers.CharField(allow_null=True)
    attempt_log = AttemptOut(many=True)


class DeliveryListOut(serializers.Serializer):
    deliveries = DeliveryOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class AnomalyIn(_Strict):
    """POST /v1/identity/anomalies: what a client's client_action executor refused (names only, no values)."""

    kind = StrictChoiceField(choices=AnomalyKind.choices)
    artifact_subtype = StrictCharField(required=False, allow_blank=True, max_length=64)
    endpoint = StrictCharField(required=False, allow_blank=True, max_length=300)
    conversation_id = StrictCharField(required=False, allow_blank=True, max_length=64,
                                      validators=[RegexValidator(ANOMALY_CONVERSATION_PATTERN, "must be an id: letters, digits, _ and -")])
    detail = serializers.DictField(required=False, child=StrictCharField(max_length=300, allow_blank=True))


class AnomalyOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = StrictChoiceField(choices=AnomalyKind.choices)
    artifact_subtype = serializers.CharField()
    endpoint = serializers.CharField()
    conversation_id = serializers.CharField()
    detail = serializers.DictField(child=serializers.CharField())
    created_at = serializers.DateTimeField()


class BackupIn(_Strict):
    """PUT /v1/identity/backup: the key bundle, encrypted in the browser (base64, opaque here)."""

    unscanned = frozenset({"encrypted_backup_blob_v2"})

    encrypted_backup_blob_v2 = StrictCharField(trim_whitespace=True, max_length=None, min_length=4,
                                               validators=[RegexValidator(BASE64_PATTERN, "must be base64")])


class BackupStoredOut(serializers.Serializer):
    size_bytes = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class BackupOut(BackupStoredOut):
    encrypted_backup_blob_v2 = serializers.CharField()
