"""Mistakes a user makes with the scripts, in one table: each gets one `error:` line on
stderr, a non-zero exit, no traceback, and writes nothing.

Each case runs as a process of its own, forked from a server that has made the imports
every script makes first (tests/forked_scripts.py); one case of each script is also run as
a new process, which must say the same. The cases run once per session, four at a time;
each case is its own test."""

import concurrent.futures
import json
import os
import queue
import shutil
import sys

import pytest
from conftest import REPO_ROOT, run_script
from forked_scripts import ForkedScripts

from tfsac.errors import TfsacError

SCRIPTS = os.path.join(REPO_ROOT, "scripts")
PRESET = os.path.join(SCRIPTS, "presets", "halfcheetah_v5.flags")

# (script, arguments, a piece of the one error line). Each runs in a folder of its own that
# holds `blocker` (a file where a folder is expected) and `oldrun/config.json` (a run's).
CASES = [
    # train.py
    ("train", ["--env=NoSuchEnv-v0"], "NoSuchEnv-v0"),
    ("train", ["--env=CartPole-v1"], "continuous actions"),
    ("train", ["--batch_size=0"], "batch_size"),
    ("train", ["--buffer_size=-5"], "buffer_size"),
    ("train", ["--total_steps=100", "--learning_starts=500"], "learning_starts"),
    ("train", ["--total_steps=abc"], "total_steps"),
    ("train", ["--alpha=often"], "alpha must be a float, 'auto' or 'auto_<float>'"),
    ("train", ["--total_steps=1.5"], "'1.5' is not a whole number"),
    ("train", ["--num_critics=abc"], "--num_critics=abc: 'abc' is not a whole number"),
    ("train", ["--alpha=auto_-1"], "alpha auto_<x> starts at x: positive and finite, got -1"),
    ("train", ["--alpha=auto_0.1", "--initial_alpha=0.5"], "both set the learned alpha's start"),
    ("train", ["--lr_schedule=piecewise:100:inf"], "positive finite factors"),
    ("train", ["--lr_schedule=piecewise:100:0.5,100:0.2"], "gives step 100 two factors"),
    ("train", ['--algorithm_kwargs={"beta": 1}'], "algorithm sac has no hyperparameter 'beta'"),
    (
        "train",
        ["--algorithm=tqc", '--algorithm_kwargs={"n_quantiles": 9}'],
        "no hyperparameter 'n_quantiles' (its hyperparameters: none); n_quantiles is an option",
    ),
    ("train", ["--flagfile=missing.flags"], "cannot read the --flagfile"),
    ("train", ["--env_id=Pendulum-v1"], "unknown flag --env_id: the env_id option is --env"),
    ("train", ["--start_steps=1000"], "--start_steps (Spinning Up's name): in tfsac --learning"),
    # An SB3 user's (a tester's: absl guessed by spelling, e.g. --tensorboard_log: tensorboard)
    ("train", ["--env=FetchReach-v4"], "--env=gymnasium_robotics:FetchReach-v4, with pip"),
    ("train", ["--ent_coef=auto_0.1"], "--ent_coef (Stable-Baselines3's name): in tfsac --alpha"),
    ("train", ["--net_arch=64,64"], "--net_arch (Stable-Baselines3's name): in tfsac --hidden"),
    ("train", ["--n_sampled_goal=4"], "in tfsac --her_goals_per_transition (with --her)"),
    ("train", ["--max_ep_len=100"], "in tfsac --env_kwargs='{\"max_episode_steps\": N}'"),
    ("train", ["--hidden_sizes=64,x"], "hidden_sizes"),
    ("train", ["--gamma=1.5"], "gamma must be in [0, 1]"),
    ("train", ["--seed=-3"], "seed must be in [0, 2**32 - 1], got -3"),
    ("train", ["--tau=0"], "tau must be in (0, 1]"),
    # Options the chosen algorithm does not read, and options of nothing that runs.
    ("train", ["--n_quantiles=50"], "algorithm sac does not read n_quantiles"),
    ("train", ["--algorithm=crossq", "--tau=0.01"], "algorithm crossq does not read tau"),
    ("train", ["--algorithm=sac_v1", "--renorm_warmup_steps=5"], "sac_v1 does not read renorm"),
    ("train", ["--export=false", "--export_formats=onnx"], "export_formats (onnx) needs export"),
    ("train", ["--total_steps=100", "--learning_starts=10", "--n_steps=500"], "n_steps (500)"),
    ("train", ["--algorithm=qrsac"], "must be one of crossq, flashsac, sac, sac_v1, tqc, xqc"),
    ("train", ["--algorithm=tqc", "--variant=v1"], "variant v1 is algorithm sac_v1, and alg"),
    ("train", ["--algorithm=sac_v1", "--variant=v2"], "variant v2 is algorithm sac, and algor"),
    ("train", ["--normalize_observations=maybe"], "normalize_observations must be auto, true"),
    ("train", ["--progress_bar=maybe"], "progress_bar must be auto, true or false, got 'maybe'"),
    ("train", ["--nonormalize_observations=true"], "a --no switch takes no value"),
    ("train", ["--notensorboard=false"], "--notensorboard alone is --tensorboard=false"),
    ("train", ["--normalize_rewards", "--gamma=1"], "normalize_rewards needs gamma < 1"),
    ("train", ["--her", "--offline_data=x"], "her does not work with offline_data"),
    ("train", ["--env_kwargs={bad"], "env_kwargs is not valid JSON"),
    ("train", ["--model_name=a/b"], "model_name must be a folder name"),
    ("train", ["--model_name=.hidden"], "model_name must be a folder name"),
    (
        "train",
        ["--algorithm=tqc", "--n_quantiles=100000"],
        "n_quantiles=100000 needs about 37.3 TiB",
    ),
    ("train", ["--buffer_size=100000000000"], "buffer_size=100000000000 needs about 2.5 TiB"),
    ("train", ["--export_formats=tflite,pb"], "export_formats must be a comma list of saved_model"),
    ("train", ["--vector_mode=threads"], "vector_mode"),
    ("train", ["extra"], "unexpected arguments: extra"),
    ("train", ["--export_dir=blocker/sub"], "cannot write"),
    ("train", ["--run_dir=blocker"], "cannot write"),
    # A preset shortened with --total_steps alone says what else to change.
    ("train", [f"--flagfile={PRESET}", "--total_steps=3000"], "lower learning_starts too"),
    ("train", ["--her"], "her needs a goal-conditioned env"),
    ("train", ["--her", "--n_steps=3"], "her does not work with n_steps > 1"),
    ("train", ["--her", "--her_strategy=last"], "value should be one of <future|final|episode>"),
    ("train", ["--runner_mode=sync"], "--runner_mode is a setting of env runners"),
    ("train", ["--ray_address=127.0.0.1:1"], "--ray_address is a setting of env runners"),
    ("train", ["--num_actors=2", "--use_sde"], "does not work with env runners"),
    ("train", ["--num_actors=1", "--ray_address=127.0.0.1:1"], "cannot reach the Ray cluster"),
    ("train", ["--resume"], "resume needs the run directory"),
    ("train", ["--stop_at_return=nan"], "stop_at_return must be a finite number, got nan"),
    ("train", ["--stop_after_no_improvement=-1"], "stop_after_no_improvement must be >= 0"),
    ("train", ["--min_evaluations=5"], "min_evaluations needs stop_after_no_improvement"),
    ("train", ["--resume", "--run_dir=oldrun", "--batch_size=16"], "batch_size=16 differs"),
    ("train", ["--resume", "--run_dir=oldrun", "--total_steps=2000"], "total_steps can only grow"),
    ("train", ["--resume", "--run_dir=lost"], "holds a run's files but no config.json"),
    # Recorded data (folders that _folder writes; "nodata" is no folder: a Minari id).
    ("train", ["--offline_data=nodata"], "'nodata': no such folder, and no Minari dataset"),
    ("train", ["--offline_data=/gone/data"], "offline_data '/gone/data': no such folder"),
    ("train", ["--offline_data=blocker"], "is a file, not a folder of recorded data"),
    ("train", ["--offline_data=data_corrupt"], "corrupt episode file episode_000000.npz"),
    ("train", ["--offline_data=data_empty"], "offline_data 'data_empty' is empty"),
    ("train", ["--offline_data=data_cheetah"], "recorded on HalfCheetah-v5, this run's env is"),
    ("train", ["--offline_data=data_bounds"], "has action bounds [-1, 1], the env [-2, 2]"),
    ("train", ["--offline_data=data_flags"], "terminations and truncations must mark only"),
    ("train", ["--offline_data=oldrun"], "a tfsac run without checkpoints"),
    ("train", ["--init_from=oldrun"], "init_from: no checkpoint that restores in 'oldrun/che"),
    ("train", ["--init_from="], "init_from is empty: a tfsac run directory"),
    ("train", ["--init_from=blocker"], "init_from: 'blocker' is not a tfsac run directory"),
    ("train", ["--offline_data="], "offline_data is empty: a Minari dataset id or a folder"),
    ("train", ["--offline_data=data_rewards2d"], "rewards of shape (3, 2), not one per step"),
    ("train", ["--offline_data=data_text"], "episode 0: observations of dtype <U3, not numbers"),
    ("train", ["--offline_data=data_envnum"], "unreadable dataset.json: env_id 123 is not an"),
    ("train", ["--offline_data=data_bounds2"], "bounds of shapes (2,) and (1,), the env's are"),
    ("train", ["--offline_ratio=0.3"], "offline_ratio needs offline_data"),
    ("train", ["--offline_data=data_pend", "--offline_ratio=2"], "offline_ratio must be in [0, 1]"),
    ("train", ["--offline_data=data_pend", "--offline_ratio=half"], "or 'size', got 'half'"),
    ("train", ["--total_steps=0"], "total_steps=0 trains on recorded data alone"),
    ("train", ["--offline_data=data_pend", "--offline_updates=5"], "offline_updates is for"),
    (
        "train",
        ["--offline_data=data_pend", "--total_steps=0", "--offline_updates=5"]
        + ["--normalize_rewards"],
        "normalize_rewards needs env steps (total_steps > 0)",
    ),
    (  # an offline-RL tester's: its actor never trained, its BC metric read 0.0
        "train",
        ["--offline_data=data_pend", "--total_steps=0", "--offline_updates=5"]
        + ["--policy_delay=6"],
        "policy_delay (6) is more than offline_updates (5): the actor would never be updated",
    ),
    (
        "train",
        ["--offline_data=data_pend", "--total_steps=0", "--offline_updates=5"]
        + ["--target_update_interval=6"],
        "target_update_interval (6) is more than offline_updates (5): the targets would stay",
    ),
    ("train", ["--target_subset=3"], "target_subset (3) is larger than num_critics (2)"),
    ("train", ["--algorithm=tqc", "--target_subset=2"], "algorithm tqc does not read target_"),
    # A run directory in an exported model (TF Serving serves the model folder's versions).
    ("train", ["--run_dir=models/3"], "run_dir 'models/3' is the SavedModel 'models/3', whi"),
    ("train", ["--run_dir=models/3", "--resume"], "is the SavedModel 'models/3', which TF"),
    ("train", ["--run_dir=models/3/run"], "run_dir 'models/3/run' is inside the SavedModel"),
    ("train", ["--run_dir=models/7"], "is version folder 'models/7' of the model folder 'mo"),
    ("train", ["--run_dir=saved_models/pendulum_v1/r"], "is inside the model folder 'saved_"),
    # Options this run never comes to act on.
    ("train", ["--total_steps=3000", "--stop_at_return=0"], "make 0 evaluations before the"),
    ("train", ["--stop_after_no_improvement=3"], "min_evaluations=0 needs 5 evaluations, and"),
    ("train", ["--video_every=5"], "every 5 evaluations, and eval_every=5000 and total_steps"),
    ("train", ["--lr_schedule=piecewise:20000:0.5"], "not before total_steps (20000): it wo"),
    ("train", ["--total_steps=1100", "--policy_delay=200"], "more than the run's 100 updates"),
    # The folders a write check makes for a path through '..' are removed too.
    ("train", ["--run_dir=new/../run", "--export_dir=blocker/e"], "cannot write to 'blocker"),
    # collect.py
    ("collect", ["--env=Pendulum-v1"], "--output is required"),
    ("collect", ["--output=out", "--env=NoSuchEnv-v0", "--format=npz"], "NoSuchEnv-v0"),
    ("collect", ["--output=blocker", "--env=Pendulum-v1", "--format=npz"], "already exists"),
    # A tester's: refused only after every episode was recorded (the link cannot be replaced).
    ("collect", ["--output=emptylink", "--env=Pendulum-v1", "--format=npz"], "symbolic link"),
    ("collect", ["--output=blocker/x", "--env=Pendulum-v1", "--format=npz"], "Not a directory"),
    ("collect", ["--output=out", "--env=Pendulum-v1"], "needs a dataset id"),
    ("collect", ["--output=o", "--env=Pendulum-v1", "--dataset_id=../x-v0"], "dataset_id must"),
    ("collect", ["--output=o", "--env=Pendulum-v1", "--dataset_id=medium"], "dataset_id must"),
    ("collect", ["--output=out", "--saved_model=missing"], "no SavedModel at 'missing'"),
    ("collect", ["--output=out", "--env=Pendulum-v1", "--episodes=0"], "--episodes must be"),
    ("collect", ["--output=out", "--env=Pendulum-v1", "--noise=nan"], "finite number, got nan"),
    ("collect", ["--output=out", "--env=Pendulum-v1", "--noise=0.1"], "--noise applies to a po"),
    ("collect", ["--output=o", "--env=Pendulum-v1", "--format=npz", "--dataset_id=a-v0"], "ap"),
    ("collect", ["--output=o", "--env=Pendulum-v1", "--transitions=1000000000000"], "needs abo"),
    ("collect", ["--output=o", "--env=Pendulum-v1", "--episodes=10000000000"], "of 200 steps n"),
    ("collect", ["--output=out", "--env=Pendulum-v1", "--seed=-1"], "--seed must be in [0, 2**32"),
    ("collect", ["--output=o", "--episodes=3", "--transitions=9"], "--episodes or --transitions"),
    # evaluate.py
    ("evaluate", [], "give exactly one of --saved_model and --run_dir"),
    ("evaluate", ["--saved_model=missing", "--run_dir=oldrun"], "exactly one of"),
    ("evaluate", ["--saved_model=missing"], "missing"),
    ("evaluate", ["--saved_model=blocker"], "blocker"),
    ("evaluate", ["--saved_model=models"], "model folder of versions: name one, e.g. models/3 (th"),
    ("evaluate", ["--run_dir=missing"], "not a tfsac run directory"),
    ("evaluate", ["--run_dir=oldrun"], "no checkpoint that restores"),
    ("evaluate", ["--run_dir=oldrun", "--episodes=0"], "--episodes must be in [1, 1000000], got 0"),
    ("evaluate", ["--run_dir=oldrun", "--episodes=4294967296"], "--episodes must be in [1, 1000"),
    ("evaluate", ["--run_dir=oldrun", "--seed=-5"], "--seed must be in [0, 2**32 - 1], got -5"),
    ("evaluate", ["--run_dir=ckptrun", "--step=150"], "of step 150 in 'ckptrun/checkpoints' (st"),
    ("evaluate", ["--saved_model=missing", "--step=100"], "--step applies to --run_dir"),
    # sweep.py (with --sweep_dir=sweep unless the case gives one)
    ("sweep", ["--grid=learning_rat=1e-3"], "flag --learning_rat (did you mean --learning_rate? "),
    (  # an offline-RL tester's: the hint named --alpha, the entropy coefficient
        "sweep",
        ["--grid=alpha_bc=1,5"],
        "an algorithm's hyperparameter or an env's keyword is varied as algorithm_kwargs.alpha_bc",
    ),
    ("sweep", ["--grid=algorithm_kwargs.beta=1,2"], "algorithm sac has no hyperparameter 'beta'"),
    ("sweep", ["--grid=env_kwargs.no_such=1,2"], "with kwargs ({'no_such': 1})"),
    ("train", ["--her_strategy=final"], "her_strategy needs her (add --her"),
    # An SB3 user's goal_selection_strategy='future', n_sampled_goal=4: the defaults, given
    # without --her, trained a whole run (a tester's).
    ("train", ["--her_strategy=future"], "her_strategy needs her (add --her: Hindsight"),
    ("train", ["--her_goals_per_transition=4"], "her_goals_per_transition needs her (add"),
    ("train", ["--min_evaluations=0"], "min_evaluations needs stop_after_no_improvement: it"),
    ("sweep", ["--her_strategy=future"], "her_strategy needs her (add --her"),
    ("sweep", ["--grid=learning_rate="], "learning_rate: no values"),
    ("sweep", ["--grid=learning_rate=1e-3,,3e-4"], "empty value"),
    ("sweep", ["--grid=seed=1,2"], "--seeds"),
    ("sweep", ["--buffer_size=1000", "--grid=batch_size=64,2000"], "larger than buffer_size"),
    ("sweep", ["--seeds=a,b"], "--seeds must be integers"),
    ("sweep", ["--run_dir=x"], "--run_dir:"),
    ("sweep", ["--search=hyperband"], "unknown --search method 'hyperband'"),
    ("sweep", ["--search=optuna", "--space=learning_rate=loguniform:1e-3:1e-4"], "low < high"),
    ("sweep", ["--search=optuna", "--space=learning_rate=normal:0:1"], "unknown distribution"),
    ("sweep", ["--search=optuna", "--space=batch_size=uniform:32:64"], "--batch_size="),
    ("sweep", ["--search=optuna", "--num_samples=0", "--space=gamma=uniform:0.9:0.99"], "num_"),
    ("sweep", ["--ray_address=127.0.0.1:1"], "cannot reach the Ray cluster at 127.0.0.1:1"),
    ("sweep", ["--env=NoSuchEnv-v0", "--grid=learning_rate=1e-3,3e-4"], "NoSuchEnv-v0"),
    ("sweep", ["--grid=env=Pendulum-v1,CartPole-v1"], "continuous actions"),
    ("sweep", ['--grid=env_kwargs={"g":9.8};{"no_such":1}'], "no_such"),
    ("sweep", ["--sweep_dir=/proc/tfsac-sweep"], "cannot write to '/proc/tfsac-sweep'"),
    ("sweep", ["--sweep_dir=blocker/sweep"], "cannot write"),
    ("sweep", ["--grid=model_name=a,../b"], "model_name must be a folder name"),
    ("sweep", ["--num_actors=2"], "env runners (--num_actors) do not run inside sweep trials"),
    ("sweep", ["--grid=ent_coef=0.1,0.2"], "--ent_coef (Stable-Baselines3's name): in tfsac --a"),
    ("sweep", ["--grid=env_id=Pendulum-v1"], "--env_id: the env_id option is --env"),
    ("sweep", ["--sweep_dir=models/3"], "is the SavedModel 'models/3', which TF Serving serves"),
    ("sweep", ["--stop_at_return=0", "--grid=total_steps=3000,4000"], "could never stop the"),
    # export.py
    ("export", [], "give exactly one of --saved_model and --run_dir"),
    ("export", ["--saved_model=missing"], "no SavedModel at 'missing'"),
    ("export", ["--run_dir=oldrun"], "no checkpoint that restores"),
    ("export", ["--run_dir=missing"], "not a tfsac run directory"),
    ("export", ["--run_dir=ckptrun", "--step=150"], "'ckptrun/checkpoints' (steps: 200, 100)"),
    ("export", ["--saved_model=missing", "--step=100"], "--step applies to --run_dir"),
    ("export", ["--saved_model=blocker", "--formats=tflite,pb"], "--formats must be a comma list"),
    ("export", ["--saved_model=blocker", "--formats=onnx", "--quantize=int8"], "applies to tflite"),
    ("export", ["--run_dir=oldrun", "--model_name=../evil"], "--model_name must be a folder name"),
    (
        "export",
        ["--run_dir=oldrun", "--model_name=/tmp/evil"],
        "--model_name must be a folder name",
    ),
    ("export", ["--saved_model=blocker", "--model_name=m"], "--model_name applies to --run_dir"),
    # plot.py
    ("plot", ["--run_dirs=missing"], "missing"),
    ("plot", ["--run_dirs=oldrun", "--out=blocker/curves.png"], "cannot write"),
    ("benchmark_report", ["--curves=blocker", "--out_dir=report"], "blocker is not a curve file"),
    ("benchmark_report", ["--runs=none*", "--reach=Hopper-v5=far"], "--reach takes R or env=R"),
    ("benchmark_report", ["--runs=none*"], "--out_dir is required"),
    ("plot", ["--run_dirs=oldrun", "--labels=a,b,c"], "labels: 3 given for 1 run in 1 "),
    ("plot", ["--run_dirs=oldrun,./oldrun/"], "'oldrun' and './oldrun/' are one folder"),
    ("plot", ["--run_dirs=oldrun", "--labels=,"], "labels: an empty label"),
]


