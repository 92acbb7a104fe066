"""The check of the sweep a user asks, and its plan: flags, --grid and --space entries, every
trial's config, its envs and its folder, all checked before anything runs (no Ray, no TF)."""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import math
import os
from typing import Dict, FrozenSet, Iterable, Iterator, List, Optional, Protocol, Sequence, Tuple

from tfsac.algorithm.resolve import resolve
from tfsac.config import SACConfig
from tfsac.config.names import CLI, flag_names, unknown_name_hint
from tfsac.config.sac_config import KEYWORD_OPTIONS, check_new_run
from tfsac.data.envs import checked_env, env_factory, env_spec
from tfsac.data.offline_data import load_recorded
from tfsac.errors import TfsacError
from tfsac.files import check_outside_exports, check_writable
from tfsac.run.preflight import check_source
from tfsac.scale.sweeps.trial import TrialFactory, config_tag

SEARCH_METHODS = ("optuna",)
OBJECTIVES = {"final": "eval_return", "best": "best_eval_return"}
SETTING_MINIMA = {"num_samples": 1, "cpus_per_trial": 1, "max_concurrent": 0, "max_failures": 0}
# Flags that the sweep sets for each trial; a grid or search over them is refused.
RESERVED_FLAGS = {
    "seed": "give the seeds with --seeds",
    "run_dir": "each trial's run directory is under --sweep_dir",
    "export_dir": "each trial exports into its run directory",
    "resume": "--resume continues the whole sweep",
    "progress_bar": "trials run without a progress bar",
    "ray_address": "give the cluster of the whole sweep with --ray_address",
}


# ---------------------------------------------------------------------- searched flags
def split_values(text: str) -> List[str]:
    """'a,b,c' -> ['a', 'b', 'c']; ';' separates values that hold commas (64,64;256,256)."""
    return [v.strip() for v in text.split(";" if ";" in text else ",")]


@dataclasses.dataclass(frozen=True)
class Dimension:
    """A searched flag: a range (uniform, loguniform, int, logint; bounds inclusive) or a choice."""

    name: str
    kind: str
    low: float = 0.0
    high: float = 0.0
    choices: tuple = ()

    KINDS = ("uniform", "loguniform", "int", "logint", "choice")

    def text(self, value) -> str:
        """The flag value for a sampled value (floats to 4 significant digits)."""
        if self.kind in ("uniform", "loguniform"):
            return f"{float(value):.4g}"
        if self.kind in ("int", "logint"):
            return str(int(value))
        return str(value)

    def probes(self) -> List[str]:
        """Values to check before a search: every choice, or the range's ends and a point
        inside (a fraction, so an int flag refuses a float range)."""
        if self.kind == "choice":
            return list(self.choices)
        if self.kind.startswith("log"):
            inside = self.low * (self.high / self.low) ** 0.37
        else:
            inside = self.low + 0.37 * (self.high - self.low)
        return [self.text(self.low), self.text(inside), self.text(self.high)]

    def distribution(self):
        from optuna import distributions

        if self.kind == "choice":
            return distributions.CategoricalDistribution(list(self.choices))
        log = self.kind.startswith("log")
        if self.kind in ("int", "logint"):
            return distributions.IntDistribution(int(self.low), int(self.high), log=log)
        return distributions.FloatDistribution(self.low, self.high, log=log)


# ---------------------------------------------------------------------- configs, trials
class ConfigSource(Protocol):
    """Where a sweep's trial configs come from (the parsed training flags): `names`, the
    options a trial may vary; a call gives the resolved SACConfig of {name: text} overrides."""

    names: FrozenSet[str]

    def __call__(self, overrides: Dict[str, str]) -> SACConfig: ...


