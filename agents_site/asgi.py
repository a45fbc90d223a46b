"""ASGI entry point (daphne): Django's HTTP app and the WebSocket routes under Channels' protocol router.

WebSocket: `/v1/identity/ws` (identity agents, authenticated by their agent token).
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_site.settings")

from django.core.asgi import get_asgi_application  # noqa: E402

django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from identity.consumers import IdentityAgentConsumer  # noqa: E402

websocket_routes = [path("v1/identity/ws", IdentityAgentConsumer.as_asgi())]

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": URLRouter(websocket_routes)})
