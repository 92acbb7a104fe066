"""Console output: tfsac's lines and real warnings without library chatter, above progress bars."""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import logging
import os
import sys
import tempfile
import time

from absl import logging as absl_logging

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class OwnInfoOnly(logging.Filter):
    """Passes warnings and errors from anywhere, lower levels only from tfsac's own code."""

    def __init__(self, own_dirs=()):
        super().__init__()
        self.own_dirs = tuple(os.path.abspath(d) + os.sep for d in (_PACKAGE_DIR, *own_dirs))

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING or record.pathname.startswith(self.own_dirs)


@contextlib.contextmanager
def native_stderr_captured(replay_on_error: bool = True):
    """fd 2 (C++ libraries' prints) to a temp file for the block; replayed if it raises."""
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


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Imports `tensorflow` with fd 2 captured (its start-up lines precede its log filter)."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once; and the search below must not find itself
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            exec_module = spec.loader.exec_module

            def quiet_exec_module(module):
                with native_stderr_captured():
                    exec_module(module)
                _quiet_first_context_start()

            spec.loader.exec_module = quiet_exec_module  # this spec's loader only
        return spec


def _quiet_first_context_start() -> None:
    """Captures fd 2 while TF's eager context starts at the first op (its CUDA probe), lazily."""
    try:
        from tensorflow.python.eager import context
    except ImportError:  # another TF layout: its lines show
        return
    start = context.Context.ensure_initialized

    def quiet_start(self):
        context.Context.ensure_initialized = start  # once
        with native_stderr_captured():
            return start(self)

    context.Context.ensure_initialized = quiet_start


def quiet_tensorflow_start() -> None:
    """Hides TF's C++ start-up and INFO lines at its import, unless TFSAC_TF_LOGS is 1."""
    if os.environ.get("TFSAC_TF_LOGS") == "1" or "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # later C++ INFO lines (XLA's)
    if not any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())


class ShortLines(logging.Formatter):
    """'20:31:07 step 1000/20000 | ...' lines, 'warning: ' before warnings and errors."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            text = f"{record.levelname.lower()}: {text}"
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return f"{time.strftime('%H:%M:%S', time.localtime(record.created))} {text}"


def short_lines() -> None:
    """absl's console lines in the ShortLines form."""
    absl_logging.get_absl_handler().setFormatter(ShortLines())


@contextlib.contextmanager
def absl_verbosity(level: int):
    """absl's verbosity `level` for the block, then the logger's own level back (NOTSET too)."""
    logger = absl_logging.get_absl_logger()
    verbosity, before = absl_logging.get_verbosity(), logger.level
    absl_logging.set_verbosity(level)
    try:
        yield
    finally:
        absl_logging.set_verbosity(verbosity)
        logger.setLevel(before)


@contextlib.contextmanager
def progress_lines(enabled: bool = True):
    """tfsac's INFO lines (no other library's) on stderr for the block, where none show yet."""
    verbosity = absl_logging.get_verbosity()
    if not enabled or verbosity >= absl_logging.INFO:
        yield
        return
    logger = absl_logging.get_absl_logger()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ShortLines())
    handler.addFilter(OwnInfoOnly())
    propagate, logger.propagate = logger.propagate, False  # not twice via the root's
    logger.addHandler(handler)
    try:
        with absl_verbosity(absl_logging.INFO):
            yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def quiet_library_logs(own_dirs=()) -> None:
    """INFO lines of tfsac (and `own_dirs`) only on root handlers; MuJoCo's warnings by absl."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, OwnInfoOnly) for f in handler.filters):
            handler.addFilter(OwnInfoOnly(own_dirs))
    mujoco_warnings_logged()


def mujoco_warnings_logged() -> None:
    """MuJoCo's warnings through absl, not its MUJOCO_LOG.TXT in the current directory."""
    try:
        import mujoco
    except ImportError:
        return

    def warning(message: str) -> None:
        # Deprecated attributes in gymnasium's own XML files: nothing a user can act on.
        if "is deprecated" not in message:
            absl_logging.warning("MuJoCo: %s", message)

    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(warning)


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
    """While `bar` (tqdm's, on stderr) shows, what Python writes to stderr goes above it."""
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
    """A tqdm bar on stderr (`enabled` None: in a terminal); `kwargs` go to tqdm."""
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
