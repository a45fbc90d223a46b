"""Public gallery routes, mounted at /builds/ (namespace `gallery`); no login."""

from django.urls import path

from console.views import gallery

app_name = "gallery"

urlpatterns = [
    path("", gallery.build_list, name="builds"),
    path("verify.py", gallery.verifier, name="verifier"),
    path("<str:org>/<str:project>/", gallery.build_detail, name="build"),
    path("<str:org>/<str:project>/<str:session_id>/", gallery.build_detail, name="build-session"),
]
