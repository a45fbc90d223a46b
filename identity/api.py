"""The identity API under /v1/identity/ (spec 001), on Django REST framework. Thin: parse, call, shape.

Two credentials: the user principal (API key, gateway JWT or console session — exactly as
/v1/agents) on every route except the three spec 001 marks "agent token"
(`…/keys/register`, `…/user-context/{user_id}/agents`, `/users/{user_id}/messages`), which take
`Authorization: Bearer agt_…`. Every error is the one error shape (`identity.exceptions`).
"""

from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_site.errors import Forbidden, NotFound
from agents_site.pagination import CURSOR_MAX_LENGTH
from agents_site.vocabulary import DeliveryStatus
from agents_site.wire import rfc3339
from identity import messaging, selectors, services
from identity import serializers as s
from identity.authentication import AgentTokenAuthentication, UserPrincipalAuthentication
from identity.presenters import (
    anomaly_view,
    backup_view,
    delivery_view,
    envelope_view,
    identity_view,
    inbox_item_view,
    keyset_view,
    manifest_view,
    public_identity_view,
    public_keys_view,
    relation_view,
)
from identity.services import IdentityInput
from identity.throttles import IdentityCreateThrottle
from tenancy import stores


CURSOR = OpenApiParameter("cursor", {"type": "string", "maxLength": CURSOR_MAX_LENGTH}, description=(
    "next_cursor of the previous page of this list (signed and bound to the list and the org: any other value is a 400)"))
LIMIT = OpenApiParameter("limit", int, description="page size 1..200 (out of range: 50)")


def _errors(*codes: int) -> dict:
    special = {409: s.ErrorOut, 429: s.RateErrorOut}
    return {code: special.get(code, s.ErrorOut) for code in codes}


class IdentityView(APIView):
    """Base view: user-principal authentication, no DRF permissions (authentication decides)."""

    authentication_classes = [UserPrincipalAuthentication]
    permission_classes: list = []
    throttle_classes: list = []

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        caller = request.auth
        # An agent-token request acts for the token's org (the middleware set none for it).
        if hasattr(caller, "credential_id") and stores.current_org() != caller.org_slug:
            self._org_token = stores.set_current(caller.org_slug)

    def dispatch(self, request, *args, **kwargs):
        self._org_token = None
        try:
            return super().dispatch(request, *args, **kwargs)
        finally:
            if self._org_token is not None:
                stores.reset_current(self._org_token)

    def parse(self, serializer_class, request, *, partial: bool = False) -> dict:
        """Validate the JSON body with `serializer_class`; return only the fields sent."""
        data = request.data if request.data is not None else {}
        serializer = serializer_class(data=data, partial=partial)
        serializer.is_valid(raise_exception=True)
        sent = set(data) if isinstance(data, dict) else set()
        return {k: v for k, v in serializer.validated_data.items() if k in sent or k in ("emergency",)}

    @staticmethod
    def user_id(request) -> str:
        """Return the calling user's id on the identity wire: the principal's subject."""
        return request.auth.subject


OWN_AGENT_ONLY = "an agent token acts only for its own agent"


class AgentTokenView(IdentityView):
    """Base of the agent-token routes."""

    authentication_classes = [AgentTokenAuthentication]

    @staticmethod
    def own_agent(request, ref: str):
        """Return the calling agent's profile if `ref` names it; else one 403 (`OWN_AGENT_ONLY`).

        Another agent of the org, another org's agent and an id nobody has get the same status
        and sentence, so the answer never confirms that an id exists (issue 50 item 2).
        """
        try:
            profile = selectors.identity_get(ref=ref)
        except NotFound:
            profile = None
        if profile is None or profile.agent_id != request.auth.agent_id:
            raise Forbidden(OWN_AGENT_ONLY)
        return profile


def _input(fields: dict) -> IdentityInput:
    return IdentityInput(**{k: ("" if v is None else v) for k, v in fields.items()})


