"""Joining or starting Ray for sweeps and env runners (an optional extra, imported lazily)."""

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
    """Raises TfsacError when Ray (with Tune, or Optuna for a search) is not installed. Without
    an `address`, first gives the local Ray to come a token only this process and its children
    know (its servers listen on all interfaces), unless the user set RAY_AUTH_MODE."""
    if not address and "ray" not in sys.modules and "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    try:
        import ray  # noqa: F401

        if tune:
            import ray.tune  # noqa: F401
        if search:
            import optuna  # noqa: F401
    except ImportError:
        raise TfsacError(f'{what} need Ray: pip install -e ".[ray]"') from None


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


# Tries, about a second each, to reach a cluster's GCS (Ray's default 20 each warn).
JOIN_TRIES = "5"


def ray_options(ship_tfsac: bool = True) -> Dict[str, Any]:
    """ray.init arguments: quiet; with `ship_tfsac`, this process's tfsac sent to every node."""
    import tfsac

    options = {"logging_level": logging.ERROR, "log_to_driver": False, "include_dashboard": False}
    if ship_tfsac:
        options["runtime_env"] = {"py_modules": [tfsac], "env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2"}}
    return options


def workers_import_this_tfsac() -> bool:
    """Whether a local Ray's worker finds this process's tfsac: then no runtime env is
    needed, and workers come from Ray's ready pool instead of starting one by one."""
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
    """Joins the cluster at `address`, or starts a Ray of this process's own (`local_kwargs`
    go to that start). False where this process already runs in a Ray, used as it is."""
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
        # ray.init's own SIGTERM handler exits silently: stop what started and say it.
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
    # Ray's cluster error messages (printed even without log_to_driver) go to a file in its
    # log folder: tfsac reports each failure in one line itself.
    import ray._private.worker as ray_worker

    try:
        path = os.path.join(
            ray_worker.global_worker.node.get_logs_dir_path(), f"tfsac-driver-{os.getpid()}.log"
        )
    except Exception:  # noqa: BLE001 - no log folder known: keep Ray's printing
        return True

    def to_file(data, *args, **kwargs):
        with open(path, "a") as f:
            f.writelines(f"{line}\n" for line in data.get("lines", []))

    ray_worker.print_to_stdstream = to_file
    return True


def check_free_cpus(wanted: int, wait_s: float = 10.0) -> None:
    """TfsacError unless the Ray cluster has `wanted` free CPUs within `wait_s` (a run that
    just ended frees its runners' CPUs a moment later)."""
    import ray

    deadline = time.monotonic() + wait_s
    while (free := ray.available_resources().get("CPU", 0.0)) < wanted:
        if time.monotonic() > deadline:
            raise TfsacError(
                f"{wanted} env runners need {wanted} free CPUs in the Ray cluster; it has {free:g}"
            )
        time.sleep(0.2)
