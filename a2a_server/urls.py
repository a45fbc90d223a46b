"""Routes of the A2A face, mounted at `/v1/agents/` before the Ninja API (its `/{ref}` routes)."""

from django.urls import path

from a2a_server import views

app_name = "a2a_server"

urlpatterns = [
    path("a2a/public/<str:org>", views.directory, name="directory"),
    path("a2a/public/<str:org>/<str:name>/.well-known/agent-card.json", views.public_card, name="public-card"),
    path("<str:ref>/a2a", views.endpoint, name="endpoint"),
    path("<str:ref>/a2a/.well-known/agent-card.json", views.card, name="card"),
    path("<str:ref>/a2a/public", views.listing, name="listing"),
]
