"""`python -m proxy …` is the `dpgate` command (tests and benchmarks start it this way)."""

import sys

from .admin.cli import main

sys.exit(main())
