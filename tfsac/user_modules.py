"""Modules named in an option's value, '<module>:<name>' (gymnasium's rule for env ids): the
value alone says what to import, so another process finds the same classes again."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import traceback
from importlib.machinery import PathFinder
from types import ModuleType
from typing import Dict, Optional, Tuple, TypeVar

from tfsac.errors import TfsacError

T = TypeVar("T")


def add(registry: Dict[str, T], cls: T, kind: str) -> T:
    """`registry[cls.name] = cls` where the name is letters, digits and '_', else ValueError."""
    if not cls.name or not cls.name.replace("_", "").isalnum():
        raise ValueError(f"{kind} needs a name of letters, digits and _: {cls.name!r}")
    old = registry.get(cls.name)
    where = (cls.__module__, cls.__qualname__)
    if old is not None and (old.__module__, old.__qualname__) != where:  # not a re-import
        raise ValueError(
            f"{kind} named {cls.name!r} is registered already ({old.__module__}."
            f"{old.__qualname__}): give {cls.__qualname__} a name of its own"
        )
    registry[cls.name] = cls
    return cls


def registered(value: str, registry: Dict[str, T], option: str, how: str) -> T:
    """The entry of `registry` that the option's `value` names: a registered name, or
    '<module>:<name>' of one the module registers (`how` says how); TfsacError otherwise."""
    module, name = split(value)
    if module is not None:
        import_named(module, f"{option} {value!r}")
    found = registry.get(name)
    # Only the module's own: 'my_algos:tqc' must not train tfsac's TQC under my_algos's name.
    if found is not None and (module is None or f"{found.__module__}.".startswith(f"{module}.")):
        return found
    names = ", ".join(sorted(registry))
    if module is not None:
        raise TfsacError(
            f"module {module!r} registers no {option} {name!r} (registered: {names}); a "
            f"module registers one with {how}"
        )
    raise TfsacError(
        f"{option} must be one of {names}, or <module>:<name> of one your module "
        f"registers, got {value!r}"
    )


def split(value: str) -> Tuple[Optional[str], str]:
    """('my_algos', 'mean_q') for 'my_algos:mean_q'; (None, value) without a module."""
    module, sep, name = value.rpartition(":")
    return (module, name) if sep else (None, value)


def find_in_current_directory(module: str) -> None:
    """Appends the current directory to sys.path where only it has `module`, as `python -m`."""
    top = module.split(".")[0]
    here = os.getcwd()
    if not top.isidentifier() or here in sys.path or "" in sys.path:
        return
    if importlib.util.find_spec(top) is None and PathFinder.find_spec(top, [here]) is not None:
        sys.path.append(here)


def import_named(module: str, what: str) -> ModuleType:
    """Imports the module `what` names; TfsacError (with the user's file and line) if it fails."""
    if not all(part.isidentifier() for part in module.split(".")):
        raise TfsacError(
            f"{what}: {module!r} is not a module name (dotted Python names, as in "
            "'my_package.my_algos'; a folder goes on PYTHONPATH, not into the name)"
        )
    find_in_current_directory(module)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and (module == e.name or module.startswith(e.name + ".")):
            raise TfsacError(
                f"{what} names module {module!r}, which is not found: run from the folder "
                "that holds it, or put that folder on PYTHONPATH"
            ) from None
        raise TfsacError(f"module {module!r} ({what}) needs a missing module: {e.name}") from None
    except SyntaxError as e:
        raise TfsacError(f"module {module!r} ({what}) does not parse: {e}") from None
    except Exception as e:  # the user's own code: where in it, in one line
        frame = users_frame(e)
        raise TfsacError(
            f"importing module {module!r} ({what}) raised {type(e).__name__}: {e} "
            f"({frame.filename}, line {frame.lineno})"
        ) from None


def users_frame(error: Exception) -> traceback.FrameSummary:
    """The innermost frame of the traceback in the user's code, not tfsac's or importlib's."""
    frames = traceback.extract_tb(error.__traceback__)
    tfsac_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
    users = [f for f in frames if not (f.filename.startswith(("<", tfsac_dir)))]
    return (users or frames)[-1]
