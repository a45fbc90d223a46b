"""Admin for the identity models of the acting org (read from the org's own store).

Read-only: the API owns every rule (field rules, quota, bcrypt, Fernet, cascade), so a
ModelForm must not write around it. Token hashes and encrypted secrets are never shown.
"""

from django.contrib import admin

from tenancy.admin_site import OrgModelAdmin
from identity.models import (
    AgentCredential,
    ClientAnomaly,
    KeyBackup,
    AgentKeySet,
    AgentManifest,
    Delivery,
    DeliveryAttempt,
    Envelope,
    IdentityLock,
    IdentityProfile,
    InboxItem,
    Relation,
    TokenRotation,
    UserKeySet,
)


@admin.register(IdentityProfile)
class IdentityProfileAdmin(OrgModelAdmin):
    list_display = ("display_name", "agent", "category", "connection_mode", "health", "creator_id", "created_at")
    list_filter = ("connection_mode", "category", "health")
    search_fields = ("display_name", "agent__name", "creator_id")


@admin.register(AgentCredential)
class AgentCredentialAdmin(OrgModelAdmin):
    list_display = ("token_id", "agent_id", "created_at", "expires_at", "revoked_at", "last_used_at")
    search_fields = ("token_id", "agent_id")
    exclude = ("token_hash",)


@admin.register(AgentKeySet)
class AgentKeySetAdmin(OrgModelAdmin):
    list_display = ("agent_id", "public_key", "signing_public_key", "created_at", "expires_at", "revoked_at")
    search_fields = ("agent_id",)
    exclude = ("webhook_secret_encrypted",)


@admin.register(UserKeySet)
class UserKeySetAdmin(OrgModelAdmin):
    list_display = ("user_id", "public_key", "signing_public_key", "created_at", "expires_at", "revoked_at")
    search_fields = ("user_id",)


@admin.register(TokenRotation)
class TokenRotationAdmin(OrgModelAdmin):
    list_display = ("agent_id", "emergency", "actor", "created_at")
    list_filter = ("emergency",)
    search_fields = ("agent_id",)


@admin.register(Relation)
class RelationAdmin(OrgModelAdmin):
    list_display = ("agent_id", "user_id", "status", "created_at", "ended_at")
    list_filter = ("status",)
    search_fields = ("agent_id", "user_id")


@admin.register(Envelope)
class EnvelopeAdmin(OrgModelAdmin):
    list_display = ("public_id", "direction", "agent_id", "user_id", "message_id", "size_bytes", "created_at", "acked_at")
    list_filter = ("direction",)
    search_fields = ("public_id", "agent_id", "user_id", "message_id")
    exclude = ("body",)  # ciphertext: nothing an admin can read


class DeliveryAttemptInline(admin.TabularInline):
    model = DeliveryAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "status_code", "error", "response_body", "duration_ms", "created_at")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Delivery)
class DeliveryAdmin(OrgModelAdmin):
    list_display = ("public_id", "agent_id", "status", "attempts", "last_status_code", "next_attempt_at", "created_at")
    list_filter = ("status",)
    search_fields = ("public_id", "agent_id")
    inlines = [DeliveryAttemptInline]
    exclude = ("signing_secret_encrypted",)  # a secret: never shown


@admin.register(InboxItem)
class InboxItemAdmin(OrgModelAdmin):
    list_display = ("id", "user_id", "kind", "system_code", "agent_id", "created_at")
    list_filter = ("kind", "system_type")
    search_fields = ("user_id", "agent_id")


@admin.register(IdentityLock)
class IdentityLockAdmin(OrgModelAdmin):
    list_display = ("key",)
    search_fields = ("key",)


@admin.register(ClientAnomaly)
class ClientAnomalyAdmin(OrgModelAdmin):
    list_display = ("created_at", "kind", "user_id", "artifact_subtype", "endpoint", "conversation_id")
    list_filter = ("kind",)
    search_fields = ("user_id", "endpoint", "conversation_id")


@admin.register(KeyBackup)
class KeyBackupAdmin(OrgModelAdmin):
    list_display = ("user_id", "size_bytes", "created_at", "updated_at")
    search_fields = ("user_id",)
    exclude = ("blob",)  # opaque ciphertext: nothing to read, nothing to edit


@admin.register(AgentManifest)
class AgentManifestAdmin(OrgModelAdmin):
    """Capability manifests (read-only: an agent registers its own with its token)."""

    list_display = ("agent_id", "signing_kid", "registered_at")
    search_fields = ("agent_id", "signing_kid")
    readonly_fields = [f.name for f in AgentManifest._meta.fields]
