"""The clean corpus: 15,000+ lines a credential scanner must let through.

`clean_lines()` → the lines, in three parts:

* prose — the Python Language Reference as CPython ships it (`corpus/prose.txt`, 5,000 lines);
* code — standard-library modules that handle logins, passwords and tokens (`corpus/code.txt`:
  smtplib, imaplib, ftplib, netrc, hmac, secrets, base64, uuid, urllib.request…, 7,500 lines);
* generated — 3,000 lines from `random.Random(SEED)` of what transcripts here are full of and a
  scanner must not take for a credential: hashes and commit ids, UUIDs, base64 blobs and data
  URIs, integrity hashes, this platform's own ids (`run_…`, `sess_…`, `conv_…`, `req_…`), the
  scanner's own masked previews and `[redacted:…]` placeholders, references to secrets by name
  (`${OPENAI_API_KEY}`, `os.environ["DB_PASSWORD"]`, `${{ secrets.GITHUB_TOKEN }}`), URLs without
  passwords, cloud ARNs and account ids, Stripe object ids, Kubernetes pod names.

The same seed gives the same lines on every machine, so the tests can assert counts.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import uuid
from functools import lru_cache
from pathlib import Path

SEED = 29
CORPUS = Path(__file__).with_name("corpus")
GENERATED_LINES = 3000
ALNUM = string.ascii_letters + string.digits
PLATFORM_PREFIXES = ("run", "sess", "conv", "agent", "evt", "msg", "tgt", "repo", "mcp", "env")


def _file_lines(name: str) -> list[str]:
    return [line for line in (CORPUS / name).read_text().splitlines()[1:] if line.strip()]  # line 1 names the source


def _generated(rng: random.Random) -> list[str]:
    def hexs(n: int) -> str:
        return "".join(rng.choice("0123456789abcdef") for _ in range(n))

    def word(n: int, alphabet: str = ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    def uid() -> str:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))

    def b64(n: int) -> str:
        return base64.b64encode(bytes(rng.getrandbits(8) for _ in range(n))).decode()

    def pid(prefix: str | None = None) -> str:
        return f"{prefix or rng.choice(PLATFORM_PREFIXES)}_{hexs(32)}"

    def masked(prefix: str, n: int) -> str:
        return prefix + "*" * n + word(4)

    templates = [
        lambda: f"commit {hexs(40)}",
        lambda: f"Merge: {hexs(7)} {hexs(7)}",
        lambda: f"{hexs(64)}  agents-runner-{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}.tar.gz",
        lambda: f'"etag": "{hexs(32)}"',
        lambda: f"docker pull ghcr.io/shop/api@sha256:{hexs(64)}",
        lambda: f'{{"level": "info", "requestId": "{uid()}", "runId": "{pid("run")}", "ms": {rng.randint(1, 900)}}}',
        lambda: f"GET /v1/agents/runs/{pid('run')}/events?after={rng.randint(0, 9999)} 200 {rng.randint(1, 80)}ms",
        lambda: f"session {pid('sess')} parent {pid('sess')} seq {rng.randint(1, 500)}",
        lambda: f'{{"conversationId": "{pid("conv")}", "messageId": "{pid("msg")}", "agent": "{pid("agent")}"}}',
        lambda: f"x-request-id: req_{hexs(24)}",
        lambda: f"identity agent ext_{hexs(10)} created by user {uid()}",
        lambda: f"target {pid('tgt')} claimed repo {pid('repo')} via {pid('mcp')}",
        lambda: f'"data": "{b64(rng.choice((24, 32, 48, 96)))}"',
        lambda: f'<img src="data:image/png;base64,{b64(rng.randint(40, 120))}" alt="chart">',
        lambda: f'"integrity": "sha512-{b64(64)}"',
        lambda: f'<script src="/static/app.js" integrity="sha384-{b64(48)}" crossorigin="anonymous"></script>',
        lambda: f'"fingerprint": "{hexs(64)}", "preview": "{masked(rng.choice(("ghp_", "AKIA", "sk-p", "xoxb", "ak_3")), rng.choice((12, 28, 40)))}"',
        lambda: f"your key is [redacted:{rng.choice(('github-pat', 'api-key', 'aws-access-token', 'generic-secret'))}:{hexs(12)}] (rotated)",
        lambda: f"password = os.environ[\"{rng.choice(('DB_PASSWORD', 'SMTP_PASSWORD', 'REDIS_PASSWORD'))}\"]",
        lambda: f"api_key: ${{{rng.choice(('OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'STRIPE_SECRET_KEY'))}}}",
        lambda: "        env:\n          GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}".split("\n")[rng.randint(0, 1)],
        lambda: f"token = request.headers.get(\"Authorization\", \"\").removeprefix(\"Bearer \")  # {word(6, string.ascii_lowercase)}",
        lambda: f"DATABASE_URL=postgresql://app@db.internal:5432/{rng.choice(('shop', 'orders', 'billing'))}",
        lambda: f"git clone https://github.com/shop/{rng.choice(('api', 'web', 'infra'))}.git && cd {word(5, string.ascii_lowercase)}",
        lambda: f"arn:aws:iam::{rng.randint(10**11, 10**12 - 1)}:role/{rng.choice(('deploy', 'ci', 'reader'))}-{word(6, string.ascii_lowercase)}",
        lambda: f"s3://shop-assets-{rng.randint(100, 999)}/uploads/{uid()}/{word(10, string.ascii_lowercase)}.png",
        lambda: f"stripe: charge {rng.choice(('ch', 'pi', 'cus', 'in'))}_{word(24)} succeeded for order ord_{word(14)}",
        lambda: f"pod api-{hexs(9)}-{word(5, string.ascii_lowercase + string.digits)} is Running on node ip-10-0-{rng.randint(0, 255)}-{rng.randint(0, 255)}",
        lambda: f"twilio message SM{hexs(32)} sent to +1555{rng.randint(1000000, 9999999)}",
        lambda: f"slack channel C{word(10, string.ascii_uppercase + string.digits)} thread {rng.randint(10**9, 10**10)}.{rng.randint(100000, 999999)}",
        lambda: f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z INFO worker-{rng.randint(1, 8)} finished job {uid()} in {rng.random() * 9:.3f}s",
        lambda: f"sha1 {hashlib.sha1(word(8).encode()).hexdigest()}  md5 {hashlib.md5(word(8).encode()).hexdigest()}",
        lambda: f"const cacheKey = `runs:${{orgId}}:{uid()}`;",
        lambda: json.dumps({"id": uid(), "kind": "message", "payload": {"text": "the build is green"}, "seq": rng.randint(1, 99)}),
        lambda: f"version {rng.randint(0, 9)}.{rng.randint(0, 40)}.{rng.randint(0, 99)} released; see https://example.com/changelog#{word(8, string.ascii_lowercase)}",
        lambda: f"ssh-ed25519 {b64(51)[:68]} deploy@ci",
    ]
    return [rng.choice(templates)() for _ in range(GENERATED_LINES)]


@lru_cache(maxsize=1)
def _lines() -> tuple[str, ...]:
    return tuple(_file_lines("prose.txt") + _file_lines("code.txt") + _generated(random.Random(SEED)))


def clean_lines() -> list[str]:
    """Return every line of the clean corpus (see module doc)."""
    return list(_lines())


def clean_documents(lines_per_document: int = 40) -> list[tuple[int, str]]:
    """Return the clean corpus as `(first line index, text)` documents of `lines_per_document` lines
    (how text reaches a scanner: a reply, a file, a tool result)."""
    lines = _lines()
    return [(i, "\n".join(lines[i : i + lines_per_document])) for i in range(0, len(lines), lines_per_document)]