def check_varied_name(names: FrozenSet[str], name: str, where: str) -> None:
    """TfsacError unless option `name` (given in `where`: --grid, --space) may vary: a
    training flag's name, or a key of a JSON-object option (`algorithm_kwargs.beta`)."""
    option, dot, key = name.partition(".")
    if dot and option in KEYWORD_OPTIONS and option in names and key.isidentifier():
        return
    if name in RESERVED_FLAGS:
        raise TfsacError(f"{where}: --{name} cannot vary in a sweep ({RESERVED_FLAGS[name]})")
    if name not in names and (hint := unknown_name_hint(name, CLI, flag_names(SACConfig))):
        raise TfsacError(f"{where}: unknown training flag --{name}{hint}")
    if name not in names:
        close = difflib.get_close_matches(name, sorted(names), n=1)
        hint = f"did you mean --{close[0]}? " if close else ""
        raise TfsacError(
            f"{where}: unknown training flag --{name} ({hint}an algorithm's hyperparameter "
            f"or an env's keyword is varied as algorithm_kwargs.{key or name} or "
            f"env_kwargs.{key or name})"
        )


def keyed_overrides(overrides: Dict[str, str], current) -> Tuple[Dict[str, str], Dict[str, str]]:
    """({flag: text} of the plain overrides, {JSON option: its text with the varied keys
    set}); `current(option)` is an option's text before them. A key's text is JSON, else text."""
    keyed = [n for n in overrides if "." in n and n.partition(".")[0] in KEYWORD_OPTIONS]
    plain = {n: t for n, t in overrides.items() if n not in keyed}
    merged: Dict[str, dict] = {}
    for name in keyed:
        option, _, key = name.partition(".")
        if option not in merged:
            base = plain.get(option, current(option)) or "{}"
            try:
                merged[option] = dict(json.loads(base))
            except (ValueError, TypeError):
                raise TfsacError(f"{option} is not a JSON object: {base!r}") from None
        try:
            merged[option][key] = json.loads(overrides[name])
        except ValueError:  # a word: its text
            merged[option][key] = overrides[name]
    return plain, {option: json.dumps(values) for option, values in merged.items()}


def resolved_trial_config(config: SACConfig, overrides: Dict[str, str]) -> SACConfig:
    """`config` resolved and checked as a new run's; a refusal names the `overrides` behind it."""
    try:
        config = resolve(config)
        check_new_run(config)  # its refusals; its warnings come with each trial's start
        return config
    except TfsacError as e:
        where = " ".join(f"--{k}={v}" for k, v in overrides.items() if k not in RESERVED_FLAGS)
        raise TfsacError(f"{where}: {e}" if where else str(e)) from None


@dataclasses.dataclass
class Plan:
    """A validated sweep: the grid's trials, or the search space."""

    sweep_dir: str
    method: str  # "grid" or one of SEARCH_METHODS
    definition: Dict  # written to sweep.json; a --resume must match it
    trials: List[Dict] = dataclasses.field(default_factory=list)
    space: Dict[str, Dimension] = dataclasses.field(default_factory=dict)
    seed: int = 0
    num_samples: int = 10
    objective: str = "final"
    early_stopping: bool = False
    cpus_per_trial: int = 1
    max_concurrent: int = 0
    max_failures: int = 2
    # Builds the search's trial specs in this process (holds the parsed flags).
    factory: Optional[TrialFactory] = dataclasses.field(default=None, repr=False)

    @property
    def metric(self) -> str:
        return OBJECTIVES[self.objective]


