"""Sweeps of tfsac runs on Ray Tune: a grid of training-flag values times seeds, or an Optuna
search with early stopping (ASHA). Each trial is one ordinary run (`train(config,
resume=True)`) in its own run directory under the sweep directory.

Planning, validation and results need neither Ray nor TensorFlow; `run_sweep` imports Ray,
and only the trials (in Ray's worker processes) import TensorFlow.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import itertools
import json
import logging
import math
import os
import re
import signal
import socket
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

from absl import flags

from tfsac.config import SACConfig
from tfsac.errors import TfsacError, first_line
from tfsac.run.logs import OwnInfoOnly
from tfsac.run.run_dir import StopSignals, check_writable
from tfsac.scale.ray_cluster import start_ray

SEARCH_METHODS = ("optuna",)
OBJECTIVES = {"final": "eval_return", "best": "best_eval_return"}
# Flags that the sweep sets for each trial; a grid or search over them is refused.
RESERVED_FLAGS = {
    "seed": "give the seeds with --seeds",
    "run_dir": "each trial's run directory is under --sweep_dir",
    "export_dir": "each trial exports into its run directory",
    "resume": "--resume continues the whole sweep",
    "progress_bar": "trials run without a progress bar",
    "ray_address": "give the cluster of the whole sweep with --ray_address",
}
SWEEP_FILE = "sweep.json"  # what the sweep is: a --resume must ask for the same
TRIALS_FILE = "trials.json"  # each trial's spec and status, as the driver saw them
TRIAL_FILE = "trial.json"  # in a run directory: the trial's attempts and evaluations
DONE = ("finished", "stopped")  # not run again by --resume
TAG_LENGTH = 100
SUMMARY_EVERY_S = 60.0  # between the sweep's one-line summaries


# ------------------------------------------------------------------------ input parsing
def split_values(text: str) -> List[str]:
    """'a,b,c' -> ['a', 'b', 'c']; values that hold commas are separated by ';' instead
    (hidden_sizes=64,64;256,256)."""
    return [v.strip() for v in text.split(";" if ";" in text else ",")]


def parse_grid(entries: Iterable[str], configs: FlagConfigs) -> Dict[str, List[str]]:
    """--grid entries 'flag=v1,v2,...' -> {flag: [v1, v2, ...]}, in the order given."""
    grid: Dict[str, List[str]] = {}
    for entry in entries:
        name, sep, text = entry.partition("=")
        name = name.strip()
        if not sep or not name:
            raise TfsacError(f"--grid={entry}: expected <training flag>=<value>,<value>,...")
        configs.check_name(name, "--grid")
        if name in grid:
            raise TfsacError(f"--grid: {name} is given twice")
        values = split_values(text)
        if not text.strip():
            raise TfsacError(f"--grid {name}: no values")
        if not all(values):
            raise TfsacError(f"--grid {name}: an empty value in {text!r}")
        if len(set(values)) < len(values):
            raise TfsacError(f"--grid {name}: a value is given twice in {text!r}")
        grid[name] = values
    return grid


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One searched flag: a range (uniform, loguniform, int, logint; bounds inclusive) or a
    choice between values."""

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
        """Values to check before a search: every choice, or the ends of the range and a
        point inside it (a fraction, for floats: an int flag refuses a float range)."""
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
        if self.kind in ("int", "logint"):
            return distributions.IntDistribution(
                int(self.low), int(self.high), log=self.kind == "logint"
            )
        return distributions.FloatDistribution(self.low, self.high, log=self.kind == "loguniform")


def parse_space(entries: Iterable[str], configs: FlagConfigs) -> Dict[str, Dimension]:
    """--space entries 'flag=kind:low:high' or 'flag=choice:v1,v2,...' -> Dimensions."""
    space: Dict[str, Dimension] = {}
    for entry in entries:
        name, sep, text = entry.partition("=")
        name = name.strip()
        kind, _, rest = text.partition(":")
        kind = kind.strip()
        if not sep or not name or not kind:
            raise TfsacError(
                f"--space={entry}: expected <training flag>=<{'|'.join(Dimension.KINDS[:4])}>"
                ":<low>:<high> or <training flag>=choice:<value>,<value>,..."
            )
        configs.check_name(name, "--space")
        if name in space:
            raise TfsacError(f"--space: {name} is given twice")
        if kind not in Dimension.KINDS:
            raise TfsacError(
                f"--space {name}: unknown distribution {kind!r} "
                f"(known: {', '.join(Dimension.KINDS)})"
            )
        if kind == "choice":
            choices = split_values(rest)
            if not all(choices) or len(set(choices)) < len(choices):
                raise TfsacError(f"--space {name}: choice needs distinct, non-empty values")
            space[name] = Dimension(name, kind, choices=tuple(choices))
            continue
        bounds = rest.split(":")
        try:
            low, high = (float(b) for b in bounds)
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
        space[name] = Dimension(name, kind, low, high)
    return space


