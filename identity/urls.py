"""URL map of /v1/identity/ (spec 001). Mounted by server.urls; the WebSocket route
`/v1/identity/ws` is in server.asgi."""

from django.urls import path

from identity import api
from identity.openapi import IdentityDocsView, IdentitySchemaView
from identity.stream import inbox_stream_view

urlpatterns = [
    path("openapi.json", IdentitySchemaView.as_view(urlconf="identity.urls_schema"), name="identity-openapi"),
    path("docs", IdentityDocsView.as_view(), name="identity-docs"),
    path("agents", api.AgentsView.as_view()),
    path("agents/<str:ref>", api.AgentView.as_view()),
    path("agents/<str:ref>/deletion-preview", api.DeletionPreviewView.as_view()),
    path("agents/<str:ref>/token/regenerate", api.RegenerateView.as_view()),
    path("agents/<str:ref>/keys/register", api.KeysRegisterView.as_view()),
    path("agents/<str:ref>/manifest", api.ManifestView.as_view()),
    path("agents/<str:ref>/relations", api.RelationsView.as_view()),
    path("agents/<str:ref>/user-context/<str:user_id>/agents", api.UserContextView.as_view()),
    path("agents/<str:ref>/messages", api.AgentMessagesView.as_view()),
    path("agents/<str:ref>/keys", api.AgentKeysView.as_view()),
    path("agents/<str:ref>/users/<str:user_id>/keys", api.UserKeysView.as_view()),
    path("agents/<str:ref>/deliveries", api.DeliveriesView.as_view()),
    path("deliveries/<str:delivery_id>/replay", api.ReplayView.as_view()),
    path("users/me/keys", api.MyKeysView.as_view()),
    path("users/<str:user_id>/messages", api.UserMessagesView.as_view()),
    path("relations", api.MyRelationsView.as_view()),
    path("inbox", api.InboxView.as_view()),
    path("inbox/stream", inbox_stream_view),
    path("anomalies", api.AnomaliesView.as_view()),
    path("backup", api.BackupView.as_view()),
]
