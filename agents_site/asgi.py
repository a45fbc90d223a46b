"""ASGI entry point (daphne): Django's HTTP app under Channels' protocol router."""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_site.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402

application = ProtocolTypeRouter({"http": django_asgi_app})