def _ids():
    return [f"{script}:{' '.join(args)}"[:90] for script, args, _ in CASES]


def _folder(root, index):
    """The case's working folder, as every case starts from."""
    from tfsac import SACConfig

    folder = root / f"case{index}"
    (folder / "oldrun").mkdir(parents=True)
    (folder / "blocker").write_text("a file where a folder should be")
    config = SACConfig(total_steps=5000, run_dir="oldrun").to_dict()
    (folder / "oldrun" / "config.json").write_text(json.dumps(config))
    (folder / "lost" / "checkpoints").mkdir(parents=True)  # a run without its config.json
    for version in (1, 3):  # a model folder (what --saved_model names is one of them)
        (folder / "models" / str(version)).mkdir(parents=True)
        (folder / "models" / str(version) / "saved_model.pb").write_bytes(b"")
    (folder / "empty").mkdir()
    (folder / "emptylink").symlink_to(folder / "empty")  # a link to an empty folder
    shutil.copytree(folder / "oldrun", folder / "ckptrun")  # with checkpoints of two steps
    (folder / "ckptrun" / "checkpoints").mkdir()
    for step in (100, 200):
        (folder / "ckptrun" / "checkpoints" / f"ckpt-{step}.index").write_bytes(b"")
    _recorded_data(folder)
    return folder


