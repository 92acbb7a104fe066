"""Helpers shared by the absl scripts: one-line errors instead of tracebacks, and a
quiet TensorFlow start-up. Kept out of `tfsac` so that flag errors need no TF import."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from typing import List, NoReturn

from absl import flags

# TF's Python-side C++ log filter; the lines printed before absl::InitializeLog ignore it.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


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


@contextlib.contextmanager
def _native_stderr_captured():
    """Sends the process's fd 2 to a temp file; replays it if the block raises."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def import_tfsac():
    """Imports tfsac (and TF) without the C++ start-up lines that TF prints before its
    log filter is set up (CUDA probing on CPU machines, oneDNN notices)."""
    with _native_stderr_captured():
        import tensorflow as tf

        tf.constant(0.0)  # creates the eager context, which logs the CUDA probe
        import tfsac
    return tfsac
