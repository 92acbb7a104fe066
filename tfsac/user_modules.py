"""Modules a user names inside an option's value, '<module>:<name>' (gymnasium's rule for
env ids, 'my_package.envs:MyEnv-v0', which tfsac also takes for algorithms,
'my_algos:mean_q', and networks): the value alone says what to import, so a resume, an
evaluation or a sweep's trial in another process finds the same env, algorithm or networks
again. Algorithms and networks are found in registries that such a module adds its classes
to."""

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
    """`registry[cls.name] = cls` where the name is letters, digits and '_' (one that
    fits in '<module>:<name>', a file name and a flag's value); ValueError otherwise."""
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
    '<module>:<name>' of one the module registers when imported (`how` says how a module
    registers one); TfsacError in one line otherwise."""
    module, name = split(value)
    if module is not None:
        import_named(module, f"{option} {value!r}")
    found = registry.get(name)
    # Only the module's own (or its submodules'): 'my_algos:tqc' where my_algos registers no
    # tqc would train tfsac's TQC, or another module's class, under my_algos's name.
    if found is not None and (module is None or _defined_in(found, module)):
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


def _defined_in(cls, module: str) -> bool:
    return cls.__module__ == module or cls.__module__.startswith(module + ".")


def split(value: str) -> Tuple[Optional[str], str]:
    """('my_algos', 'mean_q') for 'my_algos:mean_q'; (None, value) without a module."""
    module, sep, name = value.rpartition(":")
    return (module, name) if sep else (None, value)


def find_in_current_directory(module: str) -> None:
    """Appends the current directory to sys.path where `module` is found there and nowhere
    else (sys.path first, so an installed module of that name wins): `python -m` and an
    interactive Python look there, a script run by its path (scripts/train.py) does not.
    Ray adds the driver's current folder to its workers' sys.path, so a sweep's trials and
    env runners find the module there too."""
    top = module.split(".")[0]
    here = os.getcwd()
    if not top.isidentifier() or here in sys.path or "" in sys.path:
        return
    if importlib.util.find_spec(top) is None and PathFinder.find_spec(top, [here]) is not None:
        sys.path.append(here)


def import_named(module: str, what: str) -> ModuleType:
    """Imports the module that `what` (e.g. "algorithm 'my_algos:mean_q'") names; TfsacError
    in one line where it is missing or fails while it is imported (the line names the file
    and line of the user's code that raised)."""
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
    """The innermost frame of the traceback in the user's code: not tfsac's (a refused
    registration raises in tfsac) nor importlib's."""
    frames = traceback.extract_tb(error.__traceback__)
    tfsac_dir = os.path.dirname(os.path.abspath(__file__)) + os.sep
    users = [f for f in frames if not (f.filename.startswith(("<", tfsac_dir)))]
    return (users or frames)[-1]
