"""One training process per run directory: a second process that would train in the same
run directory (a run launched twice, a sweep's trial resumed while it still runs) is refused
in one line before it restores, moves or writes anything there. A sweep's folder has its
lock too (one sweep driver at a time).

The lock is a POSIX record lock (`fcntl.lockf`) on <run_dir>/run.lock: the system drops it
when its process ends, however it ends, so no stale lock outlives a killed run. A process
holds each run directory's lock once (`_HELD`): POSIX drops a process's lock when it closes
any descriptor of the file, so a second open and close would let it go. Processes that
fork (async vector envs) do not pass it on. Without `fcntl` (Windows) there is no lock.
"""

from __future__ import annotations

import errno
import os
import socket
from typing import Dict

from absl import logging

from tfsac.errors import TfsacError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCK_FILE = "run.lock"
_HELD: Dict[str, int] = {}  # the lock file's real path: its descriptor, held by this process


def _path(run_dir: str) -> str:
    return os.path.realpath(os.path.join(run_dir, LOCK_FILE))


def hold_run_dir(run_dir: str, what: str = "run directory") -> None:
    """Takes `run_dir`'s lock for this process where the directory exists (a new run's is
    taken once it is made; taking it again is a no-op). TfsacError, naming the process that
    holds it, where another process trains there. `what` names the directory (a sweep's
    folder holds one too)."""
    path = _path(run_dir)
    if fcntl is None or path in _HELD or not os.path.isdir(run_dir):
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise TfsacError(f"cannot write in {what} {run_dir!r}: {e.strerror}") from None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        holder = os.read(fd, 200).decode(errors="replace").strip()
        os.close(fd)
        if e.errno not in (errno.EACCES, errno.EAGAIN):  # a file system without locks
            logging.warning("run directory %s cannot be locked (%s)", run_dir, e.strerror)
            return
        raise TfsacError(
            f"{what} {run_dir!r} is in use by another training process "
            f"({holder or 'starting'}): wait for it to end, or stop it (SIGINT or SIGTERM "
            "saves a checkpoint) and continue it with --resume"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode())
    _HELD[path] = fd


def release_run_dir(run_dir: str) -> None:
    """Lets another process train in `run_dir` (a no-op where this process holds no lock
    there)."""
    fd = _HELD.pop(_path(run_dir), None)
    if fd is not None:
        os.close(fd)
