"""Helpers shared by the absl scripts: one-line errors instead of tracebacks, and a
quiet TensorFlow start-up. Kept out of `tfsac` so that flag errors need no TF import."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import signal
import sys
import textwrap
import typing
from typing import Dict, List, NoReturn, Optional, Tuple

from absl import app, flags

from tfsac.algorithm.variants import VARIANTS  # TF-free: the declarations only
from tfsac.files import model_versions  # TF-free
from tfsac.logs import native_stderr_captured  # TF-free

# TF's C++ log filter; the lines printed before absl::InitializeLog ignore it (see
# import_tfsac, which also lowers it again for --verbosity=1).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def fail(message: str, code: int = 2) -> NoReturn:
    """Prints `error: <message>` as one line on stderr and exits with `code`."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def stopped(message: str, signum: int) -> NoReturn:
    """Prints `stopped: <message>` as one line on stderr and exits with 128 + `signum`, as
    a process a signal stops does: the user asked for it, not an error."""
    print(f"stopped: {message}", file=sys.stderr)
    sys.exit(128 + signum)


# Help group -> flag names, filled by define_training_flags.
_HELP_GROUPS: Dict[str, List[str]] = {}
_HELP_ARGS = ("-h", "-?", "-help", "--help", "--helpshort")


def version_note(version_dir: str) -> str:
    """Which version of its model `version_dir` is, and whether TF Serving serves it (the
    highest) and so replaces the one served until now."""
    model_dir, version = os.path.split(os.path.normpath(version_dir))
    versions = model_versions(model_dir)
    served = versions[-1]
    if version != served:
        note = f"version {served}, not this one"
    elif len(versions) > 1:
        note = f"so this one replaces version {versions[-2]}"
    else:
        note = "this one"
    return (
        f"version {version} of {model_dir} (versions there: {', '.join(versions)}); "
        f"TF Serving serves the highest: {note}."
    )


def parse_flags_or_fail(argv: List[str]) -> List[str]:
    """An `app.run` flags parser whose errors are one line (absl's add a usage hint), and
    whose --help lists the script's own flags by group and exits 0 (absl's lists only the
    flags defined in the main module, and exits 1)."""
    args = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
    if any(a in _HELP_ARGS for a in args):
        print(script_help())
        sys.exit(0)
    if "--helpfull" in args:
        print(flags.FLAGS.get_help())
        sys.exit(0)
    try:
        return flags.FLAGS(argv)
    except flags.CantOpenFlagFileError as e:
        reason = str(e).split("Unable to open flagfile: ", 1)[-1]
        fail(f"cannot read the --flagfile: {reason}")
    except flags.UnrecognizedFlagError as e:
        fail(_unknown_flag_line(e))
    except flags.Error as e:
        fail(str(e))
    except ValueError as e:  # absl's, for a value given to a switch's --no form
        arg = str(e).removesuffix(" does not take an argument")
        if arg == str(e):
            raise
        switch = arg.split("=")[0]
        fail(f"{arg}: a --no switch takes no value; {switch} alone is --{switch[4:]}=false")


def _unknown_flag_line(error: flags.UnrecognizedFlagError) -> str:
    """absl's line, or for a config field's name whose flag is named otherwise (env_id:
    --env) that flag, or for another library's name tfsac's (tfsac.config.names): absl's
    guess goes by spelling."""
    from tfsac.config import SACConfig  # TF-free
    from tfsac.config.names import CLI, flag_names, unknown_name_hint

    hint = unknown_name_hint(error.flagname, CLI, flag_names(SACConfig))
    return f"unknown flag --{error.flagname}{hint}" if hint else str(error)


class IntegralParser(flags.IntegerParser):
    """Integers, also written as integral floats (1e5, 2.5e4), as other RL libraries'
    users type them."""

    def convert(self, argument):
        try:
            return super().convert(argument)
        except ValueError:
            try:
                value = float(argument)
            except ValueError:
                raise ValueError(f"{argument!r} is not a whole number") from None
            if not value.is_integer():
                raise ValueError(f"{argument!r} is not a whole number") from None
            return int(value)


class OptionalFloatParser(flags.FloatParser):
    """Floats, and 'none' (or nothing) for an option that is off, as --help shows its
    default: `--resume --stop_at_return=none` takes a stop away."""

    def parse(self, argument):
        if isinstance(argument, str) and argument.strip().lower() in ("", "none"):
            return None
        return super().parse(argument)


class TriStateFlag(flags.Flag):
    """An auto/true/false option read as a switch too: `--name` is true, `--noname` false,
    `--name=auto|true|false` as written. The value stays text, which SACConfig parses (and
    refuses) as it does from Python."""

    def __init__(self, name: str, default: str, help: str):
        super().__init__(flags.ArgumentParser(), None, name, default, help, boolean=True)

    def _serialize(self, value) -> str:
        return "" if value is None else f"--{self.name}={value}"


def hide_from_help(names, helps: Optional[Dict[str, str]] = None) -> None:
    """Leaves `names` out of the script's --help and rewrites the help of `helps` (for a
    script that sets some training flags itself, as sweep.py does)."""
    hidden = set(names)
    for group in _HELP_GROUPS.values():
        group[:] = [n for n in group if n not in hidden]
    for name, text in (helps or {}).items():
        flags.FLAGS[name].help = text


def _flag_line(name: str) -> str:
    flag = flags.FLAGS[name]
    if isinstance(flag.default, bool):
        default = str(flag.default).lower()
    elif isinstance(flag.default, list):
        default = ",".join(flag.default)
    elif flag.default is None:
        default = "none"
    else:
        default = str(flag.default)
    # absl appends its own sentences to some helps ("; repeat this option ..."), with
    # newlines and indentation in them.
    text = f"--{name}={default}: {' '.join(flag.help.split())}"
    return textwrap.fill(text, 100, initial_indent="  ", subsequent_indent="      ")


_SCRIPT = {"module": "__main__"}  # the script run_script runs


def run_script(main) -> None:
    """Runs a script's `main` with absl, from a file (python scripts/train.py) or installed
    (tfsac-train, python -m tfsac train: the module is then tfsac_scripts.train)."""
    _SCRIPT["module"] = main.__module__

    def quiet_main(argv):
        quiet_logs()  # before the start checks, which make the env (MuJoCo's imports log)
        try:
            return main(argv)
        except KeyboardInterrupt:  # Ctrl-C where no loop saves and stops (TF's import, say)
            stopped("SIGINT (any checkpoint saved stands)", signal.SIGINT)

    app.run(quiet_main, flags_parser=parse_flags_or_fail)


def quiet_logs() -> None:
    """Hides libraries' INFO chatter and shortens absl's lines (tfsac.logs), unless
    `--verbosity=1` (or `-v 1`) asks for everything in absl's full form. TF-free."""
    if flags.FLAGS.is_parsed() and flags.FLAGS.verbosity >= 1:
        return
    from tfsac.logs import quiet_library_logs, short_lines

    quiet_library_logs(own_dirs=[os.path.dirname(os.path.abspath(__file__))])
    short_lines()


def script_help() -> str:
    """The script's docstring, its own flags, then the training flags by group."""
    name = _SCRIPT["module"]
    parts = [(sys.modules[name].__doc__ or "").strip(), ""]
    # absl files a script's flags under sys.argv[0] when it runs as __main__.
    key = sys.argv[0] if name == "__main__" else name
    own = [f.name for f in flags.FLAGS.flags_by_module_dict().get(key, [])]
    grouped = {name for names in _HELP_GROUPS.values() for name in names}
    own = [name for name in own if name not in grouped]
    sections = ([("Flags", own)] if own else []) + list(_HELP_GROUPS.items())
    for title, names in sections:
        parts += [f"{title}:", *(_flag_line(n) for n in names), ""]
    parts.append("--helpfull lists every flag, absl's own included.")
    return "\n".join(parts)


def keep_freed_memory() -> None:
    """Lets glibc reuse freed multi-MB blocks instead of returning them to the kernel.

    Each compiled update allocates and frees its XLA buffers (MBs); glibc's defaults hand
    such blocks back with munmap/trim and fault them in again on the next call. Keeping
    them (mmap threshold 32 MB, trim threshold 1 GB; the same as MALLOC_MMAP_THRESHOLD_ /
    MALLOC_TRIM_THRESHOLD_) saves those faults on every call (the figures are in
    docs/performance.md). A no-op where the C library is not glibc.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 32 * 1024 * 1024)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 1024 * 1024 * 1024)  # M_TRIM_THRESHOLD
    except (OSError, AttributeError):
        pass


def import_tfsac():
    """Imports tfsac (and TF) without the C++ start-up lines that TF prints before its
    log filter is set up (CUDA probing on CPU machines, oneDNN notices), and hides
    libraries' INFO chatter (tfsac.logs). `--verbosity=1` (or `-v 1`) keeps all of it."""
    keep_freed_memory()
    verbose = flags.FLAGS.is_parsed() and flags.FLAGS.verbosity >= 1
    if verbose:
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "0"
    with contextlib.nullcontext() if verbose else native_stderr_captured():
        import tensorflow as tf

        tf.constant(0.0)  # creates the eager context, which logs the CUDA probe
        import tfsac

    quiet_logs()  # again: TF's import adds to the root logger
    return tfsac


# Flags of scripts/train.py that are not SACConfig fields: what to do with the run.
RUN_GROUP = "Run"


def _config_fields():
    from tfsac.config import SACConfig  # TF-free

    hints = typing.get_type_hints(SACConfig)
    return [(f, hints[f.name]) for f in dataclasses.fields(SACConfig)]


def _help(field) -> str:
    """A training flag's help: its option's, the algorithm's listing the registered variants."""
    if field.name != "algorithm":
        return field.metadata["help"]
    listing = "; ".join(f"{name}: {cls.summary}" for name, cls in sorted(VARIANTS.items()))
    return f"{listing}; or <module>:<name> of a variant your module registers"


def define_training_flags() -> None:
    """The flags of scripts/train.py, which every script that trains or measures shares:
    one per SACConfig field, generated from the field's type, default and metadata."""
    for field, hint in _config_fields():
        meta = field.metadata
        name = meta["flag"] or field.name
        default = field.default_factory() if field.default is dataclasses.MISSING else field.default
        text = _help(field)
        args = (name, default, text)
        if hint == Optional[bool]:  # auto (None), true or false
            flags.DEFINE_flag(TriStateFlag(name, meta["text"], text))
        elif meta["text"] is not None:
            flags.DEFINE_string(name, meta["text"], text)
        elif meta["choices"]:
            flags.DEFINE_enum(name, default, meta["choices"], text)
        elif hint is bool:
            flags.DEFINE_bool(*args)
        elif hint is int:
            flags.DEFINE(IntegralParser(), *args, serializer=flags.ArgumentSerializer())
        elif hint is float:
            flags.DEFINE_float(*args)
        elif hint == Optional[float]:
            flags.DEFINE(OptionalFloatParser(), *args, serializer=flags.ArgumentSerializer())
        elif hint in (str, Optional[str]):
            flags.DEFINE_string(*args)
        elif hint == Tuple[int, ...]:
            flags.DEFINE_list(name, [str(v) for v in default], text)
        else:
            raise TypeError(f"no flag type for SACConfig.{field.name}: {hint}")
        _HELP_GROUPS.setdefault(meta["group"], []).append(name)
    flags.DEFINE_bool(
        "resume",
        False,
        "continue the run in --run_dir from its newest checkpoint, with its saved settings "
        "(flags given that change how long it runs or what it writes are applied and said)",
    )
    _HELP_GROUPS.setdefault(RUN_GROUP, []).append("resume")


def config_from_flags(tfsac=None, resume: bool = False):
    """Builds a validated-later SACConfig from the parsed flags (exits on a bad value).
    With `resume`, the run's saved config.json (where there is one) stands in for every
    flag that was not given."""
    from tfsac.config import SACConfig
    from tfsac.errors import TfsacError
    from tfsac.files import RunDir

    try:
        saved = None
        if resume and flags.FLAGS.run_dir:
            run = RunDir(flags.FLAGS.run_dir)
            if problem := run.missing_config():  # unset flags would take their defaults
                fail(problem)
            saved = run.read_config()
        values = SACConfig.from_dict(saved).to_dict() if saved is not None else {}
        for field, _ in _config_fields():
            flag = flags.FLAGS[field.metadata["flag"] or field.name]
            if saved is None or flag.present:
                values[field.name] = flag.value
        return SACConfig(**values)
    except TfsacError as e:
        fail(str(e))


def check_ignored_flags(config, runner_flags: bool = True) -> None:
    """Exits with one line when a flag given would be ignored: one that only another,
    unset option reads (the `any_value` Needs rows of tfsac.config.rules: SACConfig sees
    only values), or an env runner flag in a run without runners (the run's `num_actors`,
    a resumed one's included: without runners the envs step in this process)."""
    from tfsac.config.options import DIST
    from tfsac.config.rules import NEEDS, NEW_RUN_NEEDS

    for row in (row for row in NEEDS + NEW_RUN_NEEDS if row.any_value):
        # Given (a flagfile's too) without the option it needs, unless that was turned off
        # on purpose (a preset's --her with --her=false after it).
        given = flags.FLAGS[row.option].present and not flags.FLAGS[row.needed].present
        if given and not getattr(config, row.needed):
            fail(row.line)
    if config.num_actors or not runner_flags:  # a sweep's --ray_address is its cluster's
        return
    for field, _ in _config_fields():
        name = field.metadata["flag"] or field.name
        if field.metadata["group"] == DIST and name != "num_actors" and flags.FLAGS[name].present:
            fail(
                f"--{name} is a setting of env runners, which run only with --num_actors > 0; "
                "without them the envs step in this process"
            )


def env_kwargs_from_flag(value: str) -> dict:
    """Parses --env_kwargs (a JSON object); exits with one line on anything else."""
    from tfsac.config import parse_env_kwargs
    from tfsac.errors import TfsacError

    try:
        return parse_env_kwargs(value)
    except TfsacError as e:
        fail(str(e))
