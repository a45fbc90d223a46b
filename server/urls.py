"""URL map: the JSON API at /v1/agents/ (its OpenAI-compatible endpoint at /v1/agents/openai/v1/, A2A at /v1/agents/{ref}/a2a, MCP at /v1/agents/mcp), the console at /console/, the public gallery at
/builds/, share links' public pages at /shared/<token>/, the Django admin at /admin/; `/` goes to the console."""

from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from server.api import api
from server.routing import indexed
from console.views.shared import shared

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/identity/", include("identity.urls")),
    # The API's includes are `indexed`: each tries only the routes whose text before the first
    # converter begins the path (server/routing.py; the same routes, in the same order).
    indexed("v1/agents/openai/v1/", include("openai_api.urls")),  # before the Ninja API: its /{ref} routes
    indexed("v1/agents/openai/v1/", include("responses_api.urls")),  # the Responses API beside it (issue 56)
    indexed("v1/agents/", include("a2a_server.urls")),  # A2A cards and JSON-RPC, before the Ninja API too
    indexed("v1/agents/", include("mcp_server.urls")),  # the MCP server (streamable HTTP), before the Ninja API too
    indexed("v1/", api.urls),
    path("console/", include("console.urls")),
    path("builds/", include("console.urls_gallery")),
    path("shared/<str:token>/", shared, name="shared"),  # a share link's public page (no login)
    path("", RedirectView.as_view(url="/console/", permanent=False)),
    # Browsers ask for /favicon.ico whatever the page links: answer with the console's icon.
    path("favicon.ico", RedirectView.as_view(url=static("console/favicon.svg"), permanent=True)),
]

handler403 = "console.views.errors.forbidden"
handler404 = "console.views.errors.not_found"
