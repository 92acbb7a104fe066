"""scripts/benchmark_report.py on made-up runs: the table's numbers and one figure per env."""

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT, script_module

SCRIPT = os.path.join(REPO_ROOT, "scripts", "benchmark_report.py")


def _tfsac_run(path, seed, returns, steps_per_s, finished=True, minutes=None, **config):
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({"env_id": "Hopper-v5", "seed": seed, **config}, f)
    if finished:
        evaluations = [{"step": 10 * (i + 1), "return_mean": r} for i, r in enumerate(returns)]
        for evaluation, m in zip(evaluations, minutes or [], strict=False):
            evaluation["wall_time_s"] = 60.0 * m
        summary = {
            "env": "Hopper-v5",
            "seed": seed,
            "eval_return_mean": returns[-1],
            "env_steps_per_s": steps_per_s,
            "evaluations": evaluations,
        }
        with open(os.path.join(path, "summary.json"), "w") as f:
            json.dump(summary, f)


def _peer_run(path, seed, returns, steps_per_s, **extra):
    line = {
        **extra,
        "lib": "sbx",
        "env": "Hopper-v5",
        "seed": seed,
        "eval_return_mean": returns[-1],
        "env_steps_per_s": steps_per_s,
        "curve": [[10 * (i + 1), r] for i, r in enumerate(returns)],
    }
    with open(path, "w") as f:
        f.write(json.dumps(line) + "\n")


