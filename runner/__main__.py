"""`python -m runner …` — see `runner.cli`."""

import sys

from runner.cli import main

sys.exit(main())