def _recorded_data(folder):
    """Pendulum-v1 .npz datasets of one 3-step episode: good, and broken in one way each."""
    import numpy as np

    episode = dict(
        observations=np.zeros((4, 3)),
        actions=np.zeros((3, 1)),
        rewards=np.zeros(3),
        terminations=np.zeros(3, bool),
        truncations=np.array([False, False, True]),
    )
    meta = dict(format="tfsac-episodes/1", env_id="Pendulum-v1", action_low=[-2.0])
    meta["action_high"] = [2.0]
    cases = {
        "data_pend": ({}, episode),
        "data_cheetah": ({"env_id": "HalfCheetah-v5"}, episode),
        "data_bounds": ({"action_low": [-1.0], "action_high": [1.0]}, episode),
        "data_flags": ({}, {**episode, "terminations": np.array([True, False, False])}),
        "data_empty": ({}, None),
        "data_corrupt": ({}, b"not a zip file"),
        "data_rewards2d": ({}, {**episode, "rewards": np.zeros((3, 2))}),
        "data_text": ({}, {**episode, "observations": np.full((4, 3), "abc")}),
        "data_envnum": ({"env_id": 123}, episode),
        "data_bounds2": ({"action_low": [-2.0, -2.0]}, episode),
    }
    for name, (changes, content) in cases.items():
        (folder / name).mkdir()
        (folder / name / "dataset.json").write_text(json.dumps({**meta, **changes}))
        path = folder / name / "episode_000000.npz"
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            np.savez(path, **content)


def _snapshot(folder):
    return {str(p): (p.read_bytes() if p.is_file() else None) for p in folder.rglob("*")}


# One case of each script also runs as a new process (run_script), which must give what the
# forked run gave: the same exit code, stdout and stderr.
FRESH_PROCESS_CASES = [
    CASES.index(("train", ["--env=NoSuchEnv-v0"], "NoSuchEnv-v0")),
    CASES.index(
        ("train", ["--num_actors=1", "--ray_address=127.0.0.1:1"], "cannot reach the Ray cluster")
    ),
    CASES.index(
        ("collect", ["--output=out", "--saved_model=missing"], "no SavedModel at 'missing'")
    ),
    CASES.index(("evaluate", ["--run_dir=oldrun"], "no checkpoint that restores")),
    CASES.index(("sweep", ["--seeds=a,b"], "--seeds must be integers")),
    CASES.index(
        ("export", ["--run_dir=ckptrun", "--step=150"], "'ckptrun/checkpoints' (steps: 200, 100)")
    ),
    CASES.index(
        ("plot", ["--run_dirs=oldrun", "--labels=a,b,c"], "labels: 3 given for 1 run in 1 ")
    ),
    CASES.index(("benchmark_report", ["--runs=none*"], "--out_dir is required")),
]


def _args(index):
    script, args, _ = CASES[index]
    if script == "sweep" and not any(a.startswith("--sweep_dir") for a in args):
        args = [*args, "--sweep_dir=sweep"]
    return script, args


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Each case's finished process and whether its folder is unchanged, and the fresh
    process's for FRESH_PROCESS_CASES. Four cases run at a time, each forked from a
    server of its own (forked_scripts.py): most stop before TensorFlow loads, so a new
    interpreter and its imports would be most of a case's time."""
    root = tmp_path_factory.mktemp("bad_inputs")
    servers = queue.Queue()
    for i in range(4):
        servers.put(ForkedScripts(str(tmp_path_factory.mktemp(f"server{i}"))))

    def forked(index):
        folder = _folder(root, index)
        before = _snapshot(folder)
        server = servers.get()
        try:
            proc = server.run(*_args(index), folder)
        finally:
            servers.put(server)
        return proc, before == _snapshot(folder), folder

    def fresh(index):
        folder = _folder(root / "fresh", index)
        return run_script(*_args(index), folder), folder

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        fresh_runs = {i: pool.submit(fresh, i) for i in FRESH_PROCESS_CASES}
        cases = list(pool.map(forked, range(len(CASES))))
        fresh_runs = {i: run.result() for i, run in fresh_runs.items()}
    tfsac_files = set()
    while not servers.empty():
        server = servers.get()
        tfsac_files.add(server.tfsac_file)
        server.close()
    return dict(cases=cases, fresh=fresh_runs, tfsac_files=tfsac_files)


def test_integral_floats_are_integer_flag_values():
    sys.path.insert(0, SCRIPTS)
    from _cli import IntegralParser

    parser = IntegralParser()
    assert [parser.parse(t) for t in ("100000", "1e5", "2.5e4")] == [100000, 100000, 25000]
    assert isinstance(parser.parse("1e5"), int)


def test_the_table_covers_every_script_with_30_or_more_mistakes():
    assert len(CASES) >= 30
    scripts = {"train", "evaluate", "sweep", "plot", "export", "collect", "benchmark_report"}
    assert {script for script, _, _ in CASES} == scripts


@pytest.mark.parametrize("index", range(len(CASES)), ids=_ids())
def test_a_mistake_is_one_error_line_and_writes_nothing(outcomes, index):
    _, _, message = CASES[index]
    proc, unchanged, _ = outcomes["cases"][index]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-3000:]
    assert message in lines[0], lines[0]
    assert unchanged, "the case wrote files"


def test_a_forked_case_is_what_a_new_process_of_the_script_gives(outcomes):
    """The forked runs are the checkout's scripts and tfsac, and one case of each script
    gives in a new process exactly what its forked run gave."""
    assert outcomes["tfsac_files"] == {os.path.join(REPO_ROOT, "tfsac", "__init__.py")}
    assert {CASES[i][0] for i in FRESH_PROCESS_CASES} == {script for script, _, _ in CASES}
    for index, (fresh, fresh_folder) in outcomes["fresh"].items():
        forked, _, folder = outcomes["cases"][index]
        said = [
            (p.returncode, p.stdout.replace(str(f), "<case>"), p.stderr.replace(str(f), "<case>"))
            for p, f in ((fresh, fresh_folder), (forked, folder))
        ]
        assert said[0] == said[1], (CASES[index], said)
        assert said[0][0] != 0 and said[0][2].startswith("error: "), said


def test_the_memory_estimate_refuses_only_what_clearly_cannot_fit():
    from tfsac import SACConfig
    from tfsac.algorithm.resolve import resolve
    from tfsac.run.memory_check import check_memory, memory_estimates

    gib = 2**30
    default = resolve(SACConfig())
    total = sum(size for _, size, _ in memory_estimates(default, 17, 6))
    assert 50 * 2**20 < total < 200 * 2**20  # HalfCheetah's sizes: the 1M-row buffer's ~100 MiB
    check_memory(default, 17, 6, memory=gib)
    with pytest.raises(TfsacError, match=r"^buffer_size=1000000 needs about 9\d\.\d MiB"):
        check_memory(default, 17, 6, memory=100 * 2**20)
    tqc = resolve(
        SACConfig(algorithm="tqc", n_quantiles=2000)
    )  # 4000 x 256 x 4000 floats: 15.3 GiB
    check_memory(tqc, 17, 6, memory=64 * gib)
    message = r"^n_quantiles=2000 needs about 15\.3 GiB .* than 80% of this machine's 16\.0 GiB"
    with pytest.raises(TfsacError, match=message):
        check_memory(tqc, 17, 6, memory=16 * gib)
    wide = resolve(SACConfig(hidden_sizes=(20000, 20000)))
    with pytest.raises(TfsacError, match=r"^hidden_sizes=20000,20000 needs about"):
        check_memory(wide, 17, 6, memory=16 * gib)
    her = resolve(SACConfig(her=True))
    buffer = {name: size for name, size, _ in memory_estimates(her, 17, 6)}["buffer_size"]
    assert buffer == 1_000_000 * ((17 + 6 + 3) * 4 + 16)  # HER's two int64 per slot
    data = "mujoco/halfcheetah/expert-v0"
    recorded = resolve(SACConfig(offline_data=data))
    check_memory(recorded, 17, 6, memory=gib, recorded_bytes=100 * 2**20)
    message = (
        r"^offline_data='mujoco/halfcheetah/expert-v0' needs about 900\.0 MiB for the recorded"
    )
    with pytest.raises(TfsacError, match=message):
        check_memory(recorded, 17, 6, memory=gib, recorded_bytes=900 * 2**20)


