"""The test settings never write into a data directory the developer exported."""

import os
import subprocess
import sys

from tests.support.live import ROOT


def test_test_settings_ignore_an_exported_data_dir(tmp_path):
    exported = tmp_path / "real-deployment"
    env = {**os.environ, "AGENTS_DATA_DIR": str(exported), "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    script = "import django; django.setup(); from django.conf import settings; print(settings.AGENTS_DATA_DIR)"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-1000:]
    used = out.stdout.strip()
    assert used and used != str(exported) and not exported.exists()
