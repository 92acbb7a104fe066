"""Measure tfsac's learning-phase throughput, optionally beside SB3 and SBX.

    python scripts/benchmark.py --env=HalfCheetah-v5 --steps=3200 --learning_starts=1000 --peers

Prints one JSON line per library and round (`env_steps_per_s`, `updates_per_s`,
`act_latency_ms` for tfsac), then one with the ratios when peers ran (with `--rounds=N`, the
median of the per-round ratios, and each round's). The peers are the scripts in
../shared/peers (see its README), run one after the other, never at the same time.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from _cli import (  # noqa: E402
    config_from_flags,
    define_training_flags,
    fail,
    import_tfsac,
    parse_flags_or_fail,
)
from absl import app, flags  # noqa: E402

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
flags.DEFINE_string(
    "peers_dir",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "peers"),
    "Folder of the peers' throughput.py.",
)
FLAGS = flags.FLAGS
PEER_PYTHON = {"sb3": "/tmp/peers-sb3/bin/python", "sbx": "/tmp/peers-sbx/bin/python"}


def measure_tfsac(tfsac, config):
    trainer = tfsac.Trainer(config, export=False)
    result = trainer.run()
    learner, buffer = trainer.learner, trainer.buffer
    # Pure update throughput on pre-sampled batches (compiled already by the run).
    per_call = config.steps_per_update(config.train_freq)
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
    return {
        "lib": "tfsac",
        "env": config.env_id,
        "steps": config.total_steps,
        "learning_starts": config.learning_starts,
        "batch_size": config.batch_size,
        "train_freq": config.train_freq,
        "gradient_steps": config.gradient_steps,
        "num_envs": config.num_envs,
        "vector_mode": config.vector_mode,
        "env_steps_per_s": round(result.summary["learning_env_steps_per_s"], 2),
        "updates_per_s": round(updates_per_s, 2),
        "act_latency_ms": round(1e3 * statistics.median(latencies), 3),
    }


def measure_peer(lib, config):
    python = PEER_PYTHON[lib]
    script = os.path.join(FLAGS.peers_dir, "throughput.py")
    if not (os.path.exists(python) and os.path.exists(script)):
        return {"lib": lib, "error": f"not installed (run {FLAGS.peers_dir}/setup.sh)"}
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


def main(argv):
    if len(argv) > 1:
        fail(f"unexpected arguments: {' '.join(argv[1:])}")
    tfsac = import_tfsac()
    config = config_from_flags(tfsac)
    config.total_steps = FLAGS.steps
    config.eval_every = FLAGS.steps  # one short evaluation at the end, outside the clock
    config.eval_episodes = 1
    config.checkpoint_every = 0
    config.log_every = FLAGS.steps
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
