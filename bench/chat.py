"""Benchmark: time to first token through the platform against the gateway's own, same run.

Starts the loopback OpenAI-compatible upstream (tests/support/upstream.py) streaming its reply
word by word — the first word after `--first-token-ms` (default 300 ms, a real model's time to
first token), each next word `--token-ms` later (default 30 ms) — and a real daphne process,
then measures, interleaved, each over keep-alive connections:

* gateway:  `POST {upstream}/chat/completions` with `stream: true` → the first chunk carrying
            content (what a client talking to the model directly would see);
* chat:     `POST /v1/agents/chat` with `stream: true` → the first `event: delta` frame (auth,
            the conversation, the balance gate, the run record and its session, the gateway's
            stream, the credential hold-back, the SSE frame);
* openai:   `POST /v1/agents/openai/v1/chat/completions` with `stream: true` → the first chunk
            carrying content (the same through the OpenAI-compatible endpoint).

The ratio is ours ÷ the gateway's (goal ≤ 1.2 at a 300 ms first token). The credential
hold-back emits a word once the whitespace after it has arrived, so the first delta waits for
the second word: one inter-token interval is part of the figure, by design.

    .venv/bin/python bench/chat.py [--requests 40] [--first-token-ms 300] [--token-ms 30]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

for _name in ("INFERENCE_BASE_URL", "INFERENCE_API_KEY", "AGENTS_FAILOVER_MODEL", "REDIS_URL", "DATABASE_URL",
              "AGENTS_ORG_DATABASE", "CLOUD_AGENT_FEE_CENTS", "AGENTS_CHAT_FEE_CENTS", "AGENTS_OPENAI_FEE_CENTS",
              "OTEL_EXPORTER_OTLP_ENDPOINT"):
    os.environ.pop(_name, None)
os.environ["AGENTS_DATA_DIR"] = tempfile.mkdtemp(prefix="agents-bench-")
os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"

from bench.run_overhead import percentile, provision  # noqa: E402

MODEL = "bench-model"
REPLY = "Per-org files keep every tenant apart, make backups a copy, and let one org move without touching another."


def first_frame_ms(client, url: str, body: dict, is_first) -> float:
    """POST `body` to `url` as a stream; return ms until a line satisfies `is_first(event, data)`; read to the end."""
    started = time.perf_counter()
    got = None
    event = None
    with client.stream("POST", url, json=body) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and got is None:
                data = line[5:].strip()
                if is_first(event, data):
                    got = (time.perf_counter() - started) * 1000
    assert got is not None, f"no first token from {url}"
    return got


def _content_chunk(event, data: str) -> bool:
    if data == "[DONE]":
        return False
    choices = json.loads(data).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--first-token-ms", type=int, default=300)
    parser.add_argument("--token-ms", type=int, default=30)
    args = parser.parse_args()

    import httpx

    from tests.support.live import LiveServer
    from tests.support.upstream import Reply, Upstream

    upstream = Upstream().start()
    upstream.models = [MODEL]
    words = REPLY.split(" ")
    pieces = [words[0]] + [" " + w for w in words[1:]]

    def script(n: int) -> None:
        upstream.script(*[Reply(content=REPLY, chunks=pieces, first_chunk_delay=args.first_token_ms / 1000,
                                chunk_delay=args.token_ms / 1000) for _ in range(n)])

    _, key = provision()
    server = LiveServer({"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": MODEL}).start()
    try:
        ours = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        gateway = httpx.Client(base_url=upstream.base_url, headers={"Authorization": "Bearer bench"}, timeout=60)
        assert ours.post("/v1/agents", json={"name": "bench", "model": MODEL}).status_code == 201
        user = [{"role": "user", "content": "Why one file per org?"}]

        def direct() -> float:
            return first_frame_ms(gateway, "/chat/completions", {"model": MODEL, "messages": user, "stream": True}, _content_chunk)

        def chat() -> float:
            return first_frame_ms(ours, "/v1/agents/chat", {"agent": "bench", "messages": user, "stream": True},
                                  lambda event, data: event == "delta")

        def openai() -> float:
            return first_frame_ms(ours, "/v1/agents/openai/v1/chat/completions", {"model": "bench", "messages": user, "stream": True},
                                  _content_chunk)

        script(3 * 3)
        for fn in (direct, chat, openai):  # warm-up
            for _ in range(3):
                fn()
        base, rounds, compat = [], [], []
        for _ in range(args.requests):  # interleaved, so drift hits all alike
            script(3)
            base.append(direct())
            rounds.append(chat())
            compat.append(openai())
    finally:
        server.stop()
        upstream.stop()

    print(f"Time to first token, {args.requests} each, interleaved, {os.cpu_count()} CPUs; upstream first token "
          f"{args.first_token_ms} ms, then a word every {args.token_ms} ms\n")
    print(f"{'path':<44}{'p50':>10}{'p90':>10}{'ratio p50':>11}{'ratio p90':>11}")
    b50, b90 = percentile(base, 50), percentile(base, 90)
    for label, values in (("gateway (direct, baseline)", base), ("POST /v1/agents/chat stream", rounds),
                          ("OpenAI-compatible endpoint stream", compat)):
        p50, p90 = percentile(values, 50), percentile(values, 90)
        print(f"{label:<44}{p50:>8.1f}ms{p90:>8.1f}ms{p50 / b50:>10.2f}x{p90 / b90:>10.2f}x")


if __name__ == "__main__":
    main()