class AgentsView(IdentityView):
    throttle_scope = "identity_create"

    def get_throttles(self):
        return [IdentityCreateThrottle()] if self.request.method == "POST" else []

    @extend_schema(operation_id="identity_agents_list", summary="List your identity agents", responses={200: s.AgentListOut, **_errors(403)})
    def get(self, request):
        """Return the identity agents the caller created in the org (spec 001: the agent list)."""
        profiles = selectors.identity_list(creator_id=self.user_id(request))
        keys = selectors.valid_keysets(agent_ids=[p.agent_id for p in profiles])
        return Response({"agents": [identity_view(p, keysets=keys.get(p.agent_id)) for p in profiles]})

    @extend_schema(
        operation_id="identity_agents_create",
        summary="Create an identity agent (its token is shown once)",
        request=s.AgentCreateIn,
        responses={201: s.AgentCreatedOut, **_errors(400, 403, 409, 413, 429), 409: s.LimitErrorOut},
    )
    def post(self, request):
        """Create an identity agent (spec 001: POST /agents) → 201 with `agent_token`, once."""
        fields = self.parse(s.AgentCreateIn, request)
        profile, token = services.identity_agent_create(creator_id=self.user_id(request), data=_input(fields))
        return Response({**identity_view(profile, keysets=[]), "agent_token": token}, status=201)


class AgentView(IdentityView):
    @extend_schema(operation_id="identity_agents_get", summary="Read one of your identity agents", responses={200: s.AgentOut, **_errors(403, 404)})
    def get(self, request, ref: str):
        """Return identity agent `ref` (id or custom_id) if the caller created it; else 404."""
        profile = selectors.identity_get_owned(ref=ref, creator_id=self.user_id(request))
        keys = selectors.valid_keysets(agent_ids=[profile.agent_id])
        return Response(identity_view(profile, keysets=keys.get(profile.agent_id)))

    @extend_schema(operation_id="identity_agents_patch", summary="Change an identity agent", request=s.AgentPatchIn, responses={200: s.AgentOut, **_errors(400, 403, 404)})
    def patch(self, request, ref: str):
        """Change identity agent `ref`; omitted fields keep their value; custom_id is immutable."""
        profile = selectors.identity_get_owned(ref=ref, creator_id=self.user_id(request))
        fields = self.parse(s.AgentPatchIn, request, partial=True)
        profile = services.identity_agent_update(profile=profile, data=_input(fields))
        keys = selectors.valid_keysets(agent_ids=[profile.agent_id])
        return Response(identity_view(profile, keysets=keys.get(profile.agent_id)))

    @extend_schema(operation_id="identity_agents_delete", summary="Delete an identity agent (cascade)", responses={204: None, **_errors(403, 404)})
    def delete(self, request, ref: str):
        """Delete identity agent `ref`: relations terminated, users alerted, token and keys revoked → 204."""
        profile = selectors.identity_get_owned(ref=ref, creator_id=self.user_id(request))
        services.identity_agent_delete(profile=profile)
        return Response(status=204)


class DeletionPreviewView(IdentityView):
    @extend_schema(operation_id="identity_agents_deletion_preview", summary="What deleting the agent would affect", responses={200: s.PreviewOut, **_errors(403, 404)})
    def get(self, request, ref: str):
        """Return `{affected_h2a_count, affected_users_count}` (spec 001 cascade preview)."""
        profile = selectors.identity_get_owned(ref=ref, creator_id=self.user_id(request))
        return Response(selectors.deletion_preview(agent_id=profile.agent_id))


class RegenerateView(IdentityView):
    @extend_schema(operation_id="identity_token_regenerate", summary="Rotate the agent token", request=s.RegenerateIn, responses={200: s.TokenOut, **_errors(400, 403, 404, 429)})
    def post(self, request, ref: str):
        """Mint a new token (shown once); old one valid 7 days, or revoked at once when `emergency`."""
        profile = selectors.identity_get_owned(ref=ref, creator_id=self.user_id(request))
        emergency = bool(self.parse(s.RegenerateIn, request).get("emergency", False))
        token = services.token_regenerate(profile=profile, emergency=emergency, actor=request.auth.actor)
        until = None
        if not emergency:
            from datetime import timedelta

            from django.conf import settings

            until = rfc3339(timezone.now() + timedelta(seconds=int(settings.AGENTS_IDENTITY_GRACE_SECONDS)))
        return Response({"agent_id": profile.agent_id, "agent_token": token, "emergency": emergency, "previous_valid_until": until})


class KeysRegisterView(AgentTokenView):
    @extend_schema(operation_id="identity_keys_register", summary="Register public keys (agent token)", request=s.KeysRegisterIn, responses={200: s.KeySetOut, **_errors(400, 403)})
    def post(self, request, ref: str):
        """Register the agent's X25519 + Ed25519 public keys (and webhook secret) with its own token."""
        profile = self.own_agent(request, ref)
        fields = self.parse(s.KeysRegisterIn, request)
        keyset = services.keys_register(
            agent_id=profile.agent_id,
            public_key=fields.get("public_key"),
            signing_public_key=fields.get("signing_public_key"),
            webhook_secret=fields.get("webhook_secret"),
        )
        return Response(keyset_view(keyset))


