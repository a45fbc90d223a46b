from django.apps import AppConfig


class ServerConfig(AppConfig):
    """The composition root as a Django app: its management commands (`qcluster`, overriding django-q2's, and `serve`)."""

    default = True
    name = "server"