def plan_sweep(
    configs: ConfigSource,
    sweep_dir: str,
    seeds: Sequence[int],
    grid: Iterable[str] = (),
    search: str = "",
    space: Iterable[str] = (),
    early_stopping: str = "auto",
    **settings,
) -> Plan:
    """Checks the sweep's settings (`settings`: Plan's num_samples, objective, cpus_per_trial,
    max_concurrent, max_failures) and builds every trial's config (grid) or the configs at
    the ends of every searched range (search); raises TfsacError on the first problem."""
    grid, space, seeds = list(grid), list(space), list(seeds)
    objective = settings.get("objective", "final")
    _check_settings(sweep_dir, seeds, grid, search, space, objective, early_stopping)
    asha = early_stopping == "asha" or (early_stopping == "auto" and bool(search))
    plan = Plan(os.path.abspath(sweep_dir), search or "grid", {}, seed=seeds[0], **settings)
    plan.early_stopping = asha
    plan.factory = TrialFactory(configs, plan.sweep_dir, plan.cpus_per_trial)
    for name, least in SETTING_MINIMA.items():
        if getattr(plan, name) < least:
            raise TfsacError(f"--{name} must be >= {least}, got {getattr(plan, name)}")
    base = plan.factory("base", {}, seeds[0])["config"]
    for per_trial in ("seed", "run_dir", "export_dir"):
        base.pop(per_trial)
    if search:
        _plan_search(plan, configs, space, base)
    else:
        _plan_grid(plan, configs, grid, seeds, base)
    _check_runs(plan, base)
    return plan


def _check_runs(plan: Plan, base: Dict) -> None:
    """What would fail every trial, checked before anything is written: env runners, the
    envs, init_from runs and recorded data that do not fit them, the sweep folder."""
    configs = [t["config"] for t in plan.trials] or [base]
    if any(c["num_actors"] for c in configs):
        raise TfsacError(
            "env runners (--num_actors) do not run inside sweep trials: a trial is one "
            "process with --cpus_per_trial CPUs; sweep without --num_actors"
        )
    specs, checked = {}, set()
    for config in configs:
        env_id, env_kwargs = config["env_id"], config["env_kwargs"]
        env = json.dumps([env_id, env_kwargs], sort_keys=True)
        if env not in specs:
            made = checked_env(env_factory(env_id, env_kwargs), env_id)
            specs[env] = env_spec(env_id, made)
            made.close()
        same = {k: v for k, v in config.items() if k not in ("seed", "run_dir", "export_dir")}
        setting = json.dumps(same, sort_keys=True, default=str)
        if config["init_from"] and setting not in checked:
            checked.add(setting)
            check_source(SACConfig.from_dict(config), specs[env])
        if config["offline_data"] and (env, config["offline_data"]) not in checked:
            checked.add((env, config["offline_data"]))
            load_recorded(config["offline_data"], specs[env])
    check_outside_exports(plan.sweep_dir, "--sweep_dir")
    check_writable(plan.sweep_dir)


def _check_settings(sweep_dir, seeds, grid, search, space, objective, early_stopping) -> None:
    if not sweep_dir:
        raise TfsacError("--sweep_dir is needed: the folder for the trials' run directories")
    if search and search not in SEARCH_METHODS:
        raise TfsacError(f"unknown --search method {search!r} (known: {', '.join(SEARCH_METHODS)})")
    if objective not in OBJECTIVES:
        raise TfsacError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if early_stopping not in ("auto", "asha", "none"):
        raise TfsacError(f"--early_stopping must be auto, asha or none, got {early_stopping!r}")
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) < len(seeds):
        raise TfsacError(f"--seeds must be distinct non-negative integers, got {seeds}")
    if search and grid:
        raise TfsacError("--grid and --search do not combine: search ranges go in --space")
    if search and len(seeds) > 1:
        raise TfsacError("a search trains each sample once, with --seed; --seeds is for grids")
    if space and not search:
        raise TfsacError("--space needs --search=optuna")
    if search and not space:
        raise TfsacError("--search needs at least one --space=<flag>=<distribution>:...")


