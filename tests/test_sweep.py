"""scripts/sweep.py on a local Ray: a grid whose killed trial is retried, an interrupted
sweep resumed, the same trial in two sweeps, an early-stopped trial, an Optuna search, and
one-line answers to bad input."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from conftest import COUNTING_ENV_ID, REPO_ROOT, env_without_ray, tiny_config

SCRIPT = os.path.join(REPO_ROOT, "scripts", "sweep.py")
TINY = [
    "--env=Pendulum-v1",
    "--total_steps=400",
    "--learning_starts=100",
    "--eval_every=200",
    "--eval_episodes=1",
    "--hidden_sizes=32,32",
    "--batch_size=32",
    "--buffer_size=1000",
    "--checkpoint_every=200",
    "--log_every=200",
    "--jit_compile=false",
]
GRID = [*TINY, "--grid=learning_rate=1e-3,3e-4"]
FIRST, SECOND = "learning_rate=1e-3/seed0", "learning_rate=3e-4/seed0"
# What a sweep prints on stdout when nothing goes wrong.
QUIET_LINE = re.compile(
    r"\[\d+/\d+\] \S+: (return|stopped early).*|results: .*|\d+ of \d+ trials already done in .*"
    r"|no sweep to resume in .*: starting it"
    r"|\S+: started|\S+: eval return -?\d+\.\d at \d+ env steps|sweep: \d+ of \d+ done, .*"
)


def _command(args):
    return [sys.executable, SCRIPT, *args]


def _wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _json(path):
    with open(path) as f:
        return json.load(f)


def _trial(sweep_dir, name):
    return os.path.join(sweep_dir, *name.split("/"))


@pytest.fixture(scope="module")
def grid_sweep(ray_address, tmp_path_factory):
    """A two-trial grid; the second trial's worker is killed after its first checkpoint."""
    sweep_dir = str(tmp_path_factory.mktemp("grid") / "sweep")
    victim = _trial(sweep_dir, SECOND)
    proc = subprocess.Popen(
        _command([*GRID, f"--sweep_dir={sweep_dir}", f"--ray_address={ray_address}"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        index = os.path.join(victim, "checkpoints", "checkpoint")
        _wait_for(lambda: os.path.exists(index), 240, "the trial's first checkpoint")
        assert not os.path.exists(os.path.join(victim, "summary.json")), "finished before the kill"
        pid = _json(os.path.join(victim, "trial.json"))["attempts"][-1]["pid"]
        os.kill(pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return {"dir": sweep_dir, "returncode": proc.returncode, "out": out, "err": err, "pid": pid}


def test_grid_writes_run_directories_and_results(grid_sweep):
    sweep_dir = grid_sweep["dir"]
    assert grid_sweep["returncode"] == 0, grid_sweep["err"][-3000:]
    assert "Traceback" not in grid_sweep["err"]
    assert re.search(rf"\[\d/2\] {re.escape(FIRST)}: return -?\d", grid_sweep["out"])
    assert re.search(rf"\[\d/2\] {re.escape(SECOND)}: return -?\d", grid_sweep["out"])
    for name, rate in ((FIRST, 1e-3), (SECOND, 3e-4)):
        run_dir = _trial(sweep_dir, name)
        config = _json(os.path.join(run_dir, "config.json"))
        assert (config["learning_rate"], config["seed"], config["run_dir"]) == (rate, 0, run_dir)
        summary = _json(os.path.join(run_dir, "summary.json"))
        assert summary["total_steps"] == 400 and len(summary["evaluations"]) == 2
        # Each trial exports into its own run directory.
        assert summary["saved_model_path"] == os.path.join(
            run_dir, "saved_models", "pendulum_v1", "1"
        )
        assert os.path.exists(os.path.join(summary["saved_model_path"], "saved_model.pb"))
        for part in ("progress.csv", "tensorboard", "checkpoints", "train.log"):
            assert os.path.exists(os.path.join(run_dir, part)), part
        with open(os.path.join(os.path.dirname(run_dir), "learning_curves.png"), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    # One CPU per trial: TF's inter-op pool has one thread, not one per core.
    attempt = _json(os.path.join(_trial(sweep_dir, FIRST), "trial.json"))["attempts"][-1]
    assert attempt["threads_by_name"]["tf_Compute"] == 1
    with open(os.path.join(sweep_dir, "results.csv")) as f:
        rows = {r["config"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"learning_rate=1e-3", "learning_rate=3e-4"}
    for tag, row in rows.items():
        summary = _json(os.path.join(sweep_dir, tag, "seed0", "summary.json"))
        assert float(row["return_mean"]) == pytest.approx(summary["eval_return_mean"])
        assert row["return_std"] == "" and row["env_steps"] == "400"  # one seed: no spread
        assert row["best_run_dir"] == os.path.join(sweep_dir, tag, "seed0")
        assert row["status"] == "1 finished"
    with open(os.path.join(sweep_dir, "results.md")) as f:
        table = f.read()
    assert "| --learning_rate=1e-3 | 0 | " in table and "| --learning_rate=3e-4 | 0 | " in table
    assert re.search(r"\| 0 \| -?\d+\.\d \| 400 \|", table), table


def test_a_sweep_says_each_trial_event_as_it_happens(grid_sweep):
    log = open(os.path.join(_trial(grid_sweep["dir"], FIRST), "train.log")).read()
    assert "step 400/400 |" in log and "Sharding callback" not in log  # tfsac's lines only
    lines = grid_sweep["out"].splitlines()
    # Only the first trial surely says its step-200 evaluation: the second may die after that
    # step's checkpoint but before the report reaches the driver, and its retry resumes past it.
    assert any(re.fullmatch(rf"{FIRST}: eval return -?\d+\.\d at 200 env steps", x) for x in lines)
    for name in (FIRST, SECOND):
        assert f"{name}: started" in lines
        assert any(
            re.fullmatch(rf"\[\d/2\] {name}: return .* at 400 env steps, .*", x) for x in lines
        )


def test_the_summary_line_counts_trials_and_names_the_best(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    from tfsac.run.signals import StopSignals
    from tfsac.scale.sweeps import driver
    from tfsac.scale.sweeps.trial import SweepState

    Progress, _, _ = driver._tune_classes()
    progress = Progress(SweepState(str(tmp_path)), total=4, stop=StopSignals())
    trial = SimpleNamespace(config={"trial": {"name": "lr=1e-3/seed0"}}, status="RUNNING")
    progress.on_trial_result(0, [trial], trial, {"eval_return": -150.25, "env_steps": 200})
    progress.on_step(0, [trial])  # within SUMMARY_EVERY_S of the start: nothing
    monkeypatch.setattr(driver, "SUMMARY_EVERY_S", 0.0)
    progress.on_step(1, [trial, SimpleNamespace(status="PENDING")])
    assert capsys.readouterr().out.splitlines() == [
        "lr=1e-3/seed0: eval return -150.2 at 200 env steps",
        "sweep: 0 of 4 done, 1 running, 3 to start; best return -150.2 (lr=1e-3/seed0)",
    ]


def test_killed_trial_completes_after_a_retry(grid_sweep):
    assert grid_sweep["returncode"] == 0, grid_sweep["err"][-3000:]
    run_dir = _trial(grid_sweep["dir"], SECOND)
    attempts = _json(os.path.join(run_dir, "trial.json"))["attempts"]
    assert [a["pid"] for a in attempts][0] == grid_sweep["pid"] and len(attempts) == 2
    assert attempts[1]["pid"] != grid_sweep["pid"]
    summary = _json(os.path.join(run_dir, "summary.json"))
    assert summary["resumed_from"] and "ckpt-" in summary["resumed_from"]
    assert summary["total_steps"] == 400
    # One line saying what happened to which trial and what the sweep does about it.
    (line,) = [line for line in grid_sweep["out"].splitlines() if "retrying" in line]
    assert line.startswith(f"{SECOND}: the trial failed: ") and "died" in line, line
    assert line.endswith("; retrying from its newest checkpoint"), line
    # The other trial ran once.
    assert len(_json(os.path.join(_trial(grid_sweep["dir"], FIRST), "trial.json"))["attempts"]) == 1


@pytest.fixture(scope="module")
def search_sweep(ray_address, tmp_path_factory):
    """A two-sample Optuna search, one trial at a time, started in the background so that it
    runs beside the interrupted sweep (one CPU each). Its trials train with HER on the tests'
    goal env, a module in the sweep's current directory (as a user's own env would be)."""
    sweep_dir = str(tmp_path_factory.mktemp("search") / "sweep")
    args = [
        *TINY,
        "--env=goal_env:PointReach-v0",
        "--her",
        "--search=optuna",
        "--num_samples=2",
        "--space=learning_rate=loguniform:1e-4:1e-3",
        "--max_concurrent=1",
        f"--sweep_dir={sweep_dir}",
        f"--ray_address={ray_address}",
    ]
    yield from _in_background(sweep_dir, args, cwd=os.path.dirname(__file__))


def _in_background(sweep_dir, args, cwd=None):
    proc = subprocess.Popen(
        _command(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd
    )
    yield {"dir": sweep_dir, "args": args, "proc": proc}
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def asha_sweep(ray_address, tmp_path_factory):
    """A grid with early stopping, one trial at a time: the second config (episodes of 200
    steps, not 50) evaluates far below the first at the first rung, so ASHA stops it."""
    sweep_dir = str(tmp_path_factory.mktemp("asha") / "sweep")
    args = [
        *TINY,
        "--total_steps=200",
        "--eval_every=100",
        "--checkpoint_every=100",
        "--log_every=100",
        '--grid=env_kwargs={"max_episode_steps":50},{"max_episode_steps":200}',
        "--early_stopping=asha",
        "--max_concurrent=1",
        f"--sweep_dir={sweep_dir}",
        f"--ray_address={ray_address}",
    ]
    yield from _in_background(sweep_dir, args)


@pytest.fixture(scope="module")
def interrupted_sweep(ray_address, tmp_path_factory, search_sweep, asha_sweep):
    """The same grid, one trial at a time; the driver gets SIGINT (Ctrl-C) once a trial has
    finished (the next one is then starting), then the sweep is rerun with --resume."""
    sweep_dir = str(tmp_path_factory.mktemp("interrupted") / "sweep")
    args = [*GRID, f"--sweep_dir={sweep_dir}", f"--ray_address={ray_address}", "--max_concurrent=1"]
    proc = subprocess.Popen(
        _command(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    summaries = {
        name: os.path.join(_trial(sweep_dir, name), "summary.json") for name in (FIRST, SECOND)
    }
    try:
        _wait_for(lambda: any(map(os.path.exists, summaries.values())), 400, "a finished trial")
        os.kill(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    finished = [name for name, path in summaries.items() if os.path.exists(path)]
    before = {name: os.stat(summaries[name]).st_mtime_ns for name in finished}
    with open(os.path.join(sweep_dir, "results.csv")) as f:
        results = list(csv.DictReader(f))
    resumed = subprocess.run(
        _command([*args, "--resume"]), capture_output=True, text=True, timeout=300
    )
    return {
        "dir": sweep_dir,
        "finished": finished,
        "mtimes": before,
        "resumed": resumed,
        "interrupted": (proc.returncode, out, err, results),
    }


@pytest.mark.slow
def test_ctrl_c_stops_a_sweep_like_a_run_and_its_results_match_the_run_dirs(interrupted_sweep):
    returncode, out, err, results = interrupted_sweep["interrupted"]
    assert returncode == 128 + signal.SIGINT, err[-3000:]
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [
        "stopped: SIGINT: the sweep stopped with 1 of 2 trials done; continue it with --resume"
    ], err
    (left,) = {FIRST, SECOND} - set(interrupted_sweep["finished"])
    row = next(r for r in results if left.startswith(r["config"]))
    assert row["status"] == "1 pending", row  # stopped while it started: no checkpoint yet
    assert "SIGINT: stopping the trials ..." in out


@pytest.mark.slow
def test_interrupted_sweep_resumes_without_rerunning_finished_trials(interrupted_sweep):
    sweep_dir, resumed = interrupted_sweep["dir"], interrupted_sweep["resumed"]
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert len(interrupted_sweep["finished"]) == 1  # stopped with one trial left
    (done,) = interrupted_sweep["finished"]
    run_dir = _trial(sweep_dir, done)
    assert (
        os.stat(os.path.join(run_dir, "summary.json")).st_mtime_ns
        == interrupted_sweep["mtimes"][done]
    )
    assert len(_json(os.path.join(run_dir, "trial.json"))["attempts"]) == 1  # not started again
    (left,) = {FIRST, SECOND} - {done}
    assert _json(os.path.join(_trial(sweep_dir, left), "summary.json"))["total_steps"] == 400
    assert f"1 of 2 trials already done in {sweep_dir}" in resumed.stdout
    with open(os.path.join(sweep_dir, "results.csv")) as f:
        assert len(list(csv.DictReader(f))) == 2
    # Quiet: Ray's and TF's start-up lines stay out of the terminal.
    lines = [line for line in resumed.stdout.splitlines() if line.strip()]
    assert lines and all(QUIET_LINE.fullmatch(line) for line in lines), resumed.stdout
    assert not resumed.stderr.strip(), resumed.stderr


@pytest.mark.slow
def test_same_sweep_twice_gives_identical_returns(grid_sweep, interrupted_sweep):
    compared = 0
    for name in (FIRST, SECOND):
        runs = [_trial(grid_sweep["dir"], name), _trial(interrupted_sweep["dir"], name)]
        records = [_json(os.path.join(r, "trial.json")) for r in runs]
        if any(len(r["attempts"]) > 1 for r in records):
            continue  # a resumed run starts new episodes: not the same run
        summaries = [_json(os.path.join(r, "summary.json")) for r in runs]
        if any(s["resumed_from"] for s in summaries):
            continue
        numbers = [  # their wall-clock times differ
            [(e["step"], e["return_mean"], e["return_std"]) for e in s["evaluations"]]
            for s in summaries
        ]
        assert numbers[0] == numbers[1]
        compared += 1
    assert compared >= 1


@pytest.mark.slow
def test_optuna_search_with_two_samples(search_sweep):
    sweep_dir, args, proc = search_sweep["dir"], search_sweep["args"], search_sweep["proc"]
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    lines = [line for line in out.splitlines() if line.strip()]
    # Per trial: started, its evaluation at 200, finished; then the two results files.
    assert len(lines) == 8 and all(QUIET_LINE.fullmatch(line) for line in lines), out
    assert not err.strip(), err
    trials = _json(os.path.join(sweep_dir, "trials.json"))
    assert sorted(e["spec"]["sample"] for e in trials.values()) == [0, 1]
    rates = []
    for entry in trials.values():
        run_dir = entry["spec"]["run_dir"]
        config = _json(os.path.join(run_dir, "config.json"))
        assert 1e-4 <= config["learning_rate"] <= 1e-3 and config["her"]
        assert entry["spec"]["tag"].endswith(f"learning_rate={config['learning_rate']:.4g}")
        rates.append(config["learning_rate"])
        assert entry["status"] in ("finished", "stopped")
        assert os.path.exists(os.path.join(run_dir, "checkpoints", "checkpoint"))
        # An early-stopped trial keeps its checkpoint and evaluations, and has no summary.
        finished = os.path.exists(os.path.join(run_dir, "summary.json"))
        assert finished == (entry["status"] == "finished")
        evaluations = _json(os.path.join(run_dir, "trial.json"))["evaluations"]
        assert evaluations and all(0 <= e["success_rate"] <= 1 for e in evaluations)
    assert rates[0] != rates[1]
    with open(os.path.join(sweep_dir, "results.csv")) as f:
        rows = list(csv.DictReader(f))
    returns = [float(r["return_mean"]) for r in rows]
    assert all(0 <= float(r["success_rate"]) <= 1 for r in rows)  # a goal env's
    assert len(returns) == 2 and returns == sorted(returns, reverse=True)  # best first
    # A resume of the finished search samples nothing new and starts no trial.
    again = subprocess.run(
        _command([*args, "--resume"]),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=os.path.dirname(__file__),
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert "2 of 2 trials already done" in again.stdout
    assert _json(os.path.join(sweep_dir, "trials.json")).keys() == trials.keys()


@pytest.mark.slow
def test_early_stopped_trial_stops_cleanly_and_keeps_its_checkpoint(asha_sweep):
    proc = asha_sweep["proc"]
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert not err.strip(), err
    kept, stopped = "env_kwargs=max_episode_steps-50", "env_kwargs=max_episode_steps-200"
    assert re.search(rf"\[1/2\] {kept}/seed0: return -?\d+\.\d at 200 env steps", out), out
    assert re.search(rf"\[2/2\] {stopped}/seed0: stopped early, return .* at 100 env", out), out
    run_dir = os.path.join(asha_sweep["dir"], stopped, "seed0")
    assert not os.path.exists(os.path.join(run_dir, "summary.json"))
    assert os.path.exists(os.path.join(run_dir, "checkpoints", "ckpt-100.index"))
    assert [e["step"] for e in _json(os.path.join(run_dir, "trial.json"))["evaluations"]] == [100]
    with open(os.path.join(run_dir, "train.log")) as f:
        assert "Traceback" not in f.read()
    with open(os.path.join(asha_sweep["dir"], "results.csv")) as f:
        rows = {r["config"]: r for r in csv.DictReader(f)}
    assert rows[stopped]["status"] == "1 stopped" and rows[kept]["status"] == "1 finished"
    assert float(rows[stopped]["env_steps"]) == 100


def test_on_evaluation_can_stop_a_run_that_keeps_its_checkpoint(tmp_path, counter_env_id):
    from tfsac import train

    class Stop(Exception):
        pass

    seen = []

    def stop_at_first(evaluation):
        seen.append(evaluation["step"])
        raise Stop

    config = tiny_config(tmp_path, counter_env_id, eval_every=20, checkpoint_every=20)
    with pytest.raises(Stop):
        train(config, export=False, on_evaluation=stop_at_first)
    assert seen == [20]
    assert os.path.exists(tmp_path / "run" / "checkpoints" / "ckpt-20.index")
    assert not os.path.exists(tmp_path / "run" / "summary.json")
    result = train(config, export=False, resume=True, on_evaluation=seen.append)
    assert [e["step"] for e in seen[1:]] == [40] and result.summary["resumed_from"]


def test_without_ray_a_sweep_says_which_extra_to_install(tmp_path):
    env = env_without_ray(tmp_path)
    proc = subprocess.run(
        _command(["--grid=learning_rate=1e-3,3e-4", "--sweep_dir=sweep"]),
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == 'error: sweeps need Ray: pip install -e ".[ray]"'
    assert not os.path.exists(tmp_path / "sweep")


def test_a_sweep_of_an_earlier_tfsac_resumes_with_the_fields_added_since(tmp_path):
    """A sweep.json whose base config lacks fields added to SACConfig later (with their
    defaults) is the same sweep; a lacking field set to another value is not."""
    from tfsac.config import SACConfig
    from tfsac.errors import TfsacError
    from tfsac.scale.sweeps.driver import check_definition as _check_definition
    from tfsac.scale.sweeps.plan import Plan
    from tfsac.scale.sweeps.trial import SWEEP_FILE

    base = json.loads(json.dumps(SACConfig(total_steps=400).to_dict()))
    for reserved in ("seed", "run_dir", "export_dir"):  # not in a sweep's base config
        del base[reserved]
    definition = {"method": "grid", "base": base, "grid": {}, "seeds": [0]}
    older = dict(definition, base={k: v for k, v in base.items() if k != "num_actors"})
    with open(tmp_path / SWEEP_FILE, "w") as f:
        json.dump(older, f)
    _check_definition(Plan(str(tmp_path), "grid", definition), resume=True)
    changed = dict(definition, base=dict(base, num_actors=2))
    with pytest.raises(TfsacError, match=r"different: base config \(num_actors\)"):
        _check_definition(Plan(str(tmp_path), "grid", changed), resume=True)


def test_a_folder_with_files_but_no_sweep_is_refused_before_anything_is_written(tmp_path, capsys):
    """A tester's sweep into a folder of other results overwrote its results.md (and into
    a finished run's folder rewrote its run.lock): a folder without sweep.json must be new,
    empty, or hold only the run.lock of a start killed before sweep.json was written."""
    from tfsac.errors import TfsacError
    from tfsac.scale.sweeps.driver import check_definition as _check_definition
    from tfsac.scale.sweeps.plan import Plan

    definition = {"method": "grid", "base": {}, "grid": {}, "seeds": [0]}
    for resume in (False, True):
        _check_definition(Plan(str(tmp_path / "new"), "grid", definition), resume)
    assert capsys.readouterr().out == f"no sweep to resume in {tmp_path / 'new'}: starting it\n"
    for leftover in ("run.lock", "sweep.json.tmp", ".nfs0001", ".gitkeep"):  # a killed start's
        (tmp_path / leftover).write_text("")
    _check_definition(Plan(str(tmp_path), "grid", definition), resume=False)
    (tmp_path / "results.md").write_text("a user's table")
    for resume in (False, True):
        with pytest.raises(TfsacError, match=r"holds files but no sweep .*results\.md"):
            _check_definition(Plan(str(tmp_path), "grid", definition), resume)
    assert (tmp_path / "results.md").read_text() == "a user's table"


def test_results_of_a_half_done_sweep_count_only_done_trials(tmp_path):
    """A config whose seeds are finished, stopped early, under way and not started: the
    return's mean +- std is over the first two; the others show their progress as status
    (the newest checkpoint's env steps, where a --resume continues them)."""
    from tfsac.scale.sweeps.results import summarize, write_results

    def evaluations(*pairs):
        return [{"step": s, "return_mean": r} for s, r in pairs]

    trials = {}
    for seed, status in enumerate(("finished", "stopped", "pending", "pending")):
        run_dir = tmp_path / "base" / f"seed{seed}"
        run_dir.mkdir(parents=True)
        trials[f"base/seed{seed}"] = {
            "spec": {"tag": "base", "overrides": {}, "seed": seed, "run_dir": str(run_dir)},
            "status": status,
            "wall_time_s": 30.0 if status == "stopped" else None,
        }
        if status == "finished":
            (run_dir / "config.json").write_text(json.dumps({"total_steps": 200}))
            (run_dir / "summary.json").write_text(
                json.dumps(
                    {
                        "total_steps": 200,
                        "wall_time_s": 50.0,
                        "evaluations": evaluations((100, -300.0), (200, -100.0)),
                    }
                )
            )
        elif seed == 1 or seed == 2:  # stopped early at 100; under way at 100 (and ahead)
            (run_dir / "trial.json").write_text(
                json.dumps({"evaluations": evaluations((100, -200.0 if seed == 1 else 900.0))})
            )
        if seed == 2:  # ... with a checkpoint at 150, where a --resume continues it
            (run_dir / "checkpoints").mkdir()
            (run_dir / "checkpoints" / "ckpt-150.index").write_text("")
    (row,) = summarize(trials)
    assert row["return_mean"] == pytest.approx(-150.0)  # -100 and -200; not the 900 under way
    assert row["return_std"] == pytest.approx(50.0)
    assert row["env_steps"] == pytest.approx(150.0) and row["wall_time_s"] == pytest.approx(40.0)
    assert row["status"] == "1 finished, 2 pending (at 150, 0 env steps), 1 stopped"
    assert row["best_run_dir"] == str(tmp_path / "base" / "seed0")
    write_results(str(tmp_path), trials)
    table = (tmp_path / "results.md").read_text()
    assert "| base | 0 1 2 3 | -150.0 ± 50.0 | 150 | 40 | 1 finished, 2 pending" in table
    # On a goal env the done trials' final success rates are averaged into their column.
    summary = json.loads((tmp_path / "base" / "seed0" / "summary.json").read_text())
    summary["evaluations"][-1]["success_rate"] = 0.9
    (tmp_path / "base" / "seed0" / "summary.json").write_text(json.dumps(summary))
    (row,) = summarize(trials)
    assert row["success_rate"] == pytest.approx(0.9)
    write_results(str(tmp_path), trials)
    table = (tmp_path / "results.md").read_text()
    assert "| final eval return (mean ± std) | final success rate | env steps |" in table
    assert "| base | 0 1 2 3 | -150.0 ± 50.0 | 0.90 | 150 | 40 | 1 finished" in table


@pytest.mark.slow
def test_trials_import_an_algorithm_of_the_users_module_from_the_drivers_folder(
    tmp_path, ray_address
):
    """Trials run in Ray's workers, in folders of their own: Ray adds the driver's current
    folder to their sys.path, where the module (docs/guide/adding-an-algorithm.md's) is found."""
    from conftest import docs_example

    page = os.path.join(REPO_ROOT, "docs", "guide", "adding-an-algorithm.md")
    code = docs_example(page, "my_algos.py")
    (tmp_path / "my_algos.py").write_text(code)
    args = [*TINY, "--total_steps=200", "--eval_every=200", "--algorithm=my_algos:mean_q"]
    args += ["--grid=learning_rate=1e-3", "--sweep_dir=sweep", f"--ray_address={ray_address}"]
    done = subprocess.run(_command(args), capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    run_dir = tmp_path / "sweep" / "learning_rate=1e-3" / "seed0"
    assert _json(run_dir / "config.json")["algorithm"] == "my_algos:mean_q"
    assert _json(run_dir / "summary.json")["total_steps"] == 200


def test_results_md_keeps_a_bar_in_a_config_inside_its_cell():
    """A tester's: a grid value holding '|' split results.md's row into more cells."""
    from tfsac.scale.sweeps.results import _markdown

    row = dict(
        overrides='--algorithm_kwargs={"tag": "a|b"}',
        seeds="0",
        return_mean=1.0,
        return_std=None,
        best_run_dir=None,
        curves=None,
        success_rate=None,
        env_steps=10,
        wall_time_s=1,
        status="done",
    )
    line = _markdown([row], "/tmp", None).splitlines()[-1]
    assert line.startswith('| --algorithm_kwargs={"tag": "a\\|b"} | 0 |')
    assert line.replace("\\|", "").count("|") == 9  # eight cells


def test_a_sweep_varies_the_keys_of_a_json_option_one_by_one():
    """algorithm_kwargs.beta=1,2 (an offline-RL tester wrote the whole JSON per value): each
    value is merged into the option's object as the command line or a plain override gave
    it; a value is JSON, else text."""
    from tfsac.scale.sweeps.plan import keyed_overrides

    given = {"algorithm_kwargs": '{"a": 1}', "env_kwargs": "{}"}
    overrides = {"learning_rate": "1e-3", "algorithm_kwargs.beta": "2", "env_kwargs.mode": "fast"}
    plain, keyed = keyed_overrides(overrides, given.get)
    assert plain == {"learning_rate": "1e-3"}
    assert {k: json.loads(v) for k, v in keyed.items()} == {
        "algorithm_kwargs": {"a": 1, "beta": 2},
        "env_kwargs": {"mode": "fast"},
    }
    overrides = {"algorithm_kwargs": '{"a": 3}', "algorithm_kwargs.b": "[1, 2]"}
    plain, keyed = keyed_overrides(overrides, given.get)  # the grid's object, then its key
    assert json.loads(keyed["algorithm_kwargs"]) == {"a": 3, "b": [1, 2]}


@pytest.mark.slow
def test_a_sweep_trial_constructs_each_env_once(tmp_path, counting_env, ray_address):
    """Its training copy and evaluation env (conftest's counting_env), in the trial's
    worker, which finds countenv in the driver's folder (Ray puts it on its path); the
    driver checks each env of the sweep once, before any trial starts."""
    args = [*TINY, "--total_steps=200", f"--env={COUNTING_ENV_ID}", "--grid=learning_rate=1e-3"]
    args += ["--sweep_dir=sweep", f"--ray_address={ray_address}"]
    driver = subprocess.Popen(_command(args), stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    _, stderr = driver.communicate(timeout=300)
    assert driver.returncode == 0, stderr[-3000:]
    pids = counting_env()
    trial = [pid for pid in pids if pid != driver.pid]
    assert (len(pids) - len(trial), len(trial), len(set(trial))) == (1, 2, 1)
