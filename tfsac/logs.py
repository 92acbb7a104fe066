"""Console output: tfsac's lines and real warnings, without third-party chatter, and log
lines that a progress bar does not garble. TF-free (the render worker uses it too)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile

from absl import logging as absl_logging

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class OwnInfoOnly(logging.Filter):
    """Passes warnings and errors from anywhere, and lower levels only from tfsac's own
    code (the package and the calling script). Libraries log their internals at INFO
    through the same absl handler as tfsac (TF's checkpoint sharding timings, PyOpenGL's
    "No OpenGL_accelerate")."""

    def __init__(self, own_dirs=()):
        super().__init__()
        self.own_dirs = tuple(os.path.abspath(d) + os.sep for d in (_PACKAGE_DIR, *own_dirs))

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.pathname.startswith(self.own_dirs)


@contextlib.contextmanager
def native_stderr_captured(replay_on_error: bool = True):
    """Sends the process's fd 2 (where C++ libraries print) to a temp file for the block;
    replays it if the block raises and `replay_on_error`, else drops it."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            if replay_on_error:
                captured.seek(0)
                sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _mujoco_warning(message: str) -> None:
    # MuJoCo's compiler reports deprecated attributes of the envs' own XML files (gymnasium's
    # HalfCheetah uses `settotalmass`), once per model compiled: nothing a user can act on.
    if "is deprecated" in message:
        return
    absl_logging.warning("MuJoCo: %s", message)


def quiet_library_logs(own_dirs=()) -> None:
    """Shows INFO lines of tfsac (and of code under `own_dirs`) only, on every handler of
    the root logger (where absl's handler sits), and hides MuJoCo's deprecation notices
    about model attributes; other MuJoCo warnings go through absl logging as warnings."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, OwnInfoOnly) for f in handler.filters):
            handler.addFilter(OwnInfoOnly(own_dirs))
    try:
        import mujoco
    except ImportError:
        return
    mujoco.set_mju_user_warning(_mujoco_warning)


class _AboveBar:
    """A text stream whose writes go above the progress bars drawn on `stream`."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        import tqdm

        tqdm.tqdm.write(text, file=self.stream, end="")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


@contextlib.contextmanager
def lines_above(bar):
    """While `bar` (a tqdm bar on stderr) is shown, everything written to stderr through
    Python (absl and logging handlers, warnings, print) is written above the bar instead of
    over it."""
    if bar.disable:
        yield
        return
    original = sys.stderr
    above = _AboveBar(original)
    handlers = [absl_logging.get_absl_handler().python_handler, *logging.getLogger().handlers]
    swapped = [h for h in handlers if getattr(h, "stream", None) is original]
    for handler in swapped:
        handler.stream = above
    sys.stderr = above
    try:
        yield
    finally:
        sys.stderr = original
        for handler in swapped:
            handler.stream = original


def progress_bar(total, initial: int = 0, enabled=None, unit: str = "step", **kwargs):
    """A tqdm bar on stderr (of env steps unless `unit` says otherwise); `enabled` None
    means on in a terminal. `kwargs` go to tqdm."""
    import tqdm

    enabled = sys.stderr.isatty() if enabled is None else enabled
    return tqdm.tqdm(
        total=total,
        initial=initial,
        disable=not enabled,
        unit=unit,
        dynamic_ncols=True,
        mininterval=0.5,
        **kwargs,
    )
