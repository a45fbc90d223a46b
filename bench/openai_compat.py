"""Benchmark: what the OpenAI-compatible endpoint adds on top of calling the gateway directly.

Starts the loopback OpenAI-compatible upstream (tests/support/upstream.py) and a real daphne
process serving the site, provisions an org, an API key, credit and an agent, then measures
in the same run, sequentially and interleaved, with the official `openai` SDK as the client
on both sides (keep-alive connections):

* direct:   `chat.completions.create` to the upstream (the gateway) itself;
* endpoint: the same call with `base_url=<daphne>/v1/agents/openai/v1` and `model=<agent>` —
            auth, the agent, the balance gate, the run record and its session, the same
            gateway call, the record, the debit, the OpenAI answer;
* streamed: the endpoint with `stream=True` (the whole stream read, `[DONE]` included);
* run:      `POST /v1/agents/{ref}/run` with the same input (httpx), the platform's own run
            route: what is left between it and the endpoint is the endpoint's own cost (the
            OpenAI request checks and answer), the rest is the run path every run pays.

Each with the upstream answering at once (the worst case for the ratio: the whole cost is
ours) and with a simulated model latency (`--latency-ms`, default 300 ms).

    .venv/bin/python bench/openai_compat.py [--requests 200] [--latency-ms 300]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

for _name in ("INFERENCE_BASE_URL", "INFERENCE_API_KEY", "AGENTS_FAILOVER_MODEL", "REDIS_URL", "DATABASE_URL",
              "AGENTS_ORG_DATABASE", "CLOUD_AGENT_FEE_CENTS", "AGENTS_OPENAI_FEE_CENTS", "OTEL_EXPORTER_OTLP_ENDPOINT"):
    os.environ.pop(_name, None)
os.environ["AGENTS_DATA_DIR"] = tempfile.mkdtemp(prefix="agents-bench-")
os.environ["DJANGO_SETTINGS_MODULE"] = "agents_site.settings"

from bench.run_overhead import percentile, provision, timed  # noqa: E402

MODEL = "bench-model"
INSTRUCTIONS = "Answer in one sentence."
PROMPT = "Summarise the benefits of per-org SQLite files in one sentence."


def measure(args, upstream, key: str) -> dict:
    """Return `{label: (n, direct ms, endpoint ms, streamed ms, run route ms)}` for each upstream latency."""
    import httpx
    import openai

    from tests.support.live import LiveServer

    server = LiveServer({"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "bench", "AGENTS_DEFAULT_MODEL": MODEL}).start()
    try:
        http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)
        created = http.post("/v1/agents", json={"name": "bench", "model": MODEL, "instructions": INSTRUCTIONS})
        assert created.status_code == 201, created.text
        direct_sdk = openai.OpenAI(base_url=upstream.base_url, api_key="bench", max_retries=0)
        ours_sdk = openai.OpenAI(base_url=server.url + "/v1/agents/openai/v1", api_key=key, max_retries=0)
        # The endpoint puts the agent's instructions first: the direct call sends the same prompt.
        direct_messages = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": PROMPT}]
        messages = [{"role": "user", "content": PROMPT}]

        def direct():
            direct_sdk.chat.completions.create(model=MODEL, messages=direct_messages)

        def endpoint():
            reply = ours_sdk.chat.completions.create(model="bench", messages=messages)
            assert reply.choices[0].message.content

        def streamed():
            chunks = list(ours_sdk.chat.completions.create(model="bench", messages=messages, stream=True))
            assert chunks[-1].choices[0].finish_reason == "stop"

        def run_route():
            response = http.post("/v1/agents/bench/run", json={"input": PROMPT})
            assert response.status_code == 200, response.text

        results = {}
        for label, latency in (("answers at once", 0.0), (f"{args.latency_ms} ms model latency", args.latency_ms / 1000)):
            upstream.default_delay = latency
            n = args.requests if latency == 0 else max(args.requests // 5, 20)
            for fn in (direct, endpoint, streamed, run_route):
                timed(fn, 10)  # warm-up
            base, ours, stream, runs = [], [], [], []
            for _ in range(n):  # interleaved, so drift hits all alike
                base += timed(direct, 1)
                ours += timed(endpoint, 1)
                stream += timed(streamed, 1)
                runs += timed(run_route, 1)
            results[label] = (n, base, ours, stream, runs)
        return results
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--latency-ms", type=int, default=300)
    args = parser.parse_args()

    from tests.support.upstream import Upstream

    upstream = Upstream().start()
    upstream.models = [MODEL]
    _, key = provision()
    results = measure(args, upstream, key)
    upstream.stop()

    print(f"OpenAI-compatible endpoint on daphne vs the same SDK call to the gateway, sequential, {os.cpu_count()} CPUs\n")
    print(f"{'upstream':<24}{'n':>5}{'direct p50':>12}{'direct p99':>12}{'ours p50':>10}{'ours p99':>10}"
          f"{'ratio p50':>11}{'ratio p99':>11}{'added p50':>11}{'stream p50':>12}{'ratio':>8}{'/run p50':>10}{'ours÷/run':>11}")
    for label, (n, base, ours, stream, runs) in results.items():
        b50, b99, o50, o99, s50, r50 = (percentile(base, 50), percentile(base, 99), percentile(ours, 50), percentile(ours, 99),
                                        percentile(stream, 50), percentile(runs, 50))
        print(f"{label:<24}{n:>5}{b50:>10.2f}ms{b99:>10.2f}ms{o50:>8.2f}ms{o99:>8.2f}ms{o50 / b50:>10.2f}x{o99 / b99:>10.2f}x"
              f"{o50 - b50:>9.2f}ms{s50:>10.2f}ms{s50 / b50:>7.2f}x{r50:>8.2f}ms{o50 / r50:>10.2f}x")
    print("(ours = a non-streamed chat.completions.create through the endpoint: a recorded, billed run;")
    print(" stream = the same with stream=True, read to [DONE]; ratio = against the direct call;")
    print(" /run = POST /v1/agents/{ref}/run, the same run through the platform's own route)")


if __name__ == "__main__":
    main()
