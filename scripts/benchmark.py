"""Measure tfsac's learning-phase throughput, optionally beside SB3 and SBX.

    python scripts/benchmark.py --env=HalfCheetah-v5 --steps=3200 --learning_starts=1000 --peers

Prints one JSON line per library and round (`env_steps_per_s`, `updates_per_s`,
`act_latency_ms` for tfsac), then one with the ratios when peers ran (with `--rounds=N`, the
median of the per-round ratios, and each round's). The peers are the scripts in
../shared/peers (see its README), run one after the other, never at the same time, with the
same algorithm (`--algorithm=tqc`: SBX's TQC and sb3-contrib's), networks and critics.

`--breakdown` adds where a compiled update call's time goes to tfsac's line: the time of a
call holding K = 1, 2, 4, 16 updates (alternating, median of `--breakdown_rounds`), the
least-squares split into a fixed cost per call and a cost per update, the update's dense-layer
FLOPs and their rate, and, measured in the same process, the rate of a chain of matmuls of
the update's width with the batch's rows and with four times as many (the bound for an
update whose matmuls were fused into wider ones); and a one-update call that also picks the
next action (what the training loop runs) against an update call then an act call.

`--inference` times the exported policy instead, one call at a time (p50 and p99, batch 1
and 64) in each runtime that loads it: the SavedModel in Python, the SavedModel through
TensorFlow's C API (its C++ loader, as TF Serving; compiled here when a C compiler is found),
LiteRT and ONNX Runtime (tfsac/deploy/latency.py):

    python scripts/benchmark.py --inference --env=HalfCheetah-v5
    python scripts/benchmark.py --inference --saved_model=saved_models/pendulum/3

Without --saved_model it exports an untrained policy of the env's sizes and the network
flags (latency does not depend on the weights); with it, a copy of the version folder gets
the formats it lacks.

`--baseline=<git revision>` runs the same training run from a temporary worktree of that
revision and from this working tree, alternately, `--rounds` times, each timed the same way
by one probe (scripts/_baseline.py), and prints each round's env steps/s of both and their
ratio, then the median ratio:

    python scripts/benchmark.py --env=HalfCheetah-v5 --baseline=main --rounds=3
"""

import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import pairwise

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import _baseline  # noqa: E402
from _cli import (  # noqa: E402
    config_from_flags,
    define_training_flags,
    fail,
    import_tfsac,
    parse_flags_or_fail,
)
from absl import app, flags  # noqa: E402

# TF-free: the variants' and architectures' declarations.
from tfsac.algorithm.architectures import MLP, architecture_of  # noqa: E402
from tfsac.algorithm.resolve import resolve  # noqa: E402
from tfsac.algorithm.variants import variant_of  # noqa: E402
from tfsac.algorithm.variants.sac import SoftDoubleQ  # noqa: E402
from tfsac.run.preflight import check_run  # noqa: E402

define_training_flags()
flags.DEFINE_integer("steps", 3200, "Total env steps of the measured run (as the peers').")
flags.DEFINE_integer("update_calls", 50, "Compiled update calls timed for updates_per_s.")
flags.DEFINE_bool("peers", False, "Also run SB3 and SBX from ../shared/peers.")
flags.DEFINE_integer(
    "rounds",
    1,
    "Rounds of tfsac (then the peers, with --peers), one after the other; the ratios are "
    "per round and their median (a shared machine drifts between rounds).",
    lower_bound=1,
)
flags.DEFINE_float(
    "env_delay_ms",
    0.0,
    "Sleep this long in every env step: a stand-in for a slow simulator (env runners' case).",
    lower_bound=0.0,
)
flags.DEFINE_bool("breakdown", False, "Also split an update call's time (see the docstring).")
flags.DEFINE_integer("breakdown_rounds", 5, "Alternating rounds of the breakdown.", lower_bound=1)
flags.DEFINE_string(
    "peers_dir",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "peers"),
    "Folder of the peers' throughput.py.",
)
flags.DEFINE_string(
    "baseline",
    None,
    "A git revision to compare with: rounds alternate between it (a temporary worktree) "
    "and this working tree, each in its own process.",
)
flags.DEFINE_bool("inference", False, "Time the exported policy in each runtime instead.")
flags.DEFINE_string("saved_model", None, "With --inference: an exported version folder.")
flags.DEFINE_integer("inference_calls", 2000, "Timed calls per runtime and batch.", lower_bound=100)
FLAGS = flags.FLAGS
PEER_PYTHON = {"sb3": "/tmp/peers-sb3/bin/python", "sbx": "/tmp/peers-sbx/bin/python"}
BREAKDOWN_K = (1, 2, 4, 16)


