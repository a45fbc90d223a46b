"""The Claude Code plugin (issue 54 item 3): its manifest's shape, and its local stdio MCP server
(`agents-identity mcp`) driven by the `mcp` SDK's client against a live daphne — the user's keys
stay in a local file, a sealed message round-trips with the SDK's echo agent, the server
stores no plaintext, and read_manifest checks an agent's signed manifest on the user's machine
(issue 55)."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import stat
import sys
import time
import tomllib

import httpx
import pytest
from mcp import Client, StdioServerParameters

from agents_identity.envelope import kid
from agents_identity.manifest import build_manifest, sign_manifest
from identity.models import Envelope
from tests.identity.conftest import AgentKeys, bearer, create_agent, post
from tests.sdk.example_agents import ROOT, EchoAgent, new_credentials
from tests.support.live import LiveServer

PLUGIN = ROOT / "plugins" / "agents-identity"
NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")  # Claude Code's plugin name rule (kebab-case)
SEMVER = re.compile(r"^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$")


def test_the_plugin_manifest_has_claude_codes_shape_and_installs_the_sdks_mcp_command():
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert NAME.match(manifest["name"]) and SEMVER.match(manifest["version"]) and manifest["description"]
    assert set(manifest) <= {"name", "version", "description", "author", "homepage", "repository", "license", "keywords",
                             "commands", "agents", "skills", "hooks", "mcpServers", "outputStyles", "lspServers"}
    servers = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]
    assert servers == {"agents-identity": {"command": "agents-identity", "args": ["mcp"],
                                           "env": {"AGENTS_URL": "${AGENTS_URL}", "AGENTS_API_KEY": "${AGENTS_API_KEY}"}}}
    market = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    assert NAME.match(market["name"]) and market["owner"]["name"]
    [entry] = market["plugins"]
    assert entry["name"] == manifest["name"] and (ROOT / entry["source"] / ".claude-plugin" / "plugin.json").is_file()
    project = tomllib.loads((ROOT / "sdk" / "python" / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["agents-identity"] == "agents_identity.cli:main"
    assert project["optional-dependencies"]["mcp"] == ["mcp==2.3.0"]  # the server's own pin (requirements.txt)
    assert "mcp==2.3.0" in (ROOT / "requirements.txt").read_text().split()


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, upstream_server):
    server = LiveServer({"INFERENCE_BASE_URL": upstream_server.base_url, "INFERENCE_API_KEY": "test-key"}).start()
    yield server
    server.stop()


def server_parameters(live, key: str, keys_path) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "agents_identity", "mcp"], cwd=str(ROOT),
                                 env={"PYTHONPATH": str(ROOT / "sdk" / "python"), "AGENTS_URL": live.url, "AGENTS_API_KEY": key,
                                      "AGENTS_IDENTITY_KEYS": str(keys_path), "PATH": "/usr/bin:/bin"})


@pytest.mark.django_db(transaction=True)
def test_the_stdio_server_seals_here_and_opens_the_echo_agents_reply_here(live, make_org, tmp_path):
    org = make_org("plug")
    created = create_agent(org.client, display_name="Echo", custom_id=f"echo_mcp_{secrets.token_hex(3)}").json()
    credentials = new_credentials(live.url, created, webhook=False)
    credentials.save(tmp_path / "agent.json")
    assert post(org.client, f"/v1/identity/agents/{created['agent_id']}/relations").status_code == 201
    agent = EchoAgent(sdk="python", mode="websocket", credentials_path=tmp_path / "agent.json", log_path=tmp_path / "echo.log")
    agent.start(register=True)
    keys_path = tmp_path / "me" / "user-keys.json"

    async def go():
        async with Client(server_parameters(live, org.key, keys_path), read_timeout_seconds=60) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            listed = await client.call_tool("list_agents", {})
            manifest = await client.call_tool("read_manifest", {"agent": created["agent_id"]})
            sent = await client.call_tool("send_message", {"agent": created["custom_id"], "text": "hello from claude"})
            deadline = time.monotonic() + 30
            while True:
                inbox = await client.call_tool("read_inbox", {"limit": 10})
                texts = [item.get("text") for item in inbox.structured_content["result"]]
                if "echo: hello from claude" in texts or time.monotonic() > deadline:
                    return names, listed, manifest, sent, texts
                await asyncio.sleep(0.2)

    try:
        names, listed, manifest, sent, texts = asyncio.run(go())
    finally:
        agent.stop()

    assert names == ["list_agents", "read_inbox", "read_manifest", "send_message"]
    assert [(a["agent_id"], a["added"], a["created"]) for a in listed.structured_content["result"]] == [(created["agent_id"], True, True)]
    assert manifest.is_error and "404" in manifest.content[0].text  # the agent registered no manifest
    assert not sent.is_error and json.loads(sent.content[0].text)["envelope_id"]
    assert "echo: hello from claude" in texts
    assert stat.S_IMODE(keys_path.stat().st_mode) == 0o600 and "d" in json.loads(keys_path.read_text())["x25519_private_jwk"]
    with org.context():  # the platform holds sealed envelopes only
        bodies = [e.body for e in Envelope.objects.all()]
    assert len(bodies) == 2 and not any("hello from claude" in b for b in bodies)


@pytest.mark.django_db(transaction=True)
def test_read_manifest_returns_the_signed_manifest_verified_here_and_says_when_it_no_longer_verifies(live, make_org, tmp_path):
    org = make_org("plugm")
    created = create_agent(org.client, display_name="Echo", custom_id=f"echo_mf_{secrets.token_hex(3)}", connection_mode="websocket").json()
    keys = AgentKeys()
    assert post(org.client, f"/v1/identity/agents/{created['agent_id']}/keys/register", keys.body(webhook=False),
                **bearer(created["agent_token"])).status_code == 200
    signed = sign_manifest(build_manifest(name=created["custom_id"], description="Echoes", transports=["websocket"],
                                          messages_url=f"{live.url}/v1/identity/agents/{created['agent_id']}/messages"), keys.ed25519)
    assert post(org.client, f"/v1/identity/agents/{created['agent_id']}/manifest", {"manifest": signed},
                **bearer(created["agent_token"])).status_code == 201

    async def go():
        async with Client(server_parameters(live, org.key, tmp_path / "user-keys.json"), read_timeout_seconds=60) as client:
            before = await client.call_tool("read_manifest", {"agent": created["custom_id"]})
            async with httpx.AsyncClient(base_url=live.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=60) as http:
                rotated = await http.post(f"/v1/identity/agents/{created['agent_id']}/token/regenerate", json={"emergency": True})
            after = await client.call_tool("read_manifest", {"agent": created["agent_id"]})
            return before, rotated, after

    before, rotated, after = asyncio.run(go())

    assert not before.is_error, before.content
    read = json.loads(before.content[0].text)
    assert read["manifest"] == signed and read["signing_kid"] == kid(keys.ed25519)
    assert read["verified_here"] == {"verifies": True, "kid": kid(keys.ed25519), "error": None}
    assert read["verification"]["verifies"] is True  # the platform's own check agrees
    assert rotated.status_code == 200  # an emergency rotation revokes the key that signed it
    assert not after.is_error, after.content
    stale = json.loads(after.content[0].text)
    assert stale["manifest"] == signed and stale["signing_key_status"] == "revoked"
    assert stale["verified_here"]["verifies"] is False and "no signature of the manifest verifies" in stale["verified_here"]["error"]
    assert stale["verification"] == {"verifies": False, "kid": None, "reason": "bad_signature", "field": "signatures"}
