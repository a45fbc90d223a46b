#!/usr/bin/env bash
# `make test` after the prerequisites: the import contract, the TypeScript SDK and the three pytest
# passes. Every step runs even when an earlier one failed; each is timed and bounded (`timeout`: a
# hang fails its pass instead of stalling CI); a summary table ends the output and the exit code is
# non-zero when any step failed. Each pass writes a JUnit report to data/test-reports/ (read by
# `make test-durations`).
#
#   main       the whole suite, two pytest-xdist workers (a test file stays on one worker)
#   stock      the `both_stores` tests again on Django's own ASGI handler, middleware and SQLite engine
#   postgres   the `both_stores` tests on PostgreSQL + Redis (skipped, and said so, without them)
#
# TEST_PASSES="main stock" runs only those passes (the default is all three).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
REPORTS=data/test-reports
mkdir -p "$REPORTS"
PASSES=${TEST_PASSES:-main stock postgres}
summary=()
failed=0

step() {  # step NAME LIMIT_SECONDS COMMAND...
  local name=$1 limit=$2 start code
  shift 2
  echo "==> $name (limit ${limit} s)"
  start=$(date +%s)
  timeout --signal=INT --kill-after=30 "$limit" "$@"
  code=$?
  local took=$(( $(date +%s) - start ))
  local result=passed
  if [ "$code" -eq 124 ] || [ "$code" -eq 137 ]; then result="KILLED by its ${limit} s limit"; elif [ "$code" -ne 0 ]; then result="FAILED (exit $code)"; fi
  [ "$code" -ne 0 ] && failed=1
  summary+=("$(printf '%-12s %6d s   %s' "$name" "$took" "$result")")
  echo "<== $name: $result in $took s"
}

pytest_pass() {  # pytest_pass NAME LIMIT ENV... -- PYTEST_ARGS...
  local name=$1 limit=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  step "$name" "$limit" env "${envs[@]}" "$PY" -m pytest -n 2 --dist loadfile --junitxml="$REPORTS/$name.xml" "$@"
}

total_start=$(date +%s)
step lint-imports 300 .venv/bin/lint-imports
step sdk-typescript 600 bash scripts/test-sdk-typescript.sh
for pass in $PASSES; do
  case "$pass" in
    main) pytest_pass main 2400 -- ;;
    stock) pytest_pass stock 900 AGENTS_FAST_HANDLER=0 AGENTS_POOLED_SQLITE=0 -- -m both_stores ;;
    postgres)
      if pg_isready -h 127.0.0.1 -p 5432 -q && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
        pytest_pass postgres 2400 AGENTS_TEST_STORES=postgres -- -m both_stores
      else
        summary+=("$(printf '%-12s %6s     %s' postgres - "SKIPPED: no PostgreSQL on 127.0.0.1:5432 or no Redis on :6379")")
      fi ;;
    *) echo "unknown pass '$pass' (main, stock, postgres)"; failed=1 ;;
  esac
done
echo
echo "make test: $(( $(date +%s) - total_start )) s in all"
printf '  %s\n' "${summary[@]}"
[ "$failed" -eq 0 ] && echo "make test: all passed" || echo "make test: FAILED (see above)"
exit "$failed"
