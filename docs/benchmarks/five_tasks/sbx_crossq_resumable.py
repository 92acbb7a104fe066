"""SBX's CrossQ as ../shared/peers/learn.py runs it (the same model, evaluations and JSON
line), in chunks of --eval-every env steps with a checkpoint after each (model, replay
buffer, curve so far in --state), so that a run stopped with its machine continues from
its last chunk with the same command (on a new episode, as tfsac's --resume does).

    /tmp/peers-sbx/bin/python docs/benchmarks/five_tasks/sbx_crossq_resumable.py Walker2d-v5 \
        --steps 100000 --seed 0 --eval-every 10000 \
        --state sweeps/table/sbx/state/Walker2d-v5-seed0 --kwargs '{"learning_starts": 5000, ...}' \
        > sweeps/table/sbx/Walker2d-v5-crossq-seed0.json

A measuring tool beside the data, not part of tfsac (it runs in the peers' environment)."""

import argparse
import json
import os
import sys
import time

import gymnasium as gym
from sbx import CrossQ
from stable_baselines3.common.evaluation import evaluate_policy

p = argparse.ArgumentParser()
p.add_argument("env")
p.add_argument("--steps", type=int, required=True)
p.add_argument("--seed", type=int, default=0)
p.add_argument("--kwargs", default="{}")
p.add_argument("--eval-every", type=int, required=True)
p.add_argument("--state", required=True, help="folder for the checkpoint")
a = p.parse_args()
kw = json.loads(a.kwargs)
os.makedirs(a.state, exist_ok=True)
state_json = os.path.join(a.state, "state.json")
model_zip = os.path.join(a.state, "model.zip")
buffer_pkl = os.path.join(a.state, "replay.pkl")

eval_env = gym.make(a.env)
if os.path.exists(state_json):
    with open(state_json) as f:
        st = json.load(f)
    model = CrossQ.load(model_zip, env=gym.make(a.env))
    model.load_replay_buffer(buffer_pkl)
    print(f"resumed at {model.num_timesteps}", file=sys.stderr, flush=True)
else:
    st = {"curve": [], "train_s": 0.0, "resumes": 0}
    model = CrossQ("MlpPolicy", gym.make(a.env), seed=a.seed, verbose=0, **kw)
st["resumes"] += int(model.num_timesteps > 0)

while model.num_timesteps < a.steps:
    t = time.perf_counter()
    first = model.num_timesteps == 0
    model.learn(a.eval_every, reset_num_timesteps=first)
    r, _ = evaluate_policy(
        model, eval_env, n_eval_episodes=10, deterministic=True, return_episode_rewards=True
    )
    st["train_s"] += time.perf_counter() - t
    st["curve"].append([int(model.num_timesteps), float(sum(r) / len(r))])
    model.save(model_zip + ".tmp.zip")
    model.save_replay_buffer(buffer_pkl + ".tmp.pkl")
    os.replace(model_zip + ".tmp.zip", model_zip)
    os.replace(buffer_pkl + ".tmp.pkl", buffer_pkl)
    with open(state_json + ".tmp", "w") as f:
        json.dump(st, f)
    os.replace(state_json + ".tmp", state_json)
    print(f"{model.num_timesteps}: {st['curve'][-1][1]:.1f}", file=sys.stderr, flush=True)

mean, std = evaluate_policy(model, eval_env, n_eval_episodes=10, deterministic=True)
print(
    json.dumps(
        {
            "lib": "sbx",
            "algo": "crossq",
            "policy": "MlpPolicy",
            "env": a.env,
            "steps": a.steps,
            "seed": a.seed,
            "kwargs": kw,
            "eval_return_mean": float(mean),
            "eval_return_std": float(std),
            "eval_success_rate": None,
            "train_s": round(st["train_s"], 1),
            "env_steps_per_s": round(a.steps / st["train_s"], 2),
            "curve": st["curve"],
            "success_curve": [],
            "resumes": st["resumes"],
        },
        default=str,
    )
)
