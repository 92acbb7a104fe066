"""Helpers shared by the absl scripts: one-line errors instead of tracebacks."""

from __future__ import annotations

import sys
from typing import List, NoReturn

from absl import flags


def fail(message: str, code: int = 2) -> NoReturn:
    """Prints `error: <message>` as one line on stderr and exits with `code`."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def parse_flags_or_fail(argv: List[str]) -> List[str]:
    """An `app.run` flags parser whose errors are one line (absl's add a usage hint)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        fail(str(e))
