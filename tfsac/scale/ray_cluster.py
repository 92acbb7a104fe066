"""Joining or starting Ray, for the parts of tfsac that run on it (sweeps, env runners).

Ray is an optional extra (`pip install -e ".[ray]"`): nothing here imports it at module
level, and a missing install or an unreachable cluster is one TfsacError line.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from typing import Any, Dict, Optional

from tfsac.errors import TfsacError, first_line
from tfsac.logs import native_stderr_captured
from tfsac.run.signals import StartInterrupted


def require_ray(
    what: str, address: Optional[str] = None, tune: bool = False, search: bool = False
) -> None:
    """Raises TfsacError when Ray (with Tune, or Optuna for a search) is not installed.
    Without an `address` (a local Ray will be started), first arms token authentication
    for it, which Ray reads when it is imported."""
    if not address:
        _local_token()
    try:
        import ray  # noqa: F401

        if tune:
            import ray.tune  # noqa: F401
        if search:
            import optuna  # noqa: F401
    except ImportError:
        raise TfsacError(f'{what} need Ray: pip install -e ".[ray]"') from None


def _local_token() -> None:
    """Makes the local Ray that this process will start refuse every connection without a
    random token that only this process and its children know: Ray's servers listen on all
    interfaces whatever node address they are given. A user's own RAY_AUTH_MODE is kept,
    and so is a Ray that this process imported before (its mode is fixed then)."""
    if "ray" in sys.modules or "RAY_AUTH_MODE" in os.environ:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


def check_address(address: Optional[str], timeout: float = 5.0) -> None:
    """Checks that a host:port (or ray://host:port) Ray address accepts connections."""
    if not address or address in ("auto", "local"):
        return
    hostport = address[len("ray://") :] if address.startswith("ray://") else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise TfsacError(
            f"ray_address must be <host>:<port>, ray://<host>:<port> or auto, got {address!r}"
        )
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        raise TfsacError(f"cannot reach the Ray cluster at {address}: {reason}") from None


# Tries, about a second each, that a join makes to reach the cluster's GCS (Ray's default
# is 20, each with a C++ warning); a cluster that is up answers the first.
JOIN_TRIES = "5"


def ray_options(ship_tfsac: bool = True) -> Dict[str, Any]:
    """ray.init arguments: quiet (no worker output or dashboard); with `ship_tfsac`, workers
    that import this process's tfsac (shipped to every node) with TF's start-up lines off."""
    import tfsac

    options = {"logging_level": logging.ERROR, "log_to_driver": False, "include_dashboard": False}
    if ship_tfsac:
        env = {"py_modules": [tfsac], "env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2"}}
        options["runtime_env"] = env
    return options


def workers_import_this_tfsac() -> bool:
    """Whether a worker of a local Ray (this interpreter, environment and working
    directory; not this process's own sys.path edits) finds this process's tfsac. Then the
    local Ray needs no runtime env: a worker with one is started for it alone, not taken
    from Ray's started pool (16 runners ready in 6.4 s instead of 10.4 here)."""
    import tfsac

    code = "import importlib.util as u; s = u.find_spec('tfsac'); print(s.origin if s else '')"
    try:
        found = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return bool(found) and os.path.realpath(found) == os.path.realpath(tfsac.__file__)


def start_ray(address: Optional[str], **local_kwargs) -> bool:
    """Joins the cluster at `address`, or without one starts a Ray of this process's own
    (never one that happens to run on the machine), with no dashboard and, where
    require_ray armed it, a token; `local_kwargs` (e.g. num_cpus) go to that local start.
    False when this process already runs in a Ray (a test's, a sweep trial's), which is then
    used as it is."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        kwargs = {"address": address}
        os.environ.setdefault("RAY_gcs_server_port_wait_time_s", JOIN_TRIES)
    else:
        kwargs = {"address": "local", **local_kwargs}
    options = ray_options(ship_tfsac=bool(address) or not workers_import_this_tfsac())
    try:
        # Ray's C++ start-up and retry lines go to its log folder, not to the console.
        with native_stderr_captured(replay_on_error=False):
            ray.init(**options, **kwargs)
    except SystemExit as e:
        if e.code != signal.SIGTERM:
            raise
        # ray.init puts its own SIGTERM handler (sys.exit) in part-way through its start: a
        # SIGTERM then exited with status 15 and no word. Stop what started; say it.
        if ray.is_initialized():
            ray.shutdown()
        raise StartInterrupted(signal.SIGTERM, "Ray started") from None
    except ConnectionError:
        raise TfsacError(
            f"cannot join the Ray cluster at {address}: no Ray answered there in "
            f"{JOIN_TRIES} tries; check the address (the head's `ray start` prints it) and, "
            "for a cluster with token authentication, RAY_AUTH_MODE=token and its token in "
            "this process's environment; or leave ray_address out to run on a local Ray"
        ) from None
    except Exception as e:  # noqa: BLE001 - Ray raises many kinds; one line for all
        where = f" at {address}" if address else ""
        raise TfsacError(f"cannot start or join Ray{where}: {first_line(e)}") from None
    _quiet_cluster_messages()
    return True


def _quiet_cluster_messages() -> None:
    """Ray's driver prints every cluster error message (a dead node's or worker's, with
    its raylet's memory dump) to the console, log_to_driver or not; tfsac reports the
    failure itself (the sweep's trial lines, the runner pool's) in one line, so these go
    to the driver's file in Ray's log folder instead."""
    import ray._private.worker as ray_worker

    try:
        folder = ray_worker.global_worker.node.get_logs_dir_path()
    except Exception:  # noqa: BLE001 - no log folder known: keep Ray's printing
        return
    path = os.path.join(folder, f"tfsac-driver-{os.getpid()}.log")

    def to_file(data, *args, **kwargs):
        with open(path, "a") as f:
            f.writelines(f"{line}\n" for line in data.get("lines", []))

    ray_worker.print_to_stdstream = to_file


def check_free_cpus(wanted: int, wait_s: float = 10.0) -> None:
    """TfsacError unless the Ray cluster has `wanted` free CPUs, waited for up to `wait_s`:
    the env runners of a run that just ended (in this process: a notebook's earlier run)
    free theirs a moment after they are killed."""
    import ray

    deadline = time.monotonic() + wait_s
    while (free := ray.available_resources().get("CPU", 0.0)) < wanted:
        if time.monotonic() > deadline:
            raise TfsacError(
                f"{wanted} env runners need {wanted} free CPUs in the Ray cluster; it has {free:g}"
            )
        time.sleep(0.2)
