#!/usr/bin/env bash
# Build and test sdk/typescript from the repository's files only: `npm ci` against the committed
# package-lock.json (skipped while node_modules already holds exactly that lockfile), `tsc`, node's
# test runner, and the check that the console's vendored bundle is what the lockfile builds.
set -euo pipefail
cd "$(dirname "$0")/../sdk/typescript"
command -v node >/dev/null || { echo "FAILED: node (>= 20) is required to build sdk/typescript" >&2; exit 1; }
stamp=node_modules/.package-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  npm ci --no-audit --no-fund --prefer-offline
  echo "$want" > "$stamp"
fi
npm run -s build
[ "${SDK_TS_BUILD_ONLY:-}" = "1" ] && exit 0  # the browser tests only need the built example agent
npm test
npm run -s check:bundle
