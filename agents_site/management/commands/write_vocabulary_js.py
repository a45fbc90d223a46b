"""`manage.py write_vocabulary_js [--check]`: write the console's vocabulary module from `agents_site/vocabulary.py`."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from agents_site.vocabulary import VOCABULARY_JS_PATH, vocabulary_js


class Command(BaseCommand):
    help = "Write static/console/vocabulary.js from agents_site/vocabulary.py (--check: fail when it is stale)."

    def add_arguments(self, parser):
        parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the committed file differs")

    def handle(self, *args, check: bool = False, **options):
        path = Path(settings.BASE_DIR) / VOCABULARY_JS_PATH
        wanted = vocabulary_js()
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if check:
            if current != wanted:
                raise CommandError(f"{VOCABULARY_JS_PATH} is stale: run `python manage.py write_vocabulary_js`")
            self.stdout.write(f"{VOCABULARY_JS_PATH} is up to date")
            return
        if current != wanted:
            path.write_text(wanted, encoding="utf-8")
        self.stdout.write(f"wrote {VOCABULARY_JS_PATH}")