def test_report_tables_mean_and_std_over_seeds_and_draws_each_env(tmp_path):
    _tfsac_run(tmp_path / "sweep" / "base" / "seed0", 0, [1.0, 100.0], 50.0)
    _tfsac_run(tmp_path / "sweep" / "base" / "seed1", 1, [3.0, 300.0], 70.0)
    _tfsac_run(tmp_path / "sweep" / "base" / "seed2", 2, [0.0], 0.0, finished=False)
    tqc = tmp_path / "sweep" / "tqc"
    _tfsac_run(tqc / "seed0", 0, [10.0, 500.0, 900.0], 50.0, algorithm="tqc")
    _tfsac_run(tqc / "seed1", 1, [600.0, 700.0, 800.0], 50.0, algorithm="tqc")
    os.makedirs(tmp_path / "sbx")
    _peer_run(tmp_path / "sbx" / "a.json", 0, [2.0, 200.0], 40.0)
    _peer_run(tmp_path / "sbx" / "b.json", 1, [2.0, 400.0], 60.0)
    _peer_run(tmp_path / "sbx" / "c.json", 0, [100.0, 200.0, 650.0], 40.0, algo="tqc")
    (tmp_path / "sbx" / "d.json").write_text("")  # learn.py writes its line when it ends
    out = tmp_path / "out"
    proc = subprocess.run(
        [
            sys.executable,
            SCRIPT,
            f"--runs={tmp_path / 'sweep' / '*' / 'seed*'}",
            f"--peer_results={tmp_path / 'sbx' / '*.json'}",
            f"--out_dir={out}",
            "--reach=Hopper-v5=250",
            # Hopper's own rate wins over the label's.
            "--idle_rates=tfsac tqc=1,sbx tqc=9,Hopper-v5:sbx tqc=0.5,Ant-v5:tfsac tqc=7",
            f"--curve_data={tmp_path / 'data'}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # Steps to 250: tfsac's seed 1 at its 2nd evaluation (20 steps), seed 0 never; SBX's
    # seed 1 at 20. TQC: seed 0 at its 2nd (20), seed 1 at its 1st (10): mean 15, which is
    # 0.25 minutes at 1 step/s; SBX's TQC at 30 steps, 1 minute at 0.5 steps/s.
    # The rates column: each library's runs' own rate / its idle rate (where given).
    rows = [
        "| Hopper-v5 | sbx | 0,1 | 300 ± 100 | 50 / - | 250 | 20 (1/2) | - |",
        "| Hopper-v5 | tfsac | 0,1 | 200 ± 100 | 60 / - | 250 | 20 (1/2) | - |",
        "| Hopper-v5 | tfsac tqc | 0,1 | 850 ± 50 | 50 / 1 | 250 | 15 (2/2) | 0.2 |",
        "| Hopper-v5 | sbx tqc | 0 | 650 ± 0 | 40 / 0.5 | 250 | 30 (1/1) | 1.0 |",
    ]
    for row in rows:
        assert row in proc.stdout
    assert "skipped (not finished): " + str(tmp_path / "sweep" / "base" / "seed2") in proc.stderr
    assert "skipped (not finished): " + str(tmp_path / "sbx" / "d.json") in proc.stderr
    assert (out / "hopper_v5.png").stat().st_size > 0
    assert (out / "results.md").read_text().strip().splitlines()[2:] == (
        proc.stdout.strip().splitlines()[2:]
    )
    # The curve files alone (what docs/benchmarks/data keeps) give the same table.
    names = sorted(p.name for p in (tmp_path / "data").iterdir())
    assert names == [
        "hopper_v5-sbx-sac-seed0.csv",
        "hopper_v5-sbx-sac-seed1.csv",
        "hopper_v5-sbx-tqc-seed0.csv",
        "hopper_v5-tfsac-sac-seed0.csv",
        "hopper_v5-tfsac-sac-seed1.csv",
        "hopper_v5-tfsac-tqc-seed0.csv",
        "hopper_v5-tfsac-tqc-seed1.csv",
    ]
    again = subprocess.run(
        [
            sys.executable,
            SCRIPT,
            f"--curves={tmp_path / 'data' / '*.csv'}",
            f"--out_dir={tmp_path / 'again'}",
            "--reach=250",
            "--idle_rates=tfsac tqc=1,sbx tqc=0.5",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert again.stdout == proc.stdout


def test_offline_arms_are_rows_with_returns_and_minutes_at_given_steps(tmp_path):
    data = {"offline_data": "datasets/hopper/medium-v0"}
    arms = {
        "rlpd": dict(offline_ratio=0.5, **data),
        "preload": dict(offline_ratio=None, **data),  # 'size', as config.json holds it
        "scratch": {},
    }
    for i, (arm, config) in enumerate(arms.items()):
        for seed in (0, 1):
            returns = [100.0 * (i + 1) * (seed + 1), 200.0 * (i + 1) + seed]
            minutes = [2.0 + seed, 5.0 + seed]
            _tfsac_run(
                tmp_path / arm / f"seed{seed}", seed, returns, 4.0, minutes=minutes, **config
            )
    _tfsac_run(tmp_path / "scratch" / "seed2", 2, [50.0], 4.0, minutes=[1.0])  # one eval only
    common = [sys.executable, SCRIPT, "--at_steps=10,20,30", f"--out_dir={tmp_path / 'out'}"]
    run = [*common, f"--runs={tmp_path / '*' / 'seed*'}", f"--curve_data={tmp_path / 'data'}"]
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # RLPD's seeds: 100 and 200 at step 10 (2 and 3 minutes), 200 and 201 at 20 (5, 6).
    rows = [
        "| Hopper-v5 | tfsac data-0.5 | 0,1 | 200 ± 0 | 4 | 150 ± 50 (2/2), 2 min |"
        " 200 ± 0 (2/2), 6 min | - |",
        "| Hopper-v5 | tfsac data-size | 0,1 | 400 ± 0 | 4 | 300 ± 100 (2/2), 2 min |"
        " 400 ± 0 (2/2), 6 min | - |",
        # From scratch: 300, 600 and 50 at step 10 (2, 3 and 1 min); seed 2 has no step 20:
        # its final, at step 10, is in the mean with the others' at 20 (said in the cell).
        "| Hopper-v5 | tfsac | 0,1,2 | 417 ± 260 (at 10, 20 env steps) | 4 |"
        " 317 ± 225 (3/3), 2 min | 600 ± 0 (2/3), 6 min | - |",
    ]
    for row in rows:
        assert row in proc.stdout
    assert "return at 10 | return at 20 | return at 30 |" in proc.stdout.splitlines()[0]
    names = sorted(p.name for p in (tmp_path / "data").iterdir())
    assert "hopper_v5-tfsac-data-0.5-seed0.csv" in names
    assert "env_step,return_mean,wall_time_s" in (tmp_path / "data" / names[0]).read_text()
    # The curve files, wall times included, give the same table.
    again = [*common, f"--curves={tmp_path / 'data' / '*.csv'}"]
    assert subprocess.run(again, capture_output=True, text=True, timeout=120).stdout == proc.stdout
    # The same runs again replace their files; another run's file of the same name is kept
    # (the RLPD table's scratch arm replaced the five-task table's Hopper SAC curve).
    assert subprocess.run(run, capture_output=True, text=True, timeout=120).returncode == 0
    other = tmp_path / "data" / "hopper_v5-tfsac-sac-seed2.csv"
    kept = other.read_text().replace("10,50.00", "10000,24.86")
    other.write_text(kept)
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "holds another run's curve" in proc.stderr.splitlines()[-1]
    assert other.read_text() == kept


def test_wall_clock_under_a_minute_is_said_in_seconds(monkeypatch):
    report = script_module("benchmark_report", monkeypatch)
    runs = [{"steps": [10], "returns": [5.0], "minutes": [m]} for m in (0.2, 0.3)]
    assert report.at_step_cell(runs, 10) == "5 ± 0 (2/2), 15 s"
    runs[0]["minutes"], runs[1]["minutes"] = [3.0], [4.0]
    assert report.at_step_cell(runs, 10) == "5 ± 0 (2/2), 4 min"


def test_file_names_of_any_env_id_stay_in_the_output_folder(monkeypatch):
    report = script_module("benchmark_report", monkeypatch)
    names = {
        ("Hopper-v5", "tfsac crossq"): "hopper_v5-tfsac-crossq-seed0.csv",
        ("ALE/Pong-v5", "tfsac"): "ale_pong_v5-tfsac-sac-seed0.csv",
        (
            "gymnasium_robotics:FetchReach-v4",
            "sbx",
        ): "gymnasium_robotics_fetchreach_v4-sbx-sac-seed0.csv",
        ("../../x", "tfsac"): "_x-tfsac-sac-seed0.csv",
        ("Hopper-v5", "tfsac my_algos:mean_q"): "hopper_v5-tfsac-my_algos_mean_q-seed0.csv",
        ("Hopper-v5", "tfsac a/../b"): "hopper_v5-tfsac-a_.._b-seed0.csv",
    }
    for (env, lib), name in names.items():
        assert report.curve_file_name(env, lib, 0) == name
    # Runs that differ in the algorithm's own hyperparameters are rows (and files) apart.
    kwargs = {"min_weight": 0.25, "tag": "a b", "sizes": [1, 2]}
    lib = report.label("tfsac", "my_algos:mean_q", "mlp", None, kwargs)
    assert lib == "tfsac my_algos:mean_q min_weight=0.25 sizes=[1,2] tag=a_b"
    assert report.curve_file_name("Hopper-v5", lib, 0) == (
        "hopper_v5-tfsac-my_algos_mean_q-min_weight=0.25-sizes=_1,2_-tag=a_b-seed0.csv"
    )
    # A saved config holds the network its algorithm resolved: each algorithm's own is no label.
    assert report.label("tfsac", "sac", "mlp") == "tfsac"
    assert report.label("tfsac", "flashsac", "flashsac") == "tfsac flashsac"
    assert report.label("tfsac", "sac", "simba") == "tfsac simba"


def test_bad_inputs_are_one_line_and_nothing_is_written(tmp_path):
    """Damaged files, nonsense values, unwritable folders and rows that would mix
    configurations or repeat a seed: one error line, exit 2, no curve files or report."""
    runs = tmp_path / "runs"
    _tfsac_run(runs / "a" / "seed0", 0, [1.0, 100.0], 50.0)
    _tfsac_run(runs / "b" / "seed0", 0, [1.0, 100.0], 50.0)  # the same seed again
    _tfsac_run(runs / "lr" / "seed1", 1, [1.0, 100.0], 50.0, learning_rate=1e-3)
    _tfsac_run(runs / "lr0" / "seed0", 0, [1.0, 100.0], 50.0, learning_rate=1e-3)
    _tfsac_run(runs / "bad" / "seed0", 0, [1.0], 50.0)
    (runs / "bad" / "seed0" / "summary.json").write_text("{not json")
    (tmp_path / "curve.csv").write_text("# env\n10,5\n")
    (tmp_path / "file").write_text("")
    cases = [
        ([f"--runs={runs}/[ab]/seed*"], "tfsac on Hopper-v5: seed 0 more than once"),
        ([f"--runs={runs}/[al]*/seed*"], "the runs differ in learning_rate; a row averages"),
        # Two configurations' seed 0: the setting that differs is named, not the seed.
        ([f"--runs={runs}/[al]*/seed0"], "the runs differ in learning_rate; a row averages"),
        ([f"--runs={runs}/bad/seed*"], "cannot read"),
        ([f"--runs={runs}/a/seed*", "--at_steps=inf"], "distinct positive whole env steps"),
        ([f"--runs={runs}/a/seed*", "--at_steps=10,10"], "distinct positive whole env steps"),
        ([f"--runs={runs}/a/seed*", "--reach=nan"], "--reach takes finite returns"),
        ([f"--runs={runs}/a/seed*", "--idle_rates=tfsac=-1"], "must be positive env steps/s"),
        ([f"--runs={runs}/a/seed*", f"--out_dir={tmp_path / 'file'}"], "cannot write"),
        ([f"--runs={runs}/a/seed*", "--out_dir="], "--out_dir is required"),
        ([f"--curves={tmp_path / 'curve.csv'}"], "is not a curve file of --curve_data"),
        ([f"--peer_results={runs}"], "cannot read"),
        (
            [f"--runs={runs}/a/seed*", "--idle_rates=tfsc=100"],
            "names 'tfsc', which is no row's label",
        ),
    ]
    for args, message in cases:
        out, data = tmp_path / "out", tmp_path / "data"
        proc = subprocess.run(
            [sys.executable, SCRIPT, *args, f"--curve_data={data}"]
            + ([] if any(a.startswith("--out_dir") for a in args) else [f"--out_dir={out}"]),
            capture_output=True,
            text=True,
            timeout=120,
        )
        lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert len(lines) == 1 and message in lines[0], (args, proc.stderr)
        assert not data.exists() and not out.exists(), args


def _report(*args):
    return subprocess.run(
        [sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_curve_files_are_all_checked_before_any_is_written(tmp_path):
    """A tester's --curve_data folder held another run's seed-1 curve: the refusal came
    after seed 0's file was written, and a later --curves report averaged the two runs."""
    _tfsac_run(tmp_path / "runs" / "seed0", 0, [1.0, 100.0], 50.0)
    _tfsac_run(tmp_path / "runs" / "seed1", 1, [3.0, 300.0], 50.0)
    data = tmp_path / "data"
    data.mkdir()
    theirs = data / "hopper_v5-tfsac-sac-seed1.csv"
    theirs.write_text("# env: Hopper-v5\nenv_step,return_mean\n10,-5.00\n")
    proc = _report(
        f"--runs={tmp_path}/runs/seed*", f"--out_dir={tmp_path}/out", f"--curve_data={data}"
    )
    assert proc.returncode == 2 and "holds another run's curve" in proc.stderr, proc.stderr
    assert os.listdir(data) == [theirs.name] and "-5.00" in theirs.read_text()


def test_seeds_that_end_at_different_steps_are_said_so(tmp_path):
    """A row whose seeds' final evaluations are at different env steps says where (its mean
    mixes them), and its figure draws each seed's line, as scripts/plot.py does."""
    _tfsac_run(tmp_path / "runs" / "seed0", 0, [1.0, 100.0], 50.0)
    _tfsac_run(tmp_path / "runs" / "seed1", 1, [3.0, 300.0, 500.0], 50.0)
    (tmp_path / "other").mkdir()
    proc = _report(
        f"--runs={tmp_path}/*/seed*", f"--out_dir={tmp_path}/out", "--reach=Pendulum-v1=0"
    )
    assert proc.returncode == 0, proc.stderr
    assert "| Hopper-v5 | tfsac | 0,1 | 300 ± 200 (at 20, 30 env steps) | 50 |" in proc.stdout
    assert "evaluated different env steps (ending at 20, 30); one line each" in proc.stderr
    assert "--reach: no runs of Pendulum-v1 here (envs: Hopper-v5)" in proc.stderr
    proc = _report(f"--runs={tmp_path}/*", f"--out_dir={tmp_path}/out2")  # no run dirs
    assert proc.returncode == 2
    assert f"skipped (not a run directory): {tmp_path / 'other'}" in proc.stderr


def test_idle_rates_name_labels_with_colons_and_equals_and_curve_names_do_not_collide(tmp_path):
    """A reviewer's: a module's algorithm ('tfsac my_algos:mean_q') or its hyperparameters
    ('tfsac mean_q min_weight=0.5') could not be given a rate; two labels that make one
    curve file name wrote one file for two runs."""
    runs = tmp_path / "runs"
    _tfsac_run(runs / "m" / "seed0", 0, [1.0, 100.0], 50.0, algorithm="my_algos:mean_q")
    kwargs = {"algorithm": "mean_q", "algorithm_kwargs": {"min_weight": 0.5}}
    _tfsac_run(runs / "k" / "seed0", 0, [2.0, 200.0], 50.0, **kwargs)
    rates = "--idle_rates=tfsac my_algos:mean_q=10,Hopper-v5:tfsac mean_q min_weight=0.5=20"
    proc = _report(f"--runs={runs}/*/seed*", f"--out_dir={tmp_path}/out", "--reach=0", rates)
    assert proc.returncode == 0, proc.stderr
    assert "| Hopper-v5 | tfsac my_algos:mean_q | 0 | 100 ± 0 | 50 / 10 |" in proc.stdout
    assert "| Hopper-v5 | tfsac mean_q min_weight=0.5 | 0 | 200 ± 0 | 50 / 20 |" in proc.stdout
    for typo in ("tfsac my_algos:mean_qq=10", "Hopper-v5:tfsac my_algos:mean_qq=10"):
        proc = _report(f"--runs={runs}/*/seed*", f"--out_dir={tmp_path}/o", f"--idle_rates={typo}")
        assert proc.returncode == 2 and "which is no row's label" in proc.stderr, typo
    _tfsac_run(runs / "n" / "seed0", 0, [3.0, 300.0], 50.0, algorithm="my_algos_mean_q")
    data = tmp_path / "data"
    proc = _report(
        f"--runs={runs}/[mn]/seed*", f"--out_dir={tmp_path}/out2", f"--curve_data={data}"
    )
    assert proc.returncode == 2 and "two runs' curves would both be" in proc.stderr
    assert not data.exists()
