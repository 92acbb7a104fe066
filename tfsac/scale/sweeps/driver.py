"""The sweep's driver: checks its folder, runs a plan's trials on Ray Tune (a grid, or an Optuna
search with ASHA), prints a line per trial event, writes the results. Importing needs no Ray."""

from __future__ import annotations

import json
import logging
import math
import os
import signal
import time
from typing import Dict, List, Optional

from tfsac.config import SACConfig
from tfsac.errors import Fault, TfsacError, first_line
from tfsac.files import read_json, write_json
from tfsac.run.run_lock import LOCK_FILE, RunLock
from tfsac.run.signals import StopSignals
from tfsac.scale.ray_cluster import start_ray
from tfsac.scale.sweeps.plan import Plan
from tfsac.scale.sweeps.results import trial_outcome, write_results
from tfsac.scale.sweeps.trial import SWEEP_FILE, TAG_LENGTH, SweepState, config_tag, run_trial

SWEEP_DIR = "sweep directory"  # its lock's name in the line that refuses a second driver

SUMMARY_EVERY_S = 60.0  # between the sweep's one-line summaries


def _trial_name(trial) -> str:
    return trial.config["trial"]["name"]


def _trial_dirname(trial) -> str:
    return _trial_name(trial).replace("/", "-")[: TAG_LENGTH + 20]


class ProgressLines:
    """A line per trial event on stdout, a summary every SUMMARY_EVERY_S, and each trial's
    status in trials.json (Tune's callback class is mixed in by `_tune_classes`)."""

    def __init__(self, state: SweepState, total: int, stop: StopSignals):
        self.state, self.total, self.ended, self.stop = state, total, 0, stop
        self.best: Optional[tuple] = None  # (return, trial name)
        self.last_summary = time.monotonic()

    def on_trial_start(self, iteration, trials, trial, **info):
        print(f"{_trial_name(trial)}: started", flush=True)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        name, ret = _trial_name(trial), result.get("eval_return")
        if ret is None or not math.isfinite(ret):
            return
        if self.best is None or ret > self.best[0]:
            self.best = (ret, name)
        if not result.get("finished"):  # the final one is the trial's finished line
            print(f"{name}: eval return {ret:.1f} at {result['env_steps']} env steps", flush=True)

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
        if result.get("error"):
            self._failed(spec["name"], result["error"])
            return
        ret, steps = result.get("eval_return"), result.get("env_steps")
        seconds = result.get("wall_time_s", result.get("time_total_s", 0.0))
        status = "finished" if result.get("finished") else "stopped"
        self.state.update(spec["name"], status=status, wall_time_s=seconds)
        what = "return" if status == "finished" else "stopped early, return"
        head = f"[{self.ended}/{self.total}] {spec['name']}:"
        print(f"{head} {what} {ret:.1f} at {steps} env steps, {seconds:.0f} s", flush=True)

    def on_trial_error(self, iteration, trials, trial, **info):
        self.ended += 1
        self._failed(_trial_name(trial), _error_line(trial))

    def _failed(self, name: str, error: str) -> None:
        self.state.update(name, status="failed", error=error)
        print(f"[{self.ended}/{self.total}] {name}: failed: {error}", flush=True)

    def on_trial_recover(self, iteration, trials, trial, **info):
        name, error = _trial_name(trial), _error_line(trial)
        print(f"{name}: {error}; retrying from its newest checkpoint", flush=True)


def _tune_classes():
    """The Tune subclasses (defined here so that importing this module needs no Ray)."""
    from ray import tune
    from ray.tune.search.optuna import OptunaSearch

    class Progress(ProgressLines, tune.Callback):
        pass

    class SampleSearch(OptunaSearch):
        """Optuna's samples as trial specs (a checked config and a run directory each): a new
        sample gets the next index; an earlier session's pending sample its old spec back."""

        def __init__(self, plan: Plan, state: SweepState, pending: List[Dict], **kwargs):
            super().__init__(**kwargs)
            self.plan, self.state = plan, state
            self.pending = {json.dumps(spec["params"], sort_keys=True): spec for spec in pending}

        def suggest(self, trial_id):
            params = super().suggest(trial_id)
            if not params or not isinstance(params, dict):
                return params
            spec = self.pending.pop(json.dumps(params, sort_keys=True), None)
            if spec is None:
                plan, index = self.plan, len(self.state.trials)
                overrides = {n: plan.space[n].text(v) for n, v in params.items()}
                tag = f"{index:03d}_{config_tag(overrides)}"
                spec = plan.factory(tag, overrides, plan.seed, sample=index, params=params)
                self.state.update(spec["name"], spec=spec, status="pending")
            return {"trial": spec}

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
    """'<type>: <first line>' of a failed trial's error (a task error's cause), else the first
    line of the latest failure in its error.txt (Tune pickles the error only for some)."""
    try:
        error = trial.get_pickled_error()
    except Exception:  # noqa: BLE001 - an unreadable error file says no more than this
        error = None
    if error is not None:
        error = getattr(error, "cause", None) or error
        return f"{type(error).__name__}: {first_line(error)}"
    try:
        with open(trial.error_file) as f:
            text = f.read()
    except (OSError, TypeError):
        return "the trial failed"
    latest = text.rsplit("Failure # ", 1)[-1].splitlines()[1:]
    line = next((x.strip() for x in latest if x.strip()), "").split(". ")[0].rstrip(".")
    return f"the trial failed: {line}" if line else "the trial failed"