def test_a_missing_env_module_names_the_extra_that_installs_it(monkeypatch):
    from tfsac import TfsacError
    from tfsac.data import env_checks, envs

    monkeypatch.setitem(env_checks.EXTRAS, "tfsac_no_such_module", "demo")
    message = r"missing module: tfsac_no_such_module \(pip install 'tfsac\[demo\]', or -e \".\[demo"
    with pytest.raises(TfsacError, match=message):
        envs.make_env("tfsac_no_such_module:X-v0")
    # The env's own module: where tfsac looks for it (a module it imports: the bare name).
    where = r"tfsac_other_module \(run from the folder that holds it, or put that folder on PYT"
    with pytest.raises(TfsacError, match=f"missing module: {where}"):
        envs.make_env("tfsac_other_module:X-v0")


def test_an_sb3_users_first_lines_are_one_line_each_pointing_to_train(tmp_path):
    """Found by a tester writing SB3's code: tfsac.SAC("MlpPolicy", env, config) failed deep
    in Keras (units=<TimeLimit...>), train(callback=...) was a TypeError."""
    import gymnasium as gym
    from conftest import tiny_config

    import tfsac

    for config in ([tfsac.SACConfig()], []):  # SB3's usual call gives no config (a tester)
        with pytest.raises(TfsacError, match=r"takes the sizes .* 'MlpPolicy' and <TimeLimit"):
            tfsac.SAC("MlpPolicy", gym.make("Pendulum-v1"), *config)
    assert tfsac.SAC(3, 1).config.hidden_sizes == tfsac.SACConfig().hidden_sizes
    config = tiny_config(tmp_path, "Pendulum-v1")
    with pytest.raises(TfsacError, match=r"no option 'callback'; did you mean 'callbacks'\?$"):
        tfsac.train(config, callback=[])
    assert not os.path.exists(config.run_dir)


