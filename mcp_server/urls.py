"""Route of the MCP server, mounted at `/v1/agents/` before the Ninja API (its `/{ref}` routes)."""

from django.urls import path

from mcp_server import views

app_name = "mcp_server"

urlpatterns = [
    path("mcp", views.endpoint, name="endpoint"),
]