class ManifestView(IdentityView):
    """`/v1/identity/agents/{ref}/manifest`: the agent's capability manifest (docs/manifests.md).

    GET: any member of the org (user principal). POST: the agent itself, with its token.
    """

    def get_authenticators(self):
        request = getattr(self, "request", None)  # the schema generator asks before a request is set
        if getattr(request, "method", None) == "POST":
            return [AgentTokenAuthentication()]
        return super().get_authenticators()

    @extend_schema(operation_id="identity_manifest_get", summary="The agent's signed capability manifest",
                   responses={200: s.ManifestOut, **_errors(403, 404)})
    def get(self, request, ref: str):
        """Return identity agent `ref`'s registered manifest, the status of the key that signed it and whether it verifies now; 404 when none."""
        profile = selectors.identity_get(ref=ref)
        manifest = selectors.manifest_get(agent_id=profile.agent_id)
        return Response(manifest_view(manifest, key_status=selectors.manifest_key_status(manifest),
                                      verification=selectors.manifest_verification(manifest)))

    @extend_schema(operation_id="identity_manifest_register", summary="Register the agent's capability manifest (agent token)",
                   request=s.ManifestIn, responses={201: s.ManifestOut, 200: s.ManifestOut, **_errors(400, 403, 413, 422)})
    def post(self, request, ref: str):
        """Register (or replace) the agent's signed manifest → 201 (200 when it replaced one).

        400 `manifest_invalid` with `reason` and `field` (schema, extension version or params,
        no or no verifying signature); 403 another agent's token; 413 too large; 422 a credential in it.
        """
        profile = AgentTokenView.own_agent(request, ref)
        fields = self.parse(s.ManifestIn, request)
        manifest, created = services.manifest_register(profile=profile, manifest=fields.get("manifest"))
        return Response(manifest_view(manifest, key_status=selectors.manifest_key_status(manifest),
                                      verification=selectors.manifest_verification(manifest)), status=201 if created else 200)


class RelationsView(IdentityView):
    @extend_schema(operation_id="identity_relations_add", summary="Add the agent (H2A relation)", request=None, responses={201: s.RelationOut, 200: s.RelationOut, **_errors(403, 404)})
    def post(self, request, ref: str):
        """Add identity agent `ref` for the caller → 201 (200 when already added)."""
        profile = selectors.identity_get(ref=ref)
        relation, created = services.relation_add(profile=profile, user_id=self.user_id(request))
        return Response(relation_view(relation), status=201 if created else 200)

    @extend_schema(operation_id="identity_relations_remove", summary="Remove the agent (end the relation)", responses={204: None, **_errors(403, 404)})
    def delete(self, request, ref: str):
        """End the caller's relation with identity agent `ref` → 204 (404 without one)."""
        profile = selectors.identity_get(ref=ref)
        services.relation_remove(profile=profile, user_id=self.user_id(request))
        return Response(status=204)


class MyRelationsView(IdentityView):
    @extend_schema(operation_id="identity_relations_mine", summary="Your active relations", responses={200: s.RelationListOut, **_errors(403)})
    def get(self, request):
        """Return the caller's active relations with identity agents, newest first."""
        return Response({"relations": [relation_view(r) for r in selectors.user_relations(user_id=self.user_id(request))]})


class AgentKeysView(IdentityView):
    @extend_schema(operation_id="identity_agent_keys", summary="The agent's public keys (to seal to, and to verify its replies)",
                   responses={200: s.AgentKeysOut, **_errors(403, 404)})
    def get(self, request, ref: str):
        """Return identity agent `ref`'s key sets, newest first, for its creator or a user with an active relation (else 404)."""
        profile = selectors.identity_get_related(ref=ref, user_id=self.user_id(request))
        return Response({"agent_id": profile.agent_id, "keys": [public_keys_view(k) for k in selectors.agent_key_history(agent_id=profile.agent_id)]})