# ---------------------------------------------------------------------- configs, trials
class FlagConfigs:
    """SACConfigs from the parsed training flags plus overrides {flag: text}: each text goes
    through its flag's own parser, then `build` (the scripts' config_from_flags) reads the
    flags, which are put back afterwards. Only for the process that parsed the flags."""

    def __init__(self, flag_values, names: Iterable[str], build: Callable[[], SACConfig]):
        self._flags = flag_values
        self.names = frozenset(names)
        self._build = build

    def check_name(self, name: str, where: str) -> None:
        if name in RESERVED_FLAGS:
            raise TfsacError(f"{where}: --{name} cannot vary in a sweep ({RESERVED_FLAGS[name]})")
        if name not in self.names:
            raise TfsacError(f"{where}: unknown training flag --{name}")

    def __call__(self, overrides: Dict[str, str]) -> SACConfig:
        saved = {}
        try:
            for name, text in overrides.items():
                flag = self._flags[name]
                saved[name] = (flag.value, flag.present, flag.using_default_value)
                try:
                    flag.parse(text)
                except (flags.Error, ValueError) as e:
                    raise TfsacError(str(e)) from None
            config = self._build()
        finally:
            for name, (value, present, default) in saved.items():
                flag = self._flags[name]
                flag.value, flag.present, flag.using_default_value = value, present, default
        try:
            return config.validate()
        except TfsacError as e:
            where = " ".join(f"--{k}={v}" for k, v in overrides.items() if k not in RESERVED_FLAGS)
            raise TfsacError(f"{where}: {e}" if where else str(e)) from None

    def __getstate__(self):
        # Tune pickles its search algorithm (which holds this); the flags stay here.
        return {"names": self.names, "_flags": None, "_build": None}


def config_tag(overrides: Dict[str, str]) -> str:
    """A folder name for a config: 'learning_rate=0.001_batch_size=512' ('base' for none)."""
    if not overrides:
        return "base"
    text = "_".join(f"{k}={v}" for k, v in overrides.items())
    tag = re.sub(r"[^A-Za-z0-9._=+-]+", "-", text).strip("-").replace("=-", "=")
    if len(tag) > TAG_LENGTH:
        digest = hashlib.sha1(text.encode()).hexdigest()[:8]
        tag = f"{tag[: TAG_LENGTH - 9]}-{digest}"
    return tag


@dataclasses.dataclass
class TrialFactory:
    """Trial specs (a JSON-able dict that Tune passes to `run_trial`): name, run directory,
    the validated config, the sampled values."""

    configs: FlagConfigs
    sweep_dir: str
    threads: int

    def __call__(self, tag: str, overrides: Dict[str, str], seed: int, **extra) -> Dict:
        run_dir = os.path.join(self.sweep_dir, tag, f"seed{seed}")
        per_trial = {
            "seed": str(seed),
            "run_dir": run_dir,
            "export_dir": os.path.join(run_dir, "saved_models"),
            "progress_bar": "false",
        }
        config = self.configs({**overrides, **per_trial})
        return {
            "name": f"{tag}/seed{seed}",
            "tag": tag,
            "seed": seed,
            "overrides": dict(overrides),
            "run_dir": run_dir,
            "threads": self.threads,
            "config": config.to_dict(),
            **extra,
        }