def _plan_search(plan: Plan, configs: ConfigSource, entries: List[str], base: Dict) -> None:
    """The search space of --space entries 'flag=kind:low:high' or 'flag=choice:v1,v2,...',
    each range checked at its ends and one point inside."""
    form = (
        f"<training flag>=<{'|'.join(Dimension.KINDS[:4])}>:<low>:<high> or "
        "<training flag>=choice:<value>,<value>,..."
    )
    for name, text in _named(entries, configs, "--space", form):
        kind, _, rest = text.partition(":")
        kind = kind.strip()
        if kind not in Dimension.KINDS:
            raise TfsacError(
                f"--space {name}: unknown distribution {kind!r} "
                f"(known: {', '.join(Dimension.KINDS)})"
            )
        if kind == "choice":
            choices = split_values(rest)
            if not all(choices) or len(set(choices)) < len(choices):
                raise TfsacError(f"--space {name}: choice needs distinct, non-empty values")
            plan.space[name] = Dimension(name, kind, choices=tuple(choices))
            continue
        try:
            low, high = (float(b) for b in rest.split(":"))
        except ValueError:
            raise TfsacError(
                f"--space {name}: {kind} needs <low>:<high> numbers, got {rest!r}"
            ) from None
        if not (math.isfinite(low) and math.isfinite(high)) or not low < high:
            raise TfsacError(f"--space {name}: need finite bounds with low < high, got {rest!r}")
        if kind.startswith("log") and low <= 0:
            raise TfsacError(f"--space {name}: {kind} needs a positive low bound, got {rest!r}")
        if kind in ("int", "logint") and not (low.is_integer() and high.is_integer()):
            raise TfsacError(f"--space {name}: {kind} needs integer bounds, got {rest!r}")
        plan.space[name] = Dimension(name, kind, low, high)
    for dim in plan.space.values():
        for value in dim.probes():
            plan.factory("check", {dim.name: value}, plan.seed)
    plan.definition = {
        "method": plan.method,
        "base": base,
        "space": {n: dataclasses.asdict(d) for n, d in plan.space.items()},
        "seed": plan.seed,
        "objective": plan.objective,
    }


def _plan_grid(plan: Plan, configs: ConfigSource, entries: List[str], seeds, base: Dict) -> None:
    """Every combination of the values of --grid entries 'flag=v1,v2,...' times every seed."""
    values: Dict[str, List[str]] = {}
    for name, text in _named(entries, configs, "--grid", "<training flag>=<value>,<value>,..."):
        values[name] = split_values(text)
        if not text.strip():
            raise TfsacError(f"--grid {name}: no values (e.g. --grid={name}=<value>,<value>)")
        if not all(values[name]):
            raise TfsacError(f"--grid {name}: an empty value in {text!r}")
        if len(set(values[name])) < len(values[name]):
            raise TfsacError(f"--grid {name}: a value is given twice in {text!r}")
    seen: Dict[str, str] = {}
    for combo in itertools.product(*values.values()):
        overrides = dict(zip(values, combo, strict=True))
        tag = config_tag(overrides)
        for seed in seeds:
            spec = plan.factory(tag, overrides, seed)
            key = json.dumps(
                {**spec["config"], "run_dir": None, "export_dir": None}, sort_keys=True
            )
            if key in seen:
                raise TfsacError(f"--grid: {spec['name']} and {seen[key]} are the same config")
            if any(t["run_dir"] == spec["run_dir"] for t in plan.trials):
                raise TfsacError(f"--grid: two configs share the run directory {spec['run_dir']}")
            seen[key] = spec["name"]
            plan.trials.append(spec)
    plan.definition = {"method": "grid", "base": base, "grid": values, "seeds": seeds}


def _named(entries: Iterable[str], configs: ConfigSource, where: str, form: str) -> Iterator:
    """(name, text) of each '<name>=<text>' entry of `where`, its name checked; `form` if not."""
    seen = set()
    for entry in entries:
        name, sep, text = entry.partition("=")
        name = name.strip()
        if not sep or not name or (where == "--space" and not text.partition(":")[0].strip()):
            raise TfsacError(f"{where}={entry}: expected {form}")
        check_varied_name(configs.names, name, where)
        if name in seen:
            raise TfsacError(f"{where}: {name} is given twice")
        seen.add(name)
        yield name, text