class MyKeysView(IdentityView):
    @extend_schema(operation_id="identity_user_keys_mine", summary="Your public keys in this org", responses={200: s.UserKeysOut, **_errors(403)})
    def get(self, request):
        """Return the caller's registered key sets in the org, newest first (empty when none)."""
        user = self.user_id(request)
        return Response({"user_id": user, "keys": [public_keys_view(k) for k in selectors.user_key_history(user_id=user)]})

    @extend_schema(operation_id="identity_user_keys_put", summary="Register your public keys (made in your browser)", request=s.UserKeysIn,
                   responses={200: s.UserKeysOut, 201: s.UserKeysOut, **_errors(400, 403)})
    def put(self, request):
        """Register the caller's X25519 + Ed25519 public keys → 201 (a new current set; the previous one in grace), 200 when unchanged."""
        user = self.user_id(request)
        fields = self.parse(s.UserKeysIn, request)
        _, created = services.user_keys_put(user_id=user, public_key=fields.get("public_key"), signing_public_key=fields.get("signing_public_key"))
        return Response({"user_id": user, "keys": [public_keys_view(k) for k in selectors.user_key_history(user_id=user)]}, status=201 if created else 200)


class UserKeysView(AgentTokenView):
    @extend_schema(operation_id="identity_user_keys", summary="A user's public keys (agent token)", responses={200: s.UserKeysOut, **_errors(403, 404)})
    def get(self, request, ref: str, user_id: str):
        """Return `user_id`'s key sets in the org if the user has an active relation with the calling agent (else 404)."""
        profile = self.own_agent(request, ref)
        if not selectors.has_active_relation(agent_id=profile.agent_id, user_id=user_id):
            raise NotFound("user not found")
        return Response({"user_id": user_id, "keys": [public_keys_view(k) for k in selectors.user_key_history(user_id=user_id)]})


class UserContextView(AgentTokenView):
    @extend_schema(operation_id="identity_user_context", summary="The user's agents (agent token)", responses={200: s.UserContextOut, **_errors(403, 404)})
    def get(self, request, ref: str, user_id: str):
        """Return the identity agents `user_id` has active relations with, if one is with the caller (else 404)."""
        profile = self.own_agent(request, ref)
        agents = selectors.user_context_agents(agent_id=profile.agent_id, user_id=user_id)
        return Response({"user_id": user_id, "agents": [public_identity_view(p) for p in agents]})


class AgentMessagesView(IdentityView):
    @extend_schema(operation_id="identity_conversation", summary="Your envelopes with the agent, both ways",
                   parameters=[CURSOR, LIMIT], responses={200: s.ConversationOut, **_errors(400, 403, 404)})
    def get(self, request, ref: str):
        """Return one page of the envelopes between the caller and agent `ref` (creator or related user), newest first."""
        user = self.user_id(request)
        profile = selectors.identity_get_related(ref=ref, user_id=user)
        q = request.query_params
        rows, cursor = selectors.conversation_page(agent_id=profile.agent_id, user_id=user, cursor=q.get("cursor"), limit=q.get("limit"))
        return Response({"envelopes": [envelope_view(e) for e in rows], "next_cursor": cursor})

    @extend_schema(operation_id="identity_messages_to_agent", summary="Send the agent an envelope", request=s.EnvelopeIn, responses={202: s.EnvelopeAcceptedOut, **_errors(400, 403, 404, 409, 413)})
    def post(self, request, ref: str):
        """Store and forward a v1 envelope to identity agent `ref` → 202 (webhook or WebSocket).

        400 not v1, addressed elsewhere, or `envelope_key_unknown` (not sealed to a current or
        in-grace key of the agent, or not signed with one of the caller's); 409
        `envelope_replayed` (this message id was sent before); 413 too large.
        """
        profile = selectors.identity_get(ref=ref)
        fields = self.parse(s.EnvelopeIn, request)
        envelope, delivery = messaging.envelope_to_agent(profile=profile, user_id=self.user_id(request), envelope=fields.get("envelope"))
        return Response(
            {"envelope_id": envelope.public_id, "message_id": envelope.message_id, "delivery_id": delivery.public_id if delivery else None,
             "created_at": rfc3339(envelope.created_at)},
            status=202,
        )


class UserMessagesView(AgentTokenView):
    @extend_schema(operation_id="identity_messages_to_user", summary="Send a user an envelope (agent token)", request=s.EnvelopeIn, responses={201: s.EnvelopeOut, **_errors(400, 403, 404, 409, 413)})
    def post(self, request, user_id: str):
        """Put a v1 envelope in `user_id`'s inbox; only with an active relation (else 404) → 201 (400/409/413 as to an agent)."""
        fields = self.parse(s.EnvelopeIn, request)
        envelope, _ = messaging.envelope_to_user(agent_id=request.auth.agent_id, user_id=user_id, envelope=fields.get("envelope"))
        return Response(envelope_view(envelope), status=201)


