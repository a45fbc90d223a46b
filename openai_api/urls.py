"""Routes of the OpenAI-compatible endpoint, mounted at `/v1/agents/openai/v1/` (the SDK's `base_url`)."""

from django.urls import path

from openai_api import views

app_name = "openai_api"

urlpatterns = [
    path("models", views.models, name="models"),
    path("models/<str:model>", views.model, name="model"),
    path("chat/completions", views.chat_completions, name="chat-completions"),
]
