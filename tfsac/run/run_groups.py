"""Runs grouped by configuration, for plots and sweep figures: runs whose config.json
differ only in the seed (and in where and how they report) are one group, labelled by the
config fields that tell the groups apart. TF-free."""

from __future__ import annotations

import dataclasses
import json
from typing import Dict, List, Optional, Sequence, Tuple

from tfsac.config import SACConfig
from tfsac.config.sac_config import KEYWORD_OPTIONS
from tfsac.errors import TfsacError

# Config fields that do not make runs different experiments: the seed (a group's runs
# differ in it) and where and how a run reports and writes.
NOT_COMPARED = frozenset(
    {
        "seed",
        "run_dir",
        "export_dir",
        "model_name",
        "export",
        "export_formats",
        "progress_bar",
        "tensorboard",
        "video_every",
        "log_every",
        "checkpoint_every",
        "keep_checkpoints",
        "keep_best",
        "ray_address",
    }
)


@dataclasses.dataclass
class RunGroup:
    """Runs of one configuration (read_run's dicts) and the group's label."""

    label: str
    runs: List[Dict]

    def legend(self, runs: List[Dict]) -> str:
        """The label with how many runs (seeds) a curve of the group averages, `runs`, and
        how many of those are unfinished (no summary.json: a run going on, interrupted or
        killed)."""
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


def differing_fields(configs: Sequence[Dict]) -> List[str]:
    """The compared config fields whose values are not the same in all `configs`, in the
    config's order: the fields set by the user first (those whose default is a value), then
    those the algorithm fills in when left 'auto' (default None), which follow from
    others more often than not."""
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


def _part(config: Dict, name: str) -> str:
    if name == "env_id":
        return _value(config.get(name))
    key = name.split(".", 1)[1] if name.split(".", 1)[0] in KEYWORD_OPTIONS else name
    return f"{key}={_value(config.get(name))}"


def label_fields(configs: Sequence[Dict], fields: Sequence[str]) -> List[str]:
    """The fewest of `fields`, taken in their order, whose values still tell all groups
    (`configs`, one per group) apart: a sweep over two options is labelled by both, SAC
    against CrossQ by `algorithm` alone (not also by the defaults CrossQ changes)."""
    wanted = len({tuple(_text(c.get(n)) for n in fields) for c in configs})
    chosen: List[str] = []
    for name in fields:
        distinct = len({tuple(_text(c.get(n)) for n in chosen) for c in configs})
        if distinct == wanted:
            break
        with_it = len({tuple(_text(c.get(n)) for n in [*chosen, name]) for c in configs})
        if with_it > distinct:
            chosen.append(name)
    return chosen


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' if number != 1 else ''}"


def group_runs(runs: List[Dict], labels: Optional[Sequence[str]] = None) -> List[RunGroup]:
    """`runs` (read_run's) in groups of one configuration each, in the order of their
    first runs. `labels`: one per group (that order) or one per run (runs of the same label
    form one group) instead of the labels made of the differing config fields."""
    if labels is not None and not all(label.strip() for label in labels):
        raise TfsacError(f"labels: an empty label in {','.join(labels)!r}")
    if labels is not None and len(labels) == len(runs):
        by_label: Dict[str, List[Dict]] = {}
        for label, run in zip(labels, runs, strict=True):
            by_label.setdefault(label, []).append(run)
        return [RunGroup(label, members) for label, members in by_label.items()]
    defaults = _defaults()
    configs = [{**defaults, **_expanded(r["config"])} for r in runs]
    fields = differing_fields([r["config"] for r in runs])
    keyed: Dict[Tuple, List[int]] = {}
    for index, config in enumerate(configs):
        keyed.setdefault(tuple(_text(config.get(n)) for n in fields), []).append(index)
    firsts = [configs[members[0]] for members in keyed.values()]
    shown = label_fields(firsts, fields)
    envs = sorted({c.get("env_id") for c in configs})
    made = [", ".join(_part(c, n) for n in shown) or ", ".join(envs) for c in firsts]
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
    return [
        RunGroup(label, [runs[i] for i in members])
        for label, members in zip(made, keyed.values(), strict=True)
    ]
