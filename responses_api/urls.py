"""Routes of the Responses API, mounted at `/v1/agents/openai/v1/` beside the chat completions (the SDK's `base_url`)."""

from django.urls import path

from responses_api import views

app_name = "responses_api"

urlpatterns = [
    path("responses", views.responses, name="responses"),
    path("responses/<str:response_id>", views.response, name="response"),
    path("responses/<str:response_id>/cancel", views.response_cancel, name="response-cancel"),
    path("responses/<str:response_id>/input_items", views.response_input_items, name="response-input-items"),
]
