"""agents-identity: the Python SDK of identity agents (docs/envelopes.md).

Envelopes v1 (`agents_identity.envelope`), capability manifests v1 (`manifest`, docs/manifests.md),
keys and credentials (`keys`), the identity API
(`client`), Standard Webhooks verification (`webhooks`), the WebSocket (`ws`), and
`IdentityAgent` (`agent`), which puts them together.
"""

from agents_identity.agent import IdentityAgent, IncomingMessage
from agents_identity.client import ApiError, IdentityClient
from agents_identity.envelope import REASONS, EnvelopeError, Opened, Party, Receiver, ReplayWindow, SignerKey, kid, seal, text_body
from agents_identity.keys import Credentials, KeyPairs, jwk_of, key_from_jwk, new_webhook_secret
from agents_identity.manifest import ManifestError, build_manifest, sign_manifest, verify_manifest
from agents_identity.webhooks import WebhookVerificationError, verify_webhook

__all__ = ["IdentityAgent", "IncomingMessage", "ApiError", "IdentityClient", "REASONS", "EnvelopeError", "Opened", "Party", "Receiver",
           "ReplayWindow", "SignerKey", "kid", "seal", "text_body", "Credentials", "KeyPairs", "jwk_of", "key_from_jwk",
           "new_webhook_secret", "WebhookVerificationError", "verify_webhook", "ManifestError", "build_manifest", "sign_manifest",
           "verify_manifest"]
__version__ = "1.0.0"