def check_definition(plan: Plan, resume: bool) -> None:
    """TfsacError unless the sweep folder is new, empty, or holds this sweep to --resume."""
    old = read_json(os.path.join(plan.sweep_dir, SWEEP_FILE), None)
    if old is None:
        # What a start killed before sweep.json leaves; hidden files are a tool's.
        leftovers = {LOCK_FILE, SWEEP_FILE + ".tmp"}
        names = os.listdir(plan.sweep_dir) if os.path.isdir(plan.sweep_dir) else []
        others = sorted(n for n in names if n not in leftovers and n[0] != ".")
        if others:
            raise TfsacError(
                f"--sweep_dir {plan.sweep_dir} holds files but no sweep ({SWEEP_FILE} is "
                f"missing; it holds {', '.join(others[:3])}{' ...' if len(others) > 3 else ''}): "
                "name a new or empty folder"
            )
        if resume:  # the docs' loops resume each time: a mistyped folder starts afresh, said
            print(f"no sweep to resume in {plan.sweep_dir}: starting it", flush=True)
        return
    new = json.loads(json.dumps(plan.definition))  # as sweep.json holds it (tuples as lists)
    if "base" in old and "base" in new:
        # An earlier tfsac's sweep lacks the fields added since, which held their defaults.
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
    check_definition(plan, resume)
    lock = RunLock(plan.sweep_dir, SWEEP_DIR)
    lock.hold()  # an existing folder's before Ray: a second driver is one line at once
    todo, search_alg, started = [], None, False
    try:
        state = SweepState(plan.sweep_dir)
        if plan.method != "grid":
            count, search_alg = _search_setup(plan, state)
        else:
            todo = [t for t in plan.trials if not state.done(t)]
            count = len(todo)
        # Ray first: a sweep that cannot start or join it leaves nothing behind.
        started = start_ray(ray_address) if count else False
        os.makedirs(plan.sweep_dir, exist_ok=True)
        lock.hold()  # a new sweep's folder, made now
        write_json(os.path.join(plan.sweep_dir, SWEEP_FILE), plan.definition)
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
        files = write_results(plan.sweep_dir, state.trials)
    finally:
        try:
            if started:
                import ray

                ray.shutdown()
        finally:
            lock.release()  # also where Ray's shutdown raises
    left = [name for name, entry in state.trials.items() if not state.done(entry["spec"])]
    return {"trials": state.trials, "files": files, "unfinished": left, "signal": stop.received}


def _search_setup(plan: Plan, state: SweepState):
    """The search algorithm, told the samples that are done; pending samples of an earlier
    session are tried again first (same values, same run directory)."""
    _, SampleSearch, _ = _tune_classes()
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    samples = sorted(state.trials.values(), key=lambda e: e["spec"]["sample"])
    done = [e for e in samples if state.done(e["spec"])]
    pending = [e["spec"] for e in samples if not state.done(e["spec"])]
    search = SampleSearch(
        plan,
        state,
        pending,
        space={n: d.distribution() for n, d in plan.space.items()},
        metric=plan.metric,
        mode="max",
        seed=plan.seed,
        points_to_evaluate=[spec["params"] for spec in pending] or None,
    )
    for entry in done:
        value = trial_outcome(entry)["best" if plan.objective == "best" else "return"]
        if value is not None and math.isfinite(value):
            search.add_evaluated_point(entry["spec"]["params"], value)
    return len(pending) + max(0, plan.num_samples - len(samples)), search


def _fit(
    plan: Plan, state: SweepState, count: int, todo: List[Dict], search_alg, stop: StopSignals
) -> None:
    """Runs `count` trials on Tune: the grid's `todo` specs, or `count` samples of the
    search algorithm; all end early once `stop` has received a signal."""
    # Runs write their own files, Progress the lines (Tune's reporter prints a table at verbose=0).
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
        tuner = tune.Tuner(
            tune.with_resources(run_trial, {"cpu": plan.cpus_per_trial}),
            param_space={} if search_alg else {"trial": tune.grid_search(todo)},
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
        raise Fault(f"the sweep stopped: {first_line(e)}") from None
