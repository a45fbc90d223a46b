#!/usr/bin/env bash
# What the test suite needs from the machine beyond the venv. Idempotent; quiet when satisfied.
set -euo pipefail
# PostgreSQL and Redis: started if a local server is installed but not answering.
if command -v pg_ctlcluster >/dev/null 2>&1 && ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start || true
fi
if command -v redis-server >/dev/null 2>&1 && ! (command -v redis-cli >/dev/null && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1); then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null || true
fi
# Chromium for the console's browser tests (Debian's build, driven by Playwright; never a
# downloaded browser). Skipped when already installed.
# Another install running (unattended-upgrades, a second `make test`) holds the package
# manager's lock: wait for it (up to 10 minutes) instead of failing.
APT_WAIT=(-o DPkg::Lock::Timeout=600)
apt_update() {
  # `update` takes the lists lock, which older apt does not wait for: retry while it is held.
  local tries=0
  until apt-get "${APT_WAIT[@]}" update -qq >/dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -ge 60 ]; then
      apt-get "${APT_WAIT[@]}" update -qq  # the last try shows apt's own error
      return
    fi
    sleep 10
  done
}
if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get "${APT_WAIT[@]}" install -y -qq chromium chromium-driver >/dev/null
fi
# bubblewrap: the sandbox of the coding engine's `run` tool (coding runs answer 503 without it).
if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi
