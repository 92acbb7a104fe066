"""The runs a user names to plot or report: the request checked, and the runs grouped by
config.json (differing only in the seed and in how they report), labelled by the fields
that tell the groups apart. TF-free."""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Dict, List, Optional, Sequence, Tuple

from tfsac.config import SACConfig
from tfsac.config.sac_config import KEYWORD_OPTIONS
from tfsac.errors import TfsacError

# Config fields that do not make runs different experiments: the seed (a group's runs
# differ in it) and where and how a run reports and writes.
NOT_COMPARED = frozenset(
    "seed run_dir export_dir model_name export export_formats progress_bar tensorboard "
    "video_every log_every checkpoint_every keep_checkpoints keep_best ray_address".split()
)


@dataclasses.dataclass
class RunGroup:
    """Runs of one configuration (read_run's dicts) and the group's label."""

    label: str
    runs: List[Dict]
    # Each compared field the groups differ in -> this group's value (" / "-joined if mixed).
    settings: Dict[str, str] = dataclasses.field(default_factory=dict)

    def names_all_settings(self) -> bool:
        """Whether the label says every one of `settings` (labels name the fewest)."""
        parts = set(self.label.split(", "))
        return all(_said(name, value) in parts for name, value in self.settings.items())

    def legend(self, runs: List[Dict]) -> str:
        """The label with how many runs (seeds) a curve averages, and how many are unfinished."""
        unfinished = sum(not run.get("finished", True) for run in runs)
        state = f", {unfinished} unfinished" if unfinished else ""
        return f"{self.label} ({len(runs)} seed{'s' if len(runs) != 1 else ''}{state})"


def _defaults() -> Dict:
    # As config.json holds them (JSON): a run of an older tfsac lacks the newer fields.
    return _expanded(json.loads(json.dumps(SACConfig().to_dict())))


def _expanded(config: Dict) -> Dict:
    """`config` with each KEYWORD_OPTIONS option as its keys, '<option>.<key>'."""
    flat = {k: v for k, v in config.items() if k not in KEYWORD_OPTIONS}
    for name in KEYWORD_OPTIONS:
        for key, value in (config.get(name) or {}).items():
            flat[f"{name}.{key}"] = value
    return flat


def _text(value) -> str:
    return json.dumps(value, sort_keys=True)


def _key(config: Dict, names: Sequence[str]) -> Tuple[str, ...]:
    return tuple(_text(config.get(n)) for n in names)


def differing_fields(configs: Sequence[Dict]) -> List[str]:
    """The compared config fields whose values differ among `configs`, in the config's
    order: the user's first (a default value), then those 'auto' fills in (default None)."""
    defaults = _defaults()
    configs = [_expanded(c) for c in configs]
    names = list(defaults) + sorted({n for c in configs for n in c} - set(defaults))
    full = [{**defaults, **c} for c in configs]
    differ = [
        n for n in names if n not in NOT_COMPARED and len({_text(c.get(n)) for c in full}) > 1
    ]
    return sorted(differ, key=lambda n: defaults.get(n) is None)


def _value(value) -> str:
    if isinstance(value, list):
        return ",".join(_value(v) for v in value)
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return _text(value)
    return str(value)


def _shown_name(name: str) -> str:
    """A field's name in labels: a keyword-argument option's key alone."""
    return name.split(".", 1)[1] if name.split(".", 1)[0] in KEYWORD_OPTIONS else name


def _said(shown_name: str, value: str) -> str:
    return value if shown_name == "env_id" else f"{shown_name}={value}"


def _settings(configs: Sequence[Dict], fields: Sequence[str]) -> Dict[str, str]:
    """{shown name: value} of each of `fields` over one group's `configs`."""
    values = {n: dict.fromkeys(_value(c.get(n)) for c in configs) for n in fields}
    return {_shown_name(n): " / ".join(v) for n, v in values.items()}


def label_fields(configs: Sequence[Dict], fields: Sequence[str]) -> List[str]:
    """The fewest of `fields`, in order, that still tell all groups (`configs`, one per group)
    apart: SAC against CrossQ by `algorithm` alone, not also by the defaults CrossQ changes."""
    wanted = len({_key(c, fields) for c in configs})
    chosen: List[str] = []
    for name in fields:
        distinct = len({_key(c, chosen) for c in configs})
        if distinct == wanted:
            break
        if len({_key(c, [*chosen, name]) for c in configs}) > distinct:
            chosen.append(name)
    return chosen


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' if number != 1 else ''}"


def group_runs(runs: List[Dict], labels: Optional[Sequence[str]] = None) -> List[RunGroup]:
    """`runs` (read_run's) in groups of one configuration each, in the order of their first
    runs. `labels`: one per group or one per run (one label, one group) instead of made ones."""
    if labels is not None and not all(label.strip() for label in labels):
        raise TfsacError(f"labels: an empty label in {','.join(labels)!r}")
    defaults = _defaults()
    configs = [{**defaults, **_expanded(r["config"])} for r in runs]
    fields = differing_fields([r["config"] for r in runs])

    def group(label: str, members: List[int]) -> RunGroup:
        return RunGroup(
            label, [runs[i] for i in members], _settings([configs[i] for i in members], fields)
        )

    per_run = labels is not None and len(labels) == len(runs)
    keys = labels if per_run else [_key(c, fields) for c in configs]
    keyed: Dict = {}  # a label, or the compared fields' values -> its runs' indices
    for index, key in enumerate(keys):
        keyed.setdefault(key, []).append(index)
    if per_run:
        return [group(label, members) for label, members in keyed.items()]
    firsts = [configs[members[0]] for members in keyed.values()]
    shown = label_fields(firsts, fields)
    envs = sorted({c.get("env_id") for c in configs})
    parts = [[_said(_shown_name(n), _value(c.get(n))) for n in shown] for c in firsts]
    made = [", ".join(p) or ", ".join(envs) for p in parts]
    if labels is not None:
        if len(labels) != len(keyed):
            raise TfsacError(
                f"labels: {len(labels)} given for {_count(len(runs), 'run')} in "
                f"{_count(len(keyed), 'group')} ({'; '.join(made)}): give one per group, in "
                "that order, or one per run"
            )
        twice = sorted({label for label in labels if labels.count(label) > 1})
        if twice:  # one label per group: two groups under one name could not be told apart
            raise TfsacError(
                f"labels: {', '.join(map(repr, twice))} given to more than one of the "
                f"{len(keyed)} groups ({'; '.join(made)}); give each group its own label"
            )
        made = list(labels)
    return [group(label, members) for label, members in zip(made, keyed.values(), strict=True)]


def settings_table(env_rows: Sequence[Tuple[str, List[RunGroup]]]) -> Optional[Tuple]:
    """(setting names, [(a group's heading, its index within its env, its values)]) for a
    table beside a figure, or None where every label names all of its settings already."""
    groups = [group for _, env_groups in env_rows for group in env_groups]
    if all(group.names_all_settings() for group in groups):
        return None
    names = list(dict.fromkeys(name for group in groups for name in group.settings))
    columns = [
        (
            f"{env}: {group.label}" if len(env_rows) > 1 else group.label,
            index,
            [group.settings.get(name, "") for name in names],
        )
        for env, env_groups in env_rows
        for index, group in enumerate(env_groups)
    ]
    return names, columns


# ---------------------------------------------------------------------- the plot's request
X_AXES = {"env_steps": "env steps", "wall_clock": "wall-clock minutes"}
# --y: every panel, or one of the evaluation curves.
Y_AXES = {"all": None, "return": "eval_return", "success_rate": "eval_success_rate"}


def check_plot(run_dirs: Sequence[str], out_path: str, x: str, y: str) -> str:
    """The plot a user asks, checked before any run is read: the image, the axes, and the
    run directories (each a run's, each once). Returns the image's path (.png by default)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if os.path.isdir(out_path) or out_path.endswith(os.sep):
        raise TfsacError(
            f"{out_path!r} is a folder: name the image, e.g. {out_path.rstrip(os.sep)}"
            f"{os.sep}curves.png"
        )
    folder = os.path.dirname(out_path) or "."
    if not os.path.isdir(folder):
        why = "is not a folder" if os.path.exists(folder) else "does not exist (make it first)"
        raise TfsacError(f"cannot write {out_path!r}: {folder!r} {why}")
    out_path = out_path if os.path.splitext(out_path)[1] else out_path + ".png"
    extension = os.path.splitext(out_path)[1][1:].lower()
    if extension not in (formats := FigureCanvasAgg.get_supported_filetypes()):
        raise TfsacError(
            f"cannot write {out_path!r}: unsupported image format {extension!r} "
            f"(supported: {', '.join(sorted(formats))})"
        )
    if not run_dirs:
        raise TfsacError("no run directories to plot")
    if x not in X_AXES or y not in Y_AXES:
        raise TfsacError(
            f"x must be one of {', '.join(X_AXES)} and y one of {', '.join(Y_AXES)}; "
            f"got x={x!r}, y={y!r}"
        )
    real = [os.path.realpath(run_dir) for run_dir in run_dirs]
    for i, path in enumerate(real):
        if path in real[:i]:  # its evaluations would count as a second seed
            first = run_dirs[real.index(path)]
            raise TfsacError(f"run directories {first!r} and {run_dirs[i]!r} are one folder")
    for run_dir in run_dirs:
        if not os.path.isfile(os.path.join(run_dir, "config.json")):
            raise TfsacError(f"{run_dir!r} is not a tfsac run directory: it has no config.json")
    return out_path


def check_curves(y: str, panels: List, timed: Optional[List[bool]]) -> None:
    """The plot's rules on what its runs hold, once read: a panel for the --y asked, and on
    the wall-clock axis (`timed`: per run) a run whose evaluations record their time."""
    if y != "all" and not panels:
        raise TfsacError(f"--y={y}: none of the runs has evaluations with a {y}")
    if timed is not None and not any(timed):
        raise TfsacError(
            "--x=wall_clock: no run's evaluations record their wall-clock time (wall_time_s)"
        )


def env_groups(runs: List[Dict], labels) -> List[Tuple[str, List[RunGroup]]]:
    """(env, its groups) for each env of `runs`, in the order of their first runs; refused
    where the labels do not fit or no run has anything to draw yet."""
    envs = list(dict.fromkeys(run["env"] for run in runs))
    if len(envs) == 1:
        rows = [(envs[0], group_runs(runs, labels))]
    elif labels and len(labels) != len(runs):
        raise TfsacError(
            f"labels: runs of {len(envs)} envs ({', '.join(envs)}) take one label per run "
            f"({len(runs)}), not one per group"
        )
    else:
        rows = []
        for env in envs:
            members = [i for i, run in enumerate(runs) if run["env"] == env]
            env_labels = [labels[i] for i in members] if labels else None
            rows.append((env, group_runs([runs[i] for i in members], env_labels)))
    if not any(run["curves"] for run in runs):  # after the labels' own mistakes
        raise TfsacError(
            f"nothing to plot yet: no progress rows and no evaluations in "
            f"{', '.join(repr(run['dir']) for run in runs)} (a run writes them every "
            "--log_every and --eval_every steps)"
        )
    return rows