@dataclasses.dataclass
class Plan:
    """A validated sweep: the grid's trials, or the search space."""

    sweep_dir: str
    method: str  # "grid" or one of SEARCH_METHODS
    definition: Dict  # written to sweep.json; a --resume must match it
    trials: List[Dict] = dataclasses.field(default_factory=list)
    space: Dict[str, Dimension] = dataclasses.field(default_factory=dict)
    seed: int = 0
    num_samples: int = 1
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
    configs: FlagConfigs,
    sweep_dir: str,
    seeds: Sequence[int],
    grid: Iterable[str] = (),
    search: str = "",
    space: Iterable[str] = (),
    num_samples: int = 10,
    objective: str = "final",
    early_stopping: str = "auto",
    cpus_per_trial: int = 1,
    max_concurrent: int = 0,
    max_failures: int = 2,
) -> Plan:
    """Checks the sweep's settings and builds every trial's config (grid) or the configs at
    the ends of every searched range (search); raises TfsacError on the first problem."""
    grid, space, seeds = list(grid), list(space), list(seeds)
    _check_settings(sweep_dir, seeds, grid, search, space, objective, early_stopping)
    for name, value, least in (
        ("num_samples", num_samples, 1),
        ("cpus_per_trial", cpus_per_trial, 1),
        ("max_concurrent", max_concurrent, 0),
        ("max_failures", max_failures, 0),
    ):
        if value < least:
            raise TfsacError(f"--{name} must be >= {least}, got {value}")
    sweep_dir = os.path.abspath(sweep_dir)
    factory = TrialFactory(configs, sweep_dir, cpus_per_trial)
    base = factory("base", {}, seeds[0])["config"]
    for per_trial in ("seed", "run_dir", "export_dir"):
        base.pop(per_trial)
    plan = Plan(
        sweep_dir,
        search or "grid",
        definition={},
        seed=seeds[0],
        num_samples=num_samples,
        objective=objective,
        early_stopping=early_stopping == "asha" or (early_stopping == "auto" and bool(search)),
        cpus_per_trial=cpus_per_trial,
        max_concurrent=max_concurrent,
        max_failures=max_failures,
        factory=factory,
    )
    if search:
        _plan_search(plan, configs, space, base)
    else:
        _plan_grid(plan, configs, grid, seeds, base)
    _check_runs(plan, base)
    return plan


def _check_runs(plan: Plan, base: Dict) -> None:
    """What would fail every trial, checked here before anything is written: env runners
    (a trial is one process with its CPUs), envs that cannot be made or trained on, a
    sweep folder that cannot be written."""
    configs = [t["config"] for t in plan.trials] or [base]
    if any(c["num_actors"] for c in configs):
        raise TfsacError(
            "env runners (--num_actors) do not run inside sweep trials: a trial is one "
            "process with --cpus_per_trial CPUs; sweep without --num_actors"
        )
    from tfsac.data.envs import checked_env, env_factory

    envs = {json.dumps([c["env_id"], c["env_kwargs"]], sort_keys=True) for c in configs}
    for env_id, env_kwargs in (json.loads(e) for e in sorted(envs)):
        checked_env(env_factory(env_id, env_kwargs), env_id).close()
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


def _plan_search(plan: Plan, configs: FlagConfigs, space: List[str], base: Dict) -> None:
    """The search space, each range checked at its ends and one point inside."""
    plan.space = parse_space(space, configs)
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


def _plan_grid(plan: Plan, configs: FlagConfigs, grid: List[str], seeds, base: Dict) -> None:
    """Every combination of the grid's values times every seed, as trials."""
    values = parse_grid(grid, configs)
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


