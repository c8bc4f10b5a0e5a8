#!/usr/bin/env python3
"""Write measurement artifacts in the producer's shape for a plan (05 §1-§7), with synthetic timings.

The writer is the package :mod:`tests.support.artifacts` (its docstring says what it writes and how)::

    python tests/support/make_artifacts.py example [OUT]           # examples/artifacts (both models)
    python tests/support/make_artifacts.py negatives OUT           # one attempt per negative case
    python tests/support/make_artifacts.py cell --plan PLAN --cell ID --out DIR [--ranks N] [--merged]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checkout's root: the package tests.support

from tests.support.artifacts.command_line import main

if __name__ == "__main__":
    sys.exit(main())
