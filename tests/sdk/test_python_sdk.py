"""sdk/python beyond envelopes: it installs from its folder, verifies Standard Webhooks deliveries,
loads the console's agent.json, and keeps a replay window."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
from standardwebhooks import Webhook

from agents_identity import Credentials, KeyPairs, jwk_of, new_webhook_secret
from agents_identity.webhooks import WebhookVerificationError, verify_webhook

ROOT = Path(__file__).resolve().parents[2]


def test_the_sdk_installs_from_its_folder(tmp_path):
    target = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(target),
                           str(ROOT / "sdk" / "python")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    probe = subprocess.run([sys.executable, "-c", "import agents_identity, agents_identity.examples.echo as e; print(agents_identity.__file__, e.echo.__name__)"],
                           env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, cwd=str(tmp_path), timeout=60)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.startswith(str(target)) and probe.stdout.strip().endswith("echo")


def test_a_delivery_verifies_and_a_tampered_one_does_not():
    secret = new_webhook_secret()
    body = json.dumps({"type": "envelope.created", "timestamp": "2026-01-01T00:00:00Z", "data": {"envelope": "v1.x"}})
    now = datetime.now(timezone.utc)
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": Webhook(secret).sign("msg_1", now, body)}
    assert verify_webhook(body.encode(), headers, secret)["data"]["envelope"] == "v1.x"
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body.replace("v1.x", "v1.y"), headers, secret)
    with pytest.raises(WebhookVerificationError):
        verify_webhook(body, headers, new_webhook_secret())


def test_the_consoles_agent_json_loads_and_a_mismatched_jwk_is_refused(tmp_path):
    keys = KeyPairs()
    data = {"base_url": "http://127.0.0.1:8000/", "agent_id": "ext_1", "agent_token": "agt_x", "x25519_private_jwk": jwk_of(keys.x25519),
            "ed25519_private_jwk": {**jwk_of(keys.ed25519), "ext": True, "key_ops": ["sign"]}}
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(data))
    loaded = Credentials.load(path)
    assert loaded.base_url == "http://127.0.0.1:8000" and loaded.keys.kid == keys.kid and loaded.keys.signing_kid == keys.signing_kid
    loaded.save(tmp_path / "saved.json")
    assert (tmp_path / "saved.json").stat().st_mode & 0o777 == 0o600
    data["x25519_private_jwk"] = {**jwk_of(keys.x25519), "x": jwk_of(KeyPairs().x25519)["x"]}
    with pytest.raises(ValueError, match="not the public half"):
        Credentials.from_dict(data)
    with pytest.raises(ValueError, match="agent_token"):
        Credentials.from_dict({k: v for k, v in data.items() if k != "agent_token"})


def test_the_webhook_server_answers_400_unverified_and_204_for_a_refused_envelope():
    import threading

    import httpx

    from agents_identity import IdentityAgent, Party, seal, text_body

    agent_keys, user_keys = KeyPairs(), KeyPairs()
    credentials = Credentials(base_url="http://127.0.0.1:9", agent_id="ext_me", agent_token="agt_x", keys=agent_keys, webhook_secret=new_webhook_secret())
    refused, answered = [], []
    agent = IdentityAgent(credentials, on_message=lambda m: answered.append(m) or None, on_refused=lambda exc, env_id, user: refused.append(exc.code),
                          log=lambda line: None)
    server = agent.webhook_server(port=0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    try:
        elsewhere = seal(body=text_body("not for you"), sender=Party("user", "u"), recipient=Party("agent", "ext_other"),
                         recipient_key=agent_keys.x25519.public_key(), signing_key=user_keys.ed25519)
        body = json.dumps({"type": "envelope.created", "timestamp": "2026-01-01T00:00:00Z",
                           "data": {"envelope_id": "env_1", "agent_id": "ext_me", "user_id": "u", "envelope": elsewhere, "created_at": "x"}})
        now = datetime.now(timezone.utc)
        headers = {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())),
                   "webhook-signature": Webhook(credentials.webhook_secret).sign("msg_1", now, body), "content-type": "application/json"}
        assert httpx.post(url, content=body, headers={**headers, "webhook-signature": "v1,AAAA"}, timeout=30).status_code == 400
        assert refused == []
        assert httpx.post(url, content=body, headers=headers, timeout=30).status_code == 204  # refused, acknowledged, never answered
        assert refused == ["not_addressed_to_you"] and answered == []
    finally:
        server.shutdown()
        server.server_close()


def test_the_guides_walks_secrets_and_venv_are_ignored_by_git():
    # docs/guides/console.md "From /create-agent to a running agent" writes agent.json (the agent's token and
    # private keys) and the .agent venv at the repository's root: `git add -A` must not take them.
    import shutil

    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    done = subprocess.run(["git", "check-ignore", "--no-index", "agent.json", ".agent/bin/python"], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["agent.json", ".agent/bin/python"], done.stdout + done.stderr


def test_the_guides_walk_is_under_ten_commands():
    # Issue 33: the console guide walks a developer from /create-agent to a running agent in under
    # ten commands (each `a && b` counts as two; console steps are comments).
    readme = (ROOT / "docs" / "guides" / "console.md").read_text()
    start = readme.index("**From `/create-agent` to a running agent**")
    opening = readme.index("\n", readme.index("```sh", start)) + 1
    block = readme[opening:readme.index("```", opening)]
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    commands = [part for line in lines if line and not line.startswith("#") for part in line.split("&&")]
    assert 0 < len(commands) < 10, commands
    assert any("pip install ./sdk/python" in c for c in commands) and any("agents_identity.examples.echo" in c for c in commands)


def test_the_websocket_client_acknowledges_reconnects_and_stops_on_revocation():
    # A stand-in for /v1/identity/ws: the first connection delivers env_1, waits for its ack and
    # drops (1012, a restart); the SDK must come back, take env_2, hand a security_alert over,
    # and stop for good on 4403 (revoked) without a third connection.
    import asyncio

    import websockets

    from agents_identity.ws import AgentSocket

    seen: dict[str, list] = {"auth": [], "acks": [], "handled": [], "alerts": []}

    async def platform(ws):
        seen["auth"].append(ws.request.headers.get("Authorization"))
        n = len(seen["auth"])
        await ws.send(json.dumps({"type": "envelope", "envelope_id": f"env_{n}", "user_id": "u", "envelope": "v1.x", "created_at": "x"}))
        seen["acks"].append(json.loads(await asyncio.wait_for(ws.recv(), 10)))
        if n == 1:
            await ws.close(1012)
            return
        await ws.send(json.dumps({"type": "security_alert", "code": "agent.token_revoked", "data": {}}))
        await ws.close(4403)  # after the alert on the same connection: the client reads the alert first

    async def main():
        async with websockets.serve(platform, "127.0.0.1", 0) as server:
            port = server.sockets[0].getsockname()[1]

            async def on_envelope(frame):
                seen["handled"].append(frame["envelope_id"])

            socket = AgentSocket(f"ws://127.0.0.1:{port}/v1/identity/ws", "agt_t", on_envelope=on_envelope,
                                 on_security_alert=lambda frame: seen["alerts"].append(frame["code"]), min_delay=0.01)
            return await asyncio.wait_for(socket.run(), 30)

    assert asyncio.run(main()) == 4403
    assert seen["auth"] == ["Bearer agt_t", "Bearer agt_t"]  # reconnected once, never after the revocation
    assert seen["handled"] == ["env_1", "env_2"]
    assert seen["acks"] == [{"type": "ack", "envelope_ids": ["env_1"]}, {"type": "ack", "envelope_ids": ["env_2"]}]
    assert seen["alerts"] == ["agent.token_revoked"]
