"""The URL conf the OpenAPI generator walks: the identity routes under their public prefix."""

from django.urls import include, path

urlpatterns = [path("v1/identity/", include("identity.urls"))]
