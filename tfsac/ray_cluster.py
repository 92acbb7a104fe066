"""Joining or starting Ray, for the parts of tfsac that run on it (sweeps, env runners).

Ray is an optional extra (`pip install -e ".[ray]"`): nothing here imports it at module
level, and a missing install or an unreachable cluster is one TfsacError line.
"""

from __future__ import annotations

import logging
import socket
from typing import Any, Dict, Optional

from tfsac.errors import TfsacError, first_line


def require_ray(what: str, tune: bool = False, search: bool = False) -> None:
    """Raises TfsacError when Ray (with Tune, or Optuna for a search) is not installed."""
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


def ray_options() -> Dict[str, Any]:
    """ray.init arguments: quiet (no worker output or dashboard), and workers that import
    this process's tfsac (shipped to every node) with TF's start-up lines off."""
    import tfsac

    return {
        "logging_level": logging.ERROR,
        "log_to_driver": False,
        "include_dashboard": False,
        "runtime_env": {"py_modules": [tfsac], "env_vars": {"TF_CPP_MIN_LOG_LEVEL": "2"}},
    }


def start_ray(address: Optional[str], **init_kwargs) -> bool:
    """Starts a local Ray, or joins `address`; False when this process already runs in a
    Ray (a test's, a sweep trial's), which is then used as it is."""
    import ray

    if ray.is_initialized():
        return False
    try:
        ray.init(address=address or None, **ray_options(), **init_kwargs)
    except Exception as e:  # noqa: BLE001 - Ray raises many kinds; one line for all
        where = f" at {address}" if address else ""
        raise TfsacError(f"cannot start or join Ray{where}: {first_line(e)}") from None
    return True