class InboxView(IdentityView):
    @extend_schema(
        operation_id="identity_inbox",
        summary="Your inbox: envelopes and system messages",
        parameters=[CURSOR, LIMIT],
        responses={200: s.InboxOut, **_errors(400, 403)},
    )
    def get(self, request):
        """Return one page of the caller's inbox, newest first, and `next_cursor` (null at the end)."""
        items, cursor = selectors.inbox_page(user_id=self.user_id(request), cursor=request.query_params.get("cursor"), limit=request.query_params.get("limit"))
        return Response({"items": [inbox_item_view(i) for i in items], "next_cursor": cursor})


class DeliveriesView(IdentityView):
    @extend_schema(
        operation_id="identity_deliveries",
        summary="The agent's webhook delivery log",
        parameters=[OpenApiParameter("status", str, enum=DeliveryStatus.values, description="only deliveries in this status"), CURSOR, LIMIT],
        responses={200: s.DeliveryListOut, **_errors(400, 403, 404)},
    )
    def get(self, request, ref: str):
        """Return the webhook deliveries of identity agent `ref` (creator only), newest first, with attempts."""
        profile = selectors.identity_get_owned(ref=ref, creator_id=self.user_id(request))
        q = request.query_params
        rows, cursor = selectors.delivery_page(agent_id=profile.agent_id, status=q.get("status"), cursor=q.get("cursor"), limit=q.get("limit"))
        return Response({"deliveries": [delivery_view(r) for r in rows], "next_cursor": cursor})


class ReplayView(IdentityView):
    @extend_schema(operation_id="identity_delivery_replay", summary="Deliver an envelope again", request=None, responses={202: s.DeliveryOut, **_errors(403, 404, 409)})
    def post(self, request, delivery_id: str):
        """Queue a new delivery of a finished (e.g. dead-lettered) delivery's envelope → 202 (creator only)."""
        delivery = selectors.delivery_get(public_id=delivery_id)
        profile = selectors.identity_get_owned(ref=delivery.agent_id, creator_id=self.user_id(request))
        replay = messaging.delivery_replay(delivery=delivery, profile=profile)
        return Response(delivery_view(replay, with_attempts=False), status=202)


class AnomaliesView(IdentityView):
    @extend_schema(operation_id="identity_anomalies_report", summary="Report what a client refused in an artifact form",
                   request=s.AnomalyIn, responses={201: s.AnomalyOut, **_errors(400, 403, 422)})
    def post(self, request):
        """Store one anomaly a client_action executor reported (spec 001: allow-list, auth, JSONPath, fields) → 201.

        Names only (the endpoint, the subtype, the field): a credential anywhere in the report is
        refused 422 `secret_in_transcript`. Org admins see the reports (console, admin).
        """
        fields = self.parse(s.AnomalyIn, request)
        anomaly = services.anomaly_record(user_id=self.user_id(request), **fields)
        return Response(anomaly_view(anomaly), status=201)


class BackupView(IdentityView):
    @extend_schema(operation_id="identity_backup_get", summary="Your encrypted key backup", responses={200: s.BackupOut, **_errors(403, 404)})
    def get(self, request):
        """Return the caller's `encrypted_backup_blob_v2` with its size and times; 404 when there is none."""
        return Response(backup_view(selectors.backup_get(user_id=self.user_id(request)), with_blob=True))

    @extend_schema(operation_id="identity_backup_put", summary="Store your encrypted key backup", request=s.BackupIn,
                   responses={200: s.BackupStoredOut, **_errors(400, 403, 413)})
    def put(self, request):
        """Store the caller's one `encrypted_backup_blob_v2` (base64, opaque; replaces the earlier one) → 200.

        400 not base64; 413 over `AGENTS_IDENTITY_BACKUP_MAX_BYTES` characters (`limit`).
        """
        fields = self.parse(s.BackupIn, request)
        return Response(backup_view(services.backup_put(user_id=self.user_id(request), blob=fields["encrypted_backup_blob_v2"]), with_blob=False))

    @extend_schema(operation_id="identity_backup_delete", summary="Delete your encrypted key backup", responses={204: None, **_errors(403, 404)})
    def delete(self, request):
        """Delete the caller's backup → 204; 404 when there is none."""
        services.backup_delete(user_id=self.user_id(request))
        return Response(status=204)