def update_flops(config, obs_dim, action_dim):
    """FLOPs of one default SAC update's dense layers (2 per multiply-add) for a run's
    checked config, or None for an update of another shape (another variant or
    architecture, policy_delay > 1).

    Per sample, with A and C the multiply-adds of one actor and one critic-ensemble forward
    pass, A1 and C1 those of their first layers and Ca the critics' first layer restricted to
    the action inputs: the actor runs forward on s' (target) and s (loss) and backward (weights
    everywhere, inputs above the first layer): 4A - A1; the target critics forward: C; the
    critics forward on (s, a) and (s, pi(s)): 2C; their backward for the critic loss
    (weights, inputs above the first layer): 2C - C1; and for the actor loss (inputs only,
    down to the action): C - C1 + Ca.
    """
    counted = variant_of(config) is SoftDoubleQ and architecture_of(config) is MLP
    if not counted or config.policy_delay != 1:
        return None
    sizes, critic_sizes = list(config.hidden_sizes), list(config.critic_hidden_sizes)
    actor_dims = [obs_dim, *sizes]
    actor = sum(a * b for a, b in pairwise(actor_dims)) + sizes[-1] * 2 * action_dim
    critic_dims = [obs_dim + action_dim, *critic_sizes, 1]
    n = config.num_critics
    critic = n * sum(a * b for a, b in pairwise(critic_dims))
    actor_first, critic_first = obs_dim * sizes[0], n * critic_dims[0] * critic_sizes[0]
    critic_action = n * action_dim * critic_sizes[0]
    macs = 4 * actor - actor_first + 6 * critic - 2 * critic_first + critic_action
    return 2 * macs * config.batch_size


def matmul_rate(rows, width, chain=20, calls=10, repeats=3):
    """GFLOP/s of a chain of `chain` dependent [rows, width] x [width, width] matmuls with
    ReLU in one XLA call, the best of `repeats` timings (noise on a shared machine only
    slows a run down)."""
    import tensorflow as tf

    x = tf.random.normal([rows, width])
    weights = [tf.random.normal([width, width], stddev=width**-0.5) for _ in range(chain)]

    @tf.function(jit_compile=True)
    def chained(x, *weights):
        for w in weights:
            x = tf.nn.relu(tf.matmul(x, w))
        return tf.reduce_sum(x)

    chained(x, *weights).numpy()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            chained(x, *weights).numpy()
        best = min(best, (time.perf_counter() - start) / calls)
    return 2 * rows * width * width * chain / best / 1e9


