"""URL map: the JSON API at /v1/agents/, the Django admin at /admin/."""

from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from agents_site.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("v1/", api.urls),
    path("", RedirectView.as_view(url="/v1/agents/docs", permanent=False)),
]
