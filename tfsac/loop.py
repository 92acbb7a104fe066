"""The training loop: env interaction, updates, evaluation, logging and export."""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import time
from typing import Callable, Dict, List, Optional

import keras
import numpy as np
from absl import logging

from tfsac import __version__
from tfsac.config import SACConfig
from tfsac.distributions import unit_to_bounds
from tfsac.envs import EnvSpec, env_spec, make_env
from tfsac.errors import TfsacError
from tfsac.evaluation import run_episodes
from tfsac.export import check_writable, default_model_name, export_policy
from tfsac.learner import SACLearner
from tfsac.replay import ReplayBuffer

SUMMARY_FILE = "summary.json"


@dataclasses.dataclass
class TrainResult:
    """What `train` returns; `summary` is also written to <run_dir>/summary.json."""

    learner: SACLearner
    spec: EnvSpec
    buffer: ReplayBuffer
    run_dir: str
    saved_model_path: Optional[str]
    summary: Dict


def default_run_dir(config: SACConfig) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{default_model_name(config.env_id)}-seed{config.seed}-{stamp}")


def _write_json(path: str, data: Dict) -> None:
    """Writes JSON atomically (temp file + rename) so readers never see half a file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


def _evaluate(learner: SACLearner, env, spec: EnvSpec, episodes: int, seed: int) -> List[float]:
    def policy(obs):
        return unit_to_bounds(
            learner.act(obs, deterministic=True), spec.action_low, spec.action_high
        )

    return run_episodes(env, policy, episodes, seed=seed)


def train(
    config: SACConfig,
    export: bool = True,
    on_log: Optional[Callable[[Dict], None]] = None,
) -> TrainResult:
    """Trains SAC on `config.env_id` and (with `export`) exports a SavedModel.

    Raises TfsacError for bad configuration or paths, before any training is done.
    """
    config.validate()
    run_dir = config.run_dir or default_run_dir(config)
    check_writable(run_dir)
    model_name = config.model_name or default_model_name(config.env_id)
    if export:
        check_writable(os.path.join(config.export_dir, model_name))

    keras.utils.set_random_seed(config.seed)  # Python, numpy and TF global seeds
    env = make_env(config.env_id)
    eval_env = make_env(config.env_id)
    spec = env_spec(config.env_id, env)
    learner = SACLearner(spec.obs_dim, spec.action_dim, config)
    buffer = ReplayBuffer(
        min(config.buffer_size, config.total_steps), spec.obs_dim, spec.action_dim, config.seed
    )
    rng = np.random.default_rng(config.seed)
    _write_json(os.path.join(run_dir, "config.json"), config.to_dict())
    logging.info(
        "tfsac %s: %s, obs_dim=%d, action_dim=%d, run_dir=%s",
        __version__,
        config.env_id,
        spec.obs_dim,
        spec.action_dim,
        run_dir,
    )

    evaluations = []
    recent_returns = collections.deque(maxlen=10)
    episode_return, episode_length, episodes = 0.0, 0, 0
    metrics = None
    start = time.perf_counter()
    learning_start_time = None
    last_log_time, last_log_step = start, 0

    obs, _ = env.reset(seed=config.seed)
    for step in range(1, config.total_steps + 1):
        if step <= config.learning_starts:
            unit_action = rng.uniform(-1.0, 1.0, spec.action_dim).astype(np.float32)
        else:
            unit_action = learner.act(np.asarray(obs, np.float32)[None])[0]
        action = unit_to_bounds(unit_action, spec.action_low, spec.action_high)
        next_obs, reward, terminated, truncated, _ = env.step(action)
        buffer.add(obs, unit_action, reward, next_obs, terminated)
        episode_return += float(reward)
        episode_length += 1
        if terminated or truncated:
            recent_returns.append(episode_return)
            episodes += 1
            episode_return, episode_length = 0.0, 0
            obs, _ = env.reset()
        else:
            obs = next_obs

        if step > config.learning_starts and step % config.train_freq == 0:
            if learning_start_time is None:
                learning_start_time, learning_start_step = time.perf_counter(), step
            metrics = learner.update(buffer.sample(config.batch_size, config.gradient_steps))

        if step % config.eval_every == 0 or step == config.total_steps:
            returns = _evaluate(learner, eval_env, spec, config.eval_episodes, config.seed + 100)
            evaluations.append(
                {
                    "step": step,
                    "return_mean": float(np.mean(returns)),
                    "return_std": float(np.std(returns)),
                }
            )
            logging.info(
                "eval step %d: return %.1f +- %.1f over %d episodes",
                step,
                np.mean(returns),
                np.std(returns),
                len(returns),
            )

        if step % config.log_every == 0:
            now = time.perf_counter()
            record = {
                "step": step,
                "episodes": episodes,
                "episode_return": float(np.mean(recent_returns)) if recent_returns else None,
                "env_steps_per_s": (step - last_log_step) / (now - last_log_time),
            }
            if metrics is not None:
                record.update({k: float(v) for k, v in metrics.items()})
            last_log_time, last_log_step = now, step
            logging.info(
                "step %d/%d | episodes %d | return %s | %.0f steps/s%s",
                step,
                config.total_steps,
                episodes,
                "-" if record["episode_return"] is None else f"{record['episode_return']:.1f}",
                record["env_steps_per_s"],
                "".join(
                    f" | {k} {record[k]:.4g}"
                    for k in ("critic_loss", "actor_loss", "alpha", "entropy")
                    if k in record
                ),
            )
            if on_log is not None:
                on_log(record)

    end = time.perf_counter()
    wall_time = end - start
    env.close()
    eval_env.close()

    final = evaluations[-1]
    summary = {
        "env": config.env_id,
        "seed": config.seed,
        "total_steps": config.total_steps,
        "episodes": episodes,
        "eval_return_mean": final["return_mean"],
        "eval_return_std": final["return_std"],
        "eval_episodes": config.eval_episodes,
        "evaluations": evaluations,
        "wall_time_s": wall_time,
        "env_steps_per_s": config.total_steps / wall_time,
        "learning_env_steps_per_s": (
            (config.total_steps - learning_start_step + 1) / (end - learning_start_time)
            if learning_start_time is not None
            else None
        ),
        "saved_model_path": None,
        "tfsac_version": __version__,
    }
    saved_model_path = None
    if export:
        metadata = {
            "tfsac_version": __version__,
            "env_id": config.env_id,
            "training_steps": config.total_steps,
            "observation_dim": spec.obs_dim,
            "observation_space": spec.observation_space,
            "action_space": spec.action_space,
            "action_low": list(spec.action_low),
            "action_high": list(spec.action_high),
            "eval_return_mean": final["return_mean"],
        }
        saved_model_path = os.path.abspath(
            export_policy(learner.actor, spec, config.export_dir, model_name, metadata)
        )
        summary["saved_model_path"] = saved_model_path
        logging.info("exported SavedModel to %s", saved_model_path)
    _write_json(os.path.join(run_dir, SUMMARY_FILE), summary)
    logging.info(
        "done: eval return %.1f +- %.1f, %.1fs, %.0f env steps/s; summary in %s",
        final["return_mean"],
        final["return_std"],
        wall_time,
        summary["env_steps_per_s"],
        run_dir,
    )
    return TrainResult(learner, spec, buffer, run_dir, saved_model_path, summary)


__all__ = ["TrainResult", "train", "TfsacError"]