def _ms_per_call(fn, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return 1e3 * (time.perf_counter() - start) / calls


def breakdown(learner, buffer, config):
    """Call time against updates per call, split into per-call and per-update cost; and
    one update with the next action picked in the same call against two calls."""
    batches = {k: buffer.sample_packed(config.batch_size, k) for k in BREAKDOWN_K}
    obs = buffer.observation[:1]
    acting = {
        "update_and_act_ms": lambda: learner.update_and_act(batches[1], obs),
        "update_then_act_ms": lambda: (learner.update(batches[1]), learner.act(obs)),
    }
    for k in BREAKDOWN_K:  # compile each shape outside the clock
        learner.update(batches[k])
    for fn in acting.values():
        fn()
    times = {k: [] for k in [*BREAKDOWN_K, *acting]}
    for _ in range(FLAGS.breakdown_rounds):
        for k in BREAKDOWN_K:
            times[k].append(_ms_per_call(lambda k=k: learner.update(batches[k]), max(2, 32 // k)))
        for name, fn in acting.items():
            times[name].append(_ms_per_call(fn, 32))
    median = {k: statistics.median(v) for k, v in times.items()}
    call_ms = {k: median[k] for k in BREAKDOWN_K}
    slope, intercept = statistics.linear_regression(list(call_ms), list(call_ms.values()))
    flops = update_flops(config, learner.obs_dim, learner.action_dim)
    width = max(config.hidden_sizes)
    return {
        "call_ms_by_updates_per_call": {str(k): round(v, 3) for k, v in call_ms.items()},
        "fixed_ms_per_call": round(intercept, 3),
        "ms_per_update": round(slope, 3),
        "update_flops": flops,
        # A drifting machine can tilt the line; no rate from a non-positive slope.
        "update_gflop_per_s": None
        if flops is None or slope <= 0
        else round(flops / slope / 1e6, 1),
        "matmul_chain_gflop_per_s": round(matmul_rate(config.batch_size, width), 1),
        "matmul_chain_4x_rows_gflop_per_s": round(matmul_rate(4 * config.batch_size, width), 1),
        **{name: round(median[name], 3) for name in acting},
    }


def measure_tfsac(tfsac, config):
    env_fn = None
    if FLAGS.env_delay_ms:
        from tfsac.data.envs import delayed_env_factory

        env = tfsac.env_factory(config.env_id, config.env_kwargs)
        env_fn = delayed_env_factory(env, FLAGS.env_delay_ms / 1e3)
    trainer = tfsac.Trainer(check_run(config, export=False, env_fn=env_fn))
    result = trainer.run()
    learner, buffer = trainer.learner, trainer.buffer
    # Pure update throughput on pre-sampled batches (compiled already by the run).
    per_call = tfsac.UpdateSchedule.from_config(config).steps_per_phase(config.train_freq)
    batches = [buffer.sample_packed(config.batch_size, per_call) for _ in range(5)]
    learner.update(batches[0])  # `update` alone is compiled here, outside the clock
    start = time.perf_counter()
    for i in range(FLAGS.update_calls):
        learner.update(batches[i % len(batches)])  # returns floats: synchronous
    updates_per_s = FLAGS.update_calls * per_call / (time.perf_counter() - start)
    obs = buffer.observation[:1]
    latencies = []
    for _ in range(300):
        t0 = time.perf_counter()
        learner.act(obs)
        latencies.append(time.perf_counter() - t0)
    line = {
        "lib": "tfsac",
        "env": config.env_id,
        "steps": config.total_steps,
        "learning_starts": config.learning_starts,
        "batch_size": config.batch_size,
        "train_freq": config.train_freq,
        "gradient_steps": config.gradient_steps,
        "num_envs": config.num_envs,
        "vector_mode": config.vector_mode,
        "env_delay_ms": FLAGS.env_delay_ms,
        "num_actors": config.num_actors,
        **(
            {"runner_mode": config.runner_mode, "chunk_steps": config.chunk_steps}
            if config.num_actors
            else {}
        ),
        "env_steps_per_s": round(result.summary["learning_env_steps_per_s"], 2),
        "updates_per_s": round(updates_per_s, 2),
        "act_latency_ms": round(1e3 * statistics.median(latencies), 3),
    }
    if FLAGS.breakdown:
        line["breakdown"] = breakdown(learner, buffer, trainer.config)  # as checked
    return line


def peer_arguments(config) -> list:
    """The peers' --algo, --policy and --kwargs for `config`'s algorithm, networks and
    critics (the variant's peer and settings, the architecture's policy class)."""
    variant = variant_of(config)
    actor, critic = list(config.hidden_sizes), list(config.critic_hidden_sizes)
    net_arch = actor if actor == critic else {"pi": actor, "qf": critic}
    policy_kwargs, kwargs = variant.peer_kwargs(config)
    policy = {"net_arch": net_arch, "n_critics": config.num_critics, **policy_kwargs}
    kwargs = {"policy_kwargs": policy, **kwargs}
    policy_class = architecture_of(config).peer_policy
    return ["--algo", variant.peer, "--policy", policy_class, "--kwargs", json.dumps(kwargs)]


def _peer_installed(lib: str) -> bool:
    return os.path.exists(PEER_PYTHON[lib]) and os.path.exists(
        os.path.join(FLAGS.peers_dir, "throughput.py")
    )


def measure_peer(lib, config):
    if variant_of(config).peer is None:
        return {"lib": lib, "error": f"algorithm {config.algorithm} has no peer"}
    if lib not in architecture_of(config).peers:
        return {"lib": lib, "error": f"{lib} has no network {config.network}"}
    python = PEER_PYTHON[lib]
    script = os.path.join(FLAGS.peers_dir, "throughput.py")
    cmd = [
        python,
        script,
        lib,
        config.env_id,
        "--steps",
        str(config.total_steps),
        "--learning-starts",
        str(config.learning_starts),
        "--batch-size",
        str(config.batch_size),
        "--gradient-steps",
        str(config.gradient_steps),
        "--train-freq",
        str(config.train_freq),
        "--seed",
        str(config.seed),
        *peer_arguments(config),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        return {"lib": lib, "error": proc.stderr.strip().splitlines()[-1:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run_round(tfsac, config):
    """tfsac, then (with --peers) SB3 and SBX; returns {lib: env_steps_per_s} and prints
    each library's JSON line."""
    with tempfile.TemporaryDirectory() as tmp:
        config.run_dir = os.path.join(tmp, "run")
        try:
            ours = measure_tfsac(tfsac, config)
        except tfsac.TfsacError as e:
            fail(str(e))
    print(json.dumps(ours), flush=True)
    rates = {"tfsac": ours["env_steps_per_s"]}
    if FLAGS.peers:
        for lib in ("sb3", "sbx"):
            peer = measure_peer(lib, config)
            print(json.dumps(peer), flush=True)
            if "env_steps_per_s" in peer:
                rates[lib] = peer["env_steps_per_s"]
    return rates


def inference(tfsac, config):
    """--inference: the latency table of an exported policy (see the docstring)."""
    from tfsac.data.envs import env_spec, make_env
    from tfsac.deploy import formats, latency
    from tfsac.deploy.loading import check_available, check_saved_model, load_policy

    try:
        check_available(("tflite", "onnx"))
        if FLAGS.saved_model:  # its own mistakes are said with its own path, not the copy's
            check_saved_model(FLAGS.saved_model)
            formats.check_readable(FLAGS.saved_model)
            load_policy(FLAGS.saved_model)
            formats.check_files(FLAGS.saved_model)  # its policy.tflite / .onnx, if any
        with tempfile.TemporaryDirectory() as tmp:
            if FLAGS.saved_model:
                version = shutil.copytree(FLAGS.saved_model, os.path.join(tmp, "1"))
                missing = [
                    n for n, f in formats.FILES.items() if not os.path.isfile(f"{version}/{f}")
                ]
                formats.add_formats(version, missing)
            else:
                env = make_env(config.env_id, env_kwargs=config.env_kwargs)
                spec = env_spec(config.env_id, env)
                env.close()
                learner = tfsac.SACLearner(spec.obs_dim, spec.action_dim, config)
                version = tfsac.export_policy(
                    learner.actor, spec, tmp, "policy", {}, formats=("saved_model", *formats.FILES)
                )
            rows = latency.measure(version, FLAGS.inference_calls)
    except tfsac.TfsacError as e:
        fail(str(e))
    for row in rows:
        print(json.dumps(row), flush=True)
    print(latency.table(rows))


def against_baseline() -> None:
    """--baseline: the same run, alternately from that revision and this working tree."""
    if FLAGS.peers or FLAGS.breakdown or FLAGS.env_delay_ms:
        fail(
            "--baseline compares tfsac's training throughput: leave out --peers, --breakdown "
            "and --env_delay_ms"
        )
    if FLAGS.steps < FLAGS.learning_starts + _baseline.WINDOW_START + 2 * _baseline.LOG_EVERY:
        fail(
            f"--baseline times env steps from learning_starts + {_baseline.WINDOW_START}: "
            f"give --steps of at least {FLAGS.learning_starts + _baseline.WINDOW_START + 200}"
        )
    config = dataclasses.replace(config_from_flags(), total_steps=FLAGS.steps)
    defaults = {f.name: f.default for f in dataclasses.fields(config)}
    fields = _baseline.probe_fields(dataclasses.asdict(config), defaults)
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        with _baseline.checked_out(repo, FLAGS.baseline) as tree:
            trees = {"baseline": tree, "working": repo}
            _baseline.compare(trees, fields, FLAGS.rounds)
    except subprocess.CalledProcessError as e:
        fail(f"cannot check out {FLAGS.baseline!r}: {e.stderr.decode().strip()}")
    except (RuntimeError, ValueError) as e:
        fail(str(e))


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    if FLAGS.inference:
        tfsac = import_tfsac()
        return inference(tfsac, config_from_flags(tfsac))
    if FLAGS.saved_model:
        fail("--saved_model is an --inference flag")
    # The measurement is the learning phase: it needs env steps after learning_starts.
    if FLAGS.steps <= FLAGS.learning_starts:
        fail(
            f"--steps ({FLAGS.steps}) must be larger than --learning_starts "
            f"({FLAGS.learning_starts}): only the steps after it are measured"
        )
    if FLAGS.baseline:
        return against_baseline()
    if FLAGS.env_delay_ms and FLAGS.peers:
        fail("--env_delay_ms slows tfsac's envs only: leave out --peers")
    missing = [lib for lib in ("sb3", "sbx") if FLAGS.peers and not _peer_installed(lib)]
    if missing:  # before tfsac's rounds, which take minutes
        fail(f"--peers: {' and '.join(missing)} not installed (run {FLAGS.peers_dir}/setup.sh)")
    tfsac = import_tfsac()
    config = config_from_flags(tfsac)
    config.total_steps = FLAGS.steps
    config.eval_every = FLAGS.steps  # one short evaluation at the end, outside the clock
    config.eval_episodes = 1
    config.checkpoint_every = 0
    config.log_every = FLAGS.steps
    try:
        config = resolve(config)
    except tfsac.TfsacError as e:
        fail(str(e))
    rounds = [run_round(tfsac, config) for _ in range(FLAGS.rounds)]
    if FLAGS.peers:
        ratios = {}
        for lib in ("sb3", "sbx"):
            per_round = [r["tfsac"] / r[lib] for r in rounds if lib in r]
            if per_round:
                ratios[f"tfsac_over_{lib}"] = round(statistics.median(per_round), 2)
                if len(per_round) > 1:
                    ratios[f"tfsac_over_{lib}_per_round"] = [round(x, 2) for x in per_round]
        print(json.dumps({"ratios": ratios}), flush=True)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags_or_fail)
