"""Console output: tfsac's lines and real warnings, without third-party chatter, and log
lines that a progress bar does not garble. TF-free (the render worker uses it too), and
below every layer: each of them logs."""

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

# The tfsac package, every subpackage of it.
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


# Set to 1 to see TensorFlow's C++ start-up lines again (tfsac hides them).
TF_LOGS_VARIABLE = "TFSAC_TF_LOGS"


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
    """Finds `tensorflow` through the other finders and imports it with fd 2 captured:
    TF's C++ start-up lines (CUDA probing on a machine without a GPU, oneDNN and CPU
    notices) are printed before TF's log filter exists, so a filter cannot hide them."""

    def find_spec(self, name, path=None, target=None):
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once; and the search below must not find itself
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _QuietLoader(spec.loader)
        return spec


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        with native_stderr_captured():
            self.loader.exec_module(module)
        _quiet_first_context_start()

    def __getattr__(self, name):  # is_package, get_code, ... of the real loader
        return getattr(self.loader, name)


def _quiet_first_context_start() -> None:
    """Captures fd 2 while TF's eager context starts (at the first op, which probes CUDA
    and logs an error line without a GPU), then takes the wrapper out again. The start
    stays where TF puts it: thread-pool sizes can still be set before the first op."""
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
    """Hides TensorFlow's C++ start-up and INFO lines in this process (unless TFSAC_TF_LOGS
    is 1 or TF is already imported; a TF_CPP_MIN_LOG_LEVEL of the user's is kept). TF-free:
    it takes effect when something imports TF."""
    if os.environ.get(TF_LOGS_VARIABLE) == "1" or "tensorflow" in sys.modules:
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # later C++ INFO lines (XLA's)
    if not any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())


def _mujoco_warning(message: str) -> None:
    # MuJoCo's compiler reports deprecated attributes of the envs' own XML files (gymnasium's
    # HalfCheetah uses `settotalmass`), once per model compiled: nothing a user can act on.
    if "is deprecated" in message:
        return
    absl_logging.warning("MuJoCo: %s", message)


class ShortLines(logging.Formatter):
    """'20:31:07 step 1000/20000 | ...' lines, 'warning: ' before warnings and errors:
    absl's prefix (level, date, time to the microsecond, thread id, file:line) is for
    --verbosity=1."""

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
    """absl's verbosity `level` for the block, then the absl logger's own level back:
    restoring with set_verbosity would pin a level it only inherited (a NOTSET logger
    follows the root's level, as pytest's caplog sets it)."""
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
    """For library calls (a notebook's `tfsac.train`): tfsac's INFO lines (progress,
    evaluations, checkpoints) on stderr in the short form, other libraries' INFO hidden,
    for the block; a no-op where INFO lines already show (the scripts set that up)."""
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
    """Shows INFO lines of tfsac (and of code under `own_dirs`) only, on every handler of
    the root logger (where absl's handler sits), and hides MuJoCo's deprecation notices
    about model attributes; other MuJoCo warnings go through absl logging as warnings."""
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, OwnInfoOnly) for f in handler.filters):
            handler.addFilter(OwnInfoOnly(own_dirs))
    mujoco_warnings_logged()


def mujoco_warnings_logged() -> None:
    """MuJoCo's warnings as absl warnings (its deprecation notices about model attributes
    hidden), where MuJoCo is installed and nobody set a handler: MuJoCo's own prints them
    on stdout and appends them to MUJOCO_LOG.TXT in the current directory, a file the user
    never named. Before an env compiles its model."""
    try:
        import mujoco
    except ImportError:
        return
    if mujoco.get_mju_user_warning() is None:
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
