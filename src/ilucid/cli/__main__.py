"""``python -m ilucid.cli``."""

from __future__ import annotations

import sys

from ilucid.cli.app import main

sys.exit(main())
