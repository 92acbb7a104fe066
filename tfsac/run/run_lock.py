"""One training run per run directory (one driver per sweep folder), a second refused before it
writes anything: an `fcntl.flock` on run.lock through a descriptor of its own (dropped however
the process ends, conflicting in this process too, unlike `lockf`). Without `fcntl`, no lock."""

from __future__ import annotations

import errno
import os
import socket
import weakref
from typing import Optional

from absl import logging

from tfsac.errors import Fault
from tfsac.files import open_no_follow

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

LOCK_FILE = "run.lock"
_LIVE: weakref.WeakSet[RunLock] = weakref.WeakSet()  # for a forked child to close


def _in_use(path: str, what: str, fd: int) -> Fault:
    holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
    if holder.startswith(f"pid {os.getpid()} "):
        return Fault(f"{what} {path!r} is in use by another Trainer of this process")
    return Fault(
        f"{what} {path!r} is in use by another training process ({holder or 'starting'}): "
        "wait for it to end, or stop it (SIGINT or SIGTERM saves a checkpoint) and continue "
        "it with --resume"
    )


def _lock(path: str, what: str, create: bool) -> Optional[int]:
    """A descriptor of path's run.lock holding its lock (None: no lock to take); Fault if taken."""
    if fcntl is None:
        return None
    flags = (os.O_RDWR | os.O_CREAT) if create else os.O_RDONLY  # flock needs no write access
    try:
        # Never through a link: its holder line would overwrite the file it points to.
        fd = open_no_follow(os.path.join(path, LOCK_FILE), flags)
    except OSError as e:
        if not create:  # no run.lock, no run holds it; an unreadable one: the write checks'
            return None
        raise Fault(f"cannot write in {what} {path!r}: {e.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        error = _in_use(path, what, fd) if e.errno in (errno.EAGAIN, errno.EACCES) else None
        os.close(fd)
        if error is not None:
            raise error from None
        logging.warning("%s %s cannot be locked (%s)", what, path, e.strerror)
        return None
    return fd


def check_run_dir_free(path: str, what: str = "run directory") -> None:
    """A Fault where a run trains in `path` (its run.lock is held); writes nothing."""
    fd = _lock(path, what, create=False)
    if fd is not None:
        os.close(fd)  # closing the only descriptor of this open file lets the lock go


class RunLock:
    """The lock of one run directory (or sweep folder), held from `hold` until `release`,
    the object's deletion or the process's end."""

    def __init__(self, path: str, what: str = "run directory"):
        self.path, self.what = path, what
        self._fd: Optional[int] = None
        self._close: Optional[weakref.finalize] = None

    def hold(self) -> None:
        """Takes the lock where the directory exists and says in run.lock who holds it."""
        if (self._close is not None and self._close.alive) or not os.path.isdir(self.path):
            return
        self._fd = fd = _lock(self.path, self.what, create=True)
        if fd is not None:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
        self._close = weakref.finalize(self, _close, fd)
        _LIVE.add(self)

    def release(self) -> None:
        if self._close is not None:
            self._close()

    def _forget(self) -> None:  # in a forked child: its copy only, the parent keeps the lock
        if self._close is not None and self._close.detach() is not None:
            _close(self._fd)


def _close(fd: Optional[int]) -> None:
    if fd is not None:
        os.close(fd)


def _after_fork_in_child() -> None:
    for lock in list(_LIVE):
        lock._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