def _python_cases():
    """(a call, a piece of its one TfsacError line): the rows above that Python reaches too,
    and the Python API's own (keywords, callbacks)."""
    import tfsac
    from tfsac import SACConfig

    def train(resume=False, **options):
        return lambda: tfsac.train(SACConfig(**options), resume=resume, quiet=True)

    return [
        (train(run_dir="models/3"), "run_dir 'models/3' is the SavedModel 'models/3', which"),
        (train(run_dir="models/3", resume=True), "run_dir 'models/3' is the SavedModel"),
        (train(run_dir="models/7"), "is version folder 'models/7' of the model folder 'models'"),
        (train(run_dir="saved_models/pendulum_v1/r"), "is inside the model folder 'saved_mo"),
        (train(total_steps=3000, stop_at_return=0.0), "make 0 evaluations before the run's"),
        (train(stop_after_no_improvement=3), "min_evaluations=0 needs 5 evaluations, and"),
        (train(video_every=5), "make 4 with the run's last one: it would record none"),
        (train(lr_schedule="piecewise:20000:0.5"), "not before total_steps (20000): it would"),
        (train(total_steps=1100, target_update_interval=101), "than the run's 100 updates ("),
        (train(run_dir="new/../run", export_dir="blocker/e"), "cannot write to 'blocker/e/"),
        (lambda: SACConfig(env="Pendulum-v1"), "SACConfig has no field 'env': use env_id="),
        (
            lambda: SACConfig(ent_coef="auto_0.1"),
            "SACConfig has no field 'ent_coef' (Stable-Baselines3's name): in tfsac alpha= (",
        ),
        (lambda: SACConfig(net_arch=[64, 64]), "in tfsac hidden_sizes=(256, 256) (critic_hi"),
        (lambda: SACConfig(start_steps=100), "(Spinning Up's name): in tfsac learning_starts="),
        (lambda: SACConfig(learning_rat=1e-3), "no field 'learning_rat'; did you mean learni"),
        (lambda: tfsac.SaveBestPolicy(123), "SaveBestPolicy: path must be a folder (a str or"),
        (lambda: tfsac.SaveBestPolicy("a/.."), "SaveBestPolicy: the best policy's folder mus"),
        (lambda: tfsac.SaveBestPolicy("blocker/best"), "cannot write to 'blocker/best'"),
        (lambda: tfsac.StopTrainingOnRewardThreshold("high"), "must be a number, got 'high'"),
    ]


@pytest.mark.parametrize("index", range(len(_python_cases())))
def test_a_python_mistake_is_one_error_line_and_writes_nothing(tmp_path, monkeypatch, index):
    call, message = _python_cases()[index]
    folder = _folder(tmp_path, index)
    monkeypatch.chdir(folder)
    before = _snapshot(folder)
    with pytest.raises(TfsacError) as raised:
        call()
    line = str(raised.value)
    assert "\n" not in line and message in line, line
    assert before == _snapshot(folder), "the call wrote files"


def test_an_unknown_keyword_is_still_a_type_error():
    from tfsac import SACConfig

    with pytest.raises(TypeError, match="no field 'env'"):
        SACConfig(env="Pendulum-v1")