# ------------------------------------------------------------------------ Ray, checks
def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _read_json(path: str, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return default
    except (OSError, ValueError) as e:
        raise TfsacError(f"cannot read {path}: {e}") from None


class SweepState:
    """trials.json: every trial's spec, status and outcome, rewritten on each change."""

    def __init__(self, sweep_dir: str):
        self.path = os.path.join(sweep_dir, TRIALS_FILE)
        self.trials: Dict[str, Dict] = _read_json(self.path, {})

    def update(self, name: str, **fields) -> None:
        self.trials.setdefault(name, {}).update(fields)
        _write_atomic(self.path, json.dumps(self.trials, indent=2))

    def done(self, spec: Dict) -> bool:
        status = self.trials.get(spec["name"], {}).get("status")
        return status in DONE or _finished_run(spec["run_dir"])


def _finished_run(run_dir: str) -> bool:
    summary = _read_json(os.path.join(run_dir, "summary.json"), None) or {}
    config = _read_json(os.path.join(run_dir, "config.json"), None) or {}
    return bool(summary) and summary.get("total_steps") == config.get("total_steps")


# ------------------------------------------------------------------------ the trial
def _thread_names() -> Dict[str, int]:
    """This process's threads by name (Linux): TF's inter-op pool is tf_Compute, XLA's
    intra-op pool tf_XLAEigen; a trial records them to show its thread limits held."""
    counts: Dict[str, int] = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
            counts[name] = counts.get(name, 0) + 1
    except OSError:
        pass
    return counts


def _cpu_seconds() -> Optional[float]:
    """CPU time of this process so far (imports included), where the OS tells it."""
    try:
        import resource

        usage = resource.getrusage(resource.RUSAGE_SELF)
    except ImportError:
        return None
    return usage.ru_utime + usage.ru_stime


def _metrics(evaluations: List[Dict], finished: bool) -> Dict[str, Any]:
    returns = [e["return_mean"] for e in evaluations]
    return {
        "eval_return": returns[-1],
        "best_eval_return": max(returns),
        "env_steps": evaluations[-1]["step"],
        "finished": finished,
    }


def run_trial(tune_config: Dict) -> None:
    """The Tune trainable: one tfsac run, resumed from its own checkpoint when there is one
    (a retry), reporting each evaluation to Tune (which may stop it there)."""
    spec = tune_config["trial"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    # Before TF's first op in this worker process, which fixes the pools' sizes.
    tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
    tf.config.threading.set_inter_op_parallelism_threads(spec["threads"])
    from absl import logging as absl_logging
    from ray import tune

    from tfsac.run.trainer import train

    config = SACConfig.from_dict(spec["config"])
    run_dir = config.run_dir
    os.makedirs(run_dir, exist_ok=True)
    handler = logging.FileHandler(os.path.join(run_dir, "train.log"))
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    handler.addFilter(OwnInfoOnly())  # TF's and other libraries' INFO chatter stays out
    absl_logging.get_absl_logger().addHandler(handler)
    absl_logging.set_verbosity(absl_logging.INFO)

    record_path = os.path.join(run_dir, TRIAL_FILE)
    record = _read_json(record_path, None) or {"name": spec["name"], "evaluations": []}
    record.setdefault("attempts", []).append(
        {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
    )
    _write_atomic(record_path, json.dumps(record, indent=2))

    def on_evaluation(evaluation: Dict) -> None:
        if evaluation["step"] >= config.total_steps:
            return  # reported with the summary, below
        # A retry resumes from a checkpoint that may predate evaluations already recorded.
        kept = [e for e in record["evaluations"] if e["step"] < evaluation["step"]]
        record["evaluations"] = [*kept, evaluation]
        _write_atomic(record_path, json.dumps(record, indent=2))
        tune.report(_metrics(record["evaluations"], finished=False))

    try:
        result = train(config, resume=True, on_evaluation=on_evaluation)
    except TfsacError as e:
        # A bad env, NaN losses, an unwritable disk: a retry would fail the same way.
        record["error"] = first_line(e)
        _write_atomic(record_path, json.dumps(record, indent=2))
        failed = {"eval_return": math.nan, "best_eval_return": math.nan, "env_steps": 0}
        tune.report({**failed, "error": record["error"]})
        return
    summary = result.summary
    record["evaluations"] = summary["evaluations"]
    record["attempts"][-1].update(threads_by_name=_thread_names(), cpu_s=_cpu_seconds())
    _write_atomic(record_path, json.dumps(record, indent=2))
    tune.report(
        {
            **_metrics(summary["evaluations"], finished=True),
            "wall_time_s": summary["wall_time_s"],
            "env_steps_per_s": summary["env_steps_per_s"],
        }
    )


def _trial_name(trial) -> str:
    return trial.config["trial"]["name"]


def _trial_dirname(trial) -> str:
    return _trial_name(trial).replace("/", "-")[: TAG_LENGTH + 20]


# ------------------------------------------------------------------------ the driver
def _tune_classes():
    """The Tune subclasses (defined here so that importing this module needs no Ray)."""
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    class Progress(tune.Callback):
        """A line per trial event on stdout (started, evaluated, finished, failed, retried)
        and a summary line every SUMMARY_EVERY_S; each trial's status in trials.json."""

        def __init__(self, state: SweepState, total: int, stop: StopSignals):
            self.state, self.total, self.ended, self.stop = state, total, 0, stop
            self.best: Optional[tuple] = None  # (return, trial name)
            self.last_summary = time.monotonic()

        def on_trial_start(self, iteration, trials, trial, **info):
            print(f"{trial.config['trial']['name']}: started", flush=True)

        def on_trial_result(self, iteration, trials, trial, result, **info):
            name, ret = trial.config["trial"]["name"], result.get("eval_return")
            if ret is None or not math.isfinite(ret):
                return
            if self.best is None or ret > self.best[0]:
                self.best = (ret, name)
            if not result.get("finished"):  # the final one is the trial's finished line
                steps = result["env_steps"]
                print(f"{name}: eval return {ret:.1f} at {steps} env steps", flush=True)

        def on_step(self, iteration, trials, **info):
            if time.monotonic() - self.last_summary < SUMMARY_EVERY_S:
                return
            self.last_summary = time.monotonic()
            running = sum(t.status == "RUNNING" for t in trials)
            best = "" if self.best is None else f"; best return {self.best[0]:.1f} ({self.best[1]})"
            print(
                f"sweep: {self.ended} of {self.total} done, {running} running, "
                f"{self.total - self.ended - running} to start{best}",
                flush=True,
            )

        def on_trial_complete(self, iteration, trials, trial, **info):
            spec, result = trial.config["trial"], trial.last_result or {}
            if self.stop.received is not None and not result.get("finished"):
                # Stopped by the interrupt, not by ASHA: a --resume continues it.
                self.state.update(spec["name"], status="pending")
                print(f"{spec['name']}: interrupted; --resume continues it", flush=True)
                return
            self.ended += 1
            head = f"[{self.ended}/{self.total}] {spec['name']}:"
            if result.get("error"):
                self.state.update(spec["name"], status="failed", error=result["error"])
                print(f"{head} failed: {result['error']}", flush=True)
                return
            ret, steps = result.get("eval_return"), result.get("env_steps")
            seconds = result.get("wall_time_s", result.get("time_total_s", 0.0))
            status = "finished" if result.get("finished") else "stopped"
            self.state.update(spec["name"], status=status, wall_time_s=seconds)
            what = "return" if status == "finished" else "stopped early, return"
            print(f"{head} {what} {ret:.1f} at {steps} env steps, {seconds:.0f} s", flush=True)

        def on_trial_error(self, iteration, trials, trial, **info):
            spec = trial.config["trial"]
            self.ended += 1
            error = _error_line(trial)
            self.state.update(spec["name"], status="failed", error=error)
            print(f"[{self.ended}/{self.total}] {spec['name']}: failed: {error}", flush=True)

        def on_trial_recover(self, iteration, trials, trial, **info):
            name, error = trial.config["trial"]["name"], _error_line(trial)
            print(f"{name}: {error}; retrying from its newest checkpoint", flush=True)

    class SampleSearch(OptunaSearch):
        """Optuna's samples as trial specs: the sampled flag values go through the flags
        into a validated config and a run directory named after them."""

        def __init__(self, make_sample: Callable[[Dict], Dict], **kwargs):
            super().__init__(**kwargs)
            self._make_sample = make_sample

        def suggest(self, trial_id):
            params = super().suggest(trial_id)
            if not params or not isinstance(params, dict):
                return params
            return {"trial": self._make_sample(params)}

    class StopAll(tune.Stopper):
        """Ends every trial once SIGINT or SIGTERM reached the driver."""

        def __init__(self, stop: StopSignals):
            self.stop = stop

        def __call__(self, trial_id, result):
            return False

        def stop_all(self):
            return self.stop.received is not None

    return Progress, SampleSearch, StopAll


def _say_stopping(signum: int) -> None:
    print(f"{signal.Signals(signum).name}: stopping the trials ...", flush=True)


def _error_line(trial) -> str:
    """'<type>: <first line>' of a failed trial's error (a task error's cause)."""
    try:
        error = trial.get_pickled_error()
    except Exception:  # noqa: BLE001 - an unreadable error file says no more than this
        error = None
    if error is None:
        return _error_file_line(trial)
    error = getattr(error, "cause", None) or error
    return f"{type(error).__name__}: {first_line(error)}"


def _error_file_line(trial) -> str:
    """The first line of the latest failure in the trial's error.txt (Tune writes it for
    every failure, the pickled error only for some), e.g. a process killed with its node."""
    try:
        with open(trial.error_file) as f:
            text = f.read()
    except (OSError, TypeError):
        return "the trial failed"
    latest = text.rsplit("Failure # ", 1)[-1].splitlines()[1:]
    line = next((x.strip() for x in latest if x.strip()), "").split(". ")[0].rstrip(".")
    return f"the trial failed: {line}" if line else "the trial failed"


def _check_definition(plan: Plan, resume: bool) -> None:
    path = os.path.join(plan.sweep_dir, SWEEP_FILE)
    old = _read_json(path, None)
    if old is None:
        return
    new = json.loads(json.dumps(plan.definition))  # as sweep.json holds it (tuples as lists)
    if "base" in old and "base" in new:
        # A sweep started by an earlier tfsac lacks the config fields added since, which
        # held their defaults then.
        defaults = json.loads(json.dumps(SACConfig().to_dict()))
        added = {k: defaults[k] for k in new["base"] if k not in old["base"] and k in defaults}
        old["base"] = {**added, **old["base"]}
    if not resume:
        raise TfsacError(
            f"{plan.sweep_dir} already holds a sweep; continue it with --resume or choose "
            "another --sweep_dir"
        )
    if old != new:
        keys = sorted(k for k in {*old, *new} if old.get(k) != new.get(k))
        if "base" in keys:
            a, b = old.get("base", {}), new["base"]
            fields = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
            keys = [f"base config ({', '.join(fields)})" if k == "base" else k for k in keys]
        raise TfsacError(
            f"--resume with other settings than the sweep in {plan.sweep_dir} "
            f"(different: {', '.join(keys)})"
        )


def run_sweep(plan: Plan, ray_address: Optional[str] = None, resume: bool = False) -> Dict:
    """Runs the plan's trials that are not done yet on Ray Tune, then writes the results.
    Returns {"trials": {name: entry}, "files": [...], "unfinished": [name, ...], "signal":
    the SIGINT/SIGTERM that stopped it, or None}."""
    _check_definition(plan, resume)
    state = SweepState(plan.sweep_dir)
    searching = plan.method != "grid"
    todo, search_alg = [], None
    if searching:
        count, search_alg = _search_setup(plan, state)
    else:
        todo = [t for t in plan.trials if not state.done(t)]
        count = len(todo)
    # Ray first: a sweep that cannot start or join it leaves nothing behind.
    started = start_ray(ray_address) if count else False
    try:
        os.makedirs(plan.sweep_dir, exist_ok=True)
        definition = json.dumps(plan.definition, indent=2)
        _write_atomic(os.path.join(plan.sweep_dir, SWEEP_FILE), definition)
        for spec in plan.trials:
            if spec["name"] not in state.trials:
                state.update(spec["name"], spec=spec, status="pending")
        done = sum(state.done(e["spec"]) for e in state.trials.values())
        if done:
            total = len(state.trials)
            print(f"{done} of {total} trials already done in {plan.sweep_dir}", flush=True)
        with StopSignals(on_signal=_say_stopping) as stop:
            if count:
                _fit(plan, state, count, todo, search_alg, stop)
        files = write_results(plan.sweep_dir, state.trials, sort=searching)
    finally:
        if started:
            import ray

            ray.shutdown()
    left = [name for name, entry in state.trials.items() if not state.done(entry["spec"])]
    return {"trials": state.trials, "files": files, "unfinished": left, "signal": stop.received}


class _Samples:
    """Optuna's samples as trial specs: a new sample gets the next index and a run directory
    named after its values; an earlier session's pending sample gets its old spec back."""

    def __init__(self, plan: Plan, state: SweepState, pending: List[Dict]):
        self.plan, self.state = plan, state
        self.pending = {self._key(spec["params"]): spec for spec in pending}

    @staticmethod
    def _key(params: Dict) -> str:
        return json.dumps(params, sort_keys=True)

    def __call__(self, params: Dict) -> Dict:
        spec = self.pending.pop(self._key(params), None)
        if spec is not None:
            return spec
        index = len(self.state.trials)
        overrides = {n: self.plan.space[n].text(v) for n, v in params.items()}
        tag = f"{index:03d}_{config_tag(overrides)}"
        spec = self.plan.factory(tag, overrides, self.plan.seed, sample=index, params=params)
        self.state.update(spec["name"], spec=spec, status="pending")
        return spec


def _search_setup(plan: Plan, state: SweepState):
    """The search algorithm, told the samples that are done; pending samples of an earlier
    session are tried again first (same values, same run directory)."""
    _, SampleSearch, _ = _tune_classes()
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    samples = sorted(state.trials.values(), key=lambda e: e["spec"]["sample"])
    done = [e for e in samples if state.done(e["spec"])]
    pending = [e["spec"] for e in samples if not state.done(e["spec"])]
    make_sample = _Samples(plan, state, pending)
    search = SampleSearch(
        make_sample,
        space={n: d.distribution() for n, d in plan.space.items()},
        metric=plan.metric,
        mode="max",
        seed=plan.seed,
        points_to_evaluate=[spec["params"] for spec in pending] or None,
    )
    for entry in done:
        value = _trial_outcome(entry)["best" if plan.objective == "best" else "return"]
        if value is not None and math.isfinite(value):
            search.add_evaluated_point(entry["spec"]["params"], value)
    return len(pending) + max(0, plan.num_samples - len(samples)), search


def _fit(
    plan: Plan, state: SweepState, count: int, todo: List[Dict], search_alg, stop: StopSignals
) -> None:
    """Runs `count` trials on Tune: the grid's `todo` specs, or `count` samples of the
    search algorithm; all trials end early once `stop` has received a signal."""
    # No Tune result loggers (each run has its own files) and no Tune console output (its
    # new reporter prints a table even at verbose=0): the Progress callback's lines instead.
    os.environ.setdefault("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    os.environ["TUNE_DISABLE_SIGINT_HANDLER"] = "1"  # `stop` has them
    try:
        from ray import tune
        from ray.tune.schedulers import ASHAScheduler

        Progress, _, StopAll = _tune_classes()
        scheduler = None
        if plan.early_stopping:
            base = plan.definition["base"]
            scheduler = ASHAScheduler(
                time_attr="env_steps",
                max_t=base["total_steps"],
                grace_period=min(base["eval_every"], base["total_steps"]),
                reduction_factor=3,
            )
        param_space = {} if search_alg else {"trial": tune.grid_search(todo)}
        tuner = tune.Tuner(
            tune.with_resources(run_trial, {"cpu": plan.cpus_per_trial}),
            param_space=param_space,
            tune_config=tune.TuneConfig(
                metric=plan.metric,
                mode="max",
                search_alg=search_alg,
                scheduler=scheduler,
                num_samples=count if search_alg else 1,
                max_concurrent_trials=plan.max_concurrent or None,
                reuse_actors=False,
                trial_name_creator=_trial_name,
                trial_dirname_creator=_trial_dirname,
            ),
            run_config=tune.RunConfig(
                name=time.strftime("session-%Y%m%d-%H%M%S"),
                storage_path=os.path.join(plan.sweep_dir, "tune"),
                verbose=0,
                failure_config=tune.FailureConfig(max_failures=plan.max_failures),
                callbacks=[Progress(state, count, stop)],
                stop=StopAll(stop),
            ),
        )
        # Tune logs each trial error with its traceback; the Progress lines say it in one.
        logging.getLogger("ray.tune").setLevel(logging.CRITICAL)
        tuner.fit()
    except TfsacError:
        raise
    except Exception as e:  # noqa: BLE001 - Tune's own errors, as one line
        raise TfsacError(f"the sweep stopped: {first_line(e)}") from None


# ------------------------------------------------------------------------ results
def _trial_outcome(entry: Dict) -> Dict:
    """A trial's final evaluation return, env steps, wall time, from its run directory."""
    spec = entry["spec"]
    run_dir = spec["run_dir"]
    if _finished_run(run_dir):
        summary = _read_json(os.path.join(run_dir, "summary.json"))
        status, evaluations = "finished", summary["evaluations"]
        wall_time = summary["wall_time_s"]
    else:
        record = _read_json(os.path.join(run_dir, TRIAL_FILE), None) or {}
        status, evaluations = entry.get("status", "pending"), record.get("evaluations") or []
        wall_time = entry.get("wall_time_s")
    returns = [e["return_mean"] for e in evaluations]
    steps = evaluations[-1]["step"] if evaluations else 0
    if status not in DONE:  # where a --resume continues it: its newest checkpoint
        steps = max([steps, *_checkpoint_steps(run_dir)])
    return {
        "status": status,
        "return": returns[-1] if returns else None,
        "best": max(returns) if returns else None,
        "steps": steps,
        "wall_time_s": wall_time,
    }


def _checkpoint_steps(run_dir: str) -> List[int]:
    try:
        names = os.listdir(os.path.join(run_dir, "checkpoints"))
    except OSError:
        return []
    return [int(m.group(1)) for m in map(re.compile(r"ckpt-(\d+)\.index").fullmatch, names) if m]


def _fmt(value: Optional[float], digits: int = 1) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def summarize(trials: Dict[str, Dict]) -> List[Dict]:
    """One row per config: mean +- std over seeds of the final evaluation return of its done
    trials (finished or stopped early), their mean env steps and wall time, the best one's run
    directory. A trial still to run or under way counts in the status column only, with the
    env steps it has reached, so a half-done sweep's means are never mixed with partial runs."""
    groups: Dict[str, List[Dict]] = {}
    for entry in trials.values():
        groups.setdefault(entry["spec"]["tag"], []).append(entry)
    rows = []
    for tag, entries in groups.items():
        outcomes = [(_trial_outcome(e), e["spec"]) for e in entries]
        done = [(o, s) for o, s in outcomes if o["status"] in DONE and o["return"] is not None]
        returns = [o["return"] for o, _ in done]
        walls = [o["wall_time_s"] for o, _ in done if o["wall_time_s"] is not None]
        best = max(done, key=lambda x: x[0]["return"])[1]["run_dir"] if done else ""
        rows.append(
            {
                "config": tag,
                "overrides": " ".join(
                    f"--{k}={v}" for k, v in entries[0]["spec"]["overrides"].items()
                ),
                "seeds": " ".join(str(s["seed"]) for _, s in outcomes),
                "status": _status(o for o, _ in outcomes),
                "return_mean": sum(returns) / len(returns) if returns else None,
                # One seed has no spread to report.
                "return_std": _std(returns) if len(returns) > 1 else None,
                "env_steps": sum(o["steps"] for o, _ in done) / len(done) if done else None,
                "wall_time_s": sum(walls) / len(walls) if walls else None,
                "best_run_dir": best,
            }
        )
    return rows


def _status(outcomes: Iterable[Dict]) -> str:
    """'2 finished, 1 pending (at 60000 env steps)': counts by status; for trials not done,
    the env steps of their newest checkpoint or evaluation."""
    by_status: Dict[str, List[int]] = {}
    for o in outcomes:
        by_status.setdefault(o["status"], []).append(o["steps"])
    parts = []
    for status, steps in sorted(by_status.items()):
        part = f"{len(steps)} {status}"
        if status not in DONE and any(steps):
            part += f" (at {', '.join(str(s) for s in steps)} env steps)"
        parts.append(part)
    return ", ".join(parts)


def _std(values: List[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def write_results(sweep_dir: str, trials: Dict[str, Dict], sort: bool = False) -> List[str]:
    """results.csv, results.md and a learning-curve PNG per config; each written atomically."""
    from tfsac.run.plotting import plot_runs

    rows = summarize(trials)
    if sort:
        rows.sort(
            key=lambda r: -math.inf if r["return_mean"] is None else r["return_mean"], reverse=True
        )
    files = []
    for row in rows:
        run_dirs = [
            e["spec"]["run_dir"]
            for e in trials.values()
            if e["spec"]["tag"] == row["config"]
            and os.path.exists(os.path.join(e["spec"]["run_dir"], "config.json"))
        ]
        row["curves"] = ""
        if run_dirs:
            path = os.path.join(sweep_dir, row["config"], "learning_curves.png")
            tmp = os.path.join(sweep_dir, row["config"], ".learning_curves.tmp.png")
            os.replace(plot_runs(run_dirs, tmp, title=row["config"]), path)
            row["curves"] = os.path.relpath(path, sweep_dir)
            files.append(path)
    out = io.StringIO()
    writer = csv.DictWriter(out, RESULT_FIELDS)
    writer.writeheader()
    writer.writerows(rows)
    csv_path = os.path.join(sweep_dir, "results.csv")
    _write_atomic(csv_path, out.getvalue())
    md_path = os.path.join(sweep_dir, "results.md")
    _write_atomic(md_path, _markdown(rows, sweep_dir))
    return [csv_path, md_path, *files]


RESULT_FIELDS = [
    "config",
    "overrides",
    "seeds",
    "status",
    "return_mean",
    "return_std",
    "env_steps",
    "wall_time_s",
    "best_run_dir",
    "curves",
]


def _markdown(rows: List[Dict], sweep_dir: str) -> str:
    """results.md's table; paths relative to the sweep directory."""
    lines = [
        "| config | seeds | final eval return (mean ± std) | env steps | wall time (s) | status "
        "| best run | curves |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        ret = _fmt(r["return_mean"])
        if r["return_std"] is not None:
            ret += f" ± {r['return_std']:.1f}"
        best = os.path.relpath(r["best_run_dir"], sweep_dir) if r["best_run_dir"] else ""
        curves = f"[png]({r['curves']})" if r["curves"] else ""
        lines.append(
            f"| {r['overrides'] or 'base'} | {r['seeds']} | {ret} | {_fmt(r['env_steps'], 0)} "
            f"| {_fmt(r['wall_time_s'], 0)} | {r['status']} | {best} | {curves} |"
        )
    return "\n".join(lines) + "\n"
