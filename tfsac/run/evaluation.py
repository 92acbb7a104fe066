"""Deterministic (or stochastic) evaluation episodes on a separate env."""

from __future__ import annotations

import contextlib
import os
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import gymnasium as gym
import numpy as np
from absl import logging

from tfsac.data.envs import Flattened, needs_flattening, unit_to_bounds
from tfsac.errors import Fault
from tfsac.logs import progress_bar
from tfsac.run.rendering import RenderedEnv

# Env copies an evaluation runs side by side (more episodes queue on them).
EVAL_COPIES = 10


def episode_seeds(seed: Optional[int], episodes: int) -> List[Optional[int]]:
    """The reset seed of each of an evaluation's episodes (None for all: unseeded)."""
    if seed is None:
        return [None] * episodes
    return [int(s) for s in np.random.SeedSequence(seed).generate_state(episodes) % 2**31]


def run_episodes(
    envs: Union[gym.Env, Sequence[gym.Env]],
    policy: Callable[[np.ndarray], np.ndarray],
    episodes: int,
    seed: Optional[int] = None,
    successes: Optional[List] = None,
) -> List[float]:
    """The returns of `episodes` episodes, in order, on one env or copies run side by side (one
    batched `policy` call per step), episode i seeded `episode_seeds(seed, episodes)[i]`;
    fills `successes` with each last `info["is_success"]` (or `"success"`), else None."""
    envs = list(envs) if isinstance(envs, (list, tuple)) else [envs]
    envs = [Flattened(e) if needs_flattening(e.observation_space) else e for e in envs]
    seeds, returns = episode_seeds(seed, episodes), [0.0] * episodes
    success: List[Optional[float]] = [None] * episodes
    running: Dict[int, Tuple[int, np.ndarray]] = {}  # copy -> (episode, observation)
    queue = iter(range(episodes))

    def start(copy: int) -> None:
        episode = next(queue, None)
        if episode is not None:
            observation, _ = envs[copy].reset(seed=seeds[episode])
            running[copy] = (episode, observation)

    for copy in range(min(len(envs), episodes)):
        start(copy)
    width = len(running)
    while running:
        copies = sorted(running)
        rows = [np.asarray(running[c][1], np.float32) for c in copies]
        # Padded to one batch size: an XLA-compiled policy compiles once, and a row's
        # action does not depend on how many episodes are still running.
        rows += rows[:1] * (width - len(rows))
        actions = policy(np.stack(rows))
        for copy, action in zip(copies, actions[: len(copies)], strict=True):
            episode = running[copy][0]
            observation, reward, terminated, truncated, info = envs[copy].step(action)
            returns[episode] += float(reward)
            del running[copy]
            if terminated or truncated:
                # gymnasium-robotics' Fetch tasks say is_success, its mazes success.
                key = next((k for k in ("is_success", "success") if k in info), None)
                if key is not None:
                    success[episode] = float(info[key])
                start(copy)
            else:
                running[copy] = (episode, observation)
    if successes is not None:
        successes[:] = success
    return returns


def success_rate(successes: Sequence[Optional[float]]) -> Optional[float]:
    """The mean of the episodes' `is_success`; None unless every episode reported one."""
    if not successes or any(s is None for s in successes):
        return None
    return float(np.mean(successes))


def record_video(
    env_id: str,
    policy: Callable[[np.ndarray], np.ndarray],
    folder: str,
    name_prefix: str,
    episodes: int = 1,
    seed: Optional[int] = None,
    env_kwargs: Optional[dict] = None,
    progress: Optional[bool] = None,
    stop: Optional[Callable[[], bool]] = None,
) -> List[float]:
    """Writes `<folder>/<name_prefix>-episode-<i>.mp4` of `episodes` episodes (tfsac.run.rendering);
    returns their returns. `progress`: a bar of frames (default: on a terminal). `stop`: polled
    every frame; once true, the video being recorded is removed and no other starts."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise Fault(f"cannot create the video folder {folder!r}: {e.strerror}") from None
    returns, seeds = [], episode_seeds(seed, episodes)  # the starts run_episodes gives them
    with RenderedEnv(env_id, env_kwargs) as env:
        # The TimeLimit's steps plus the reset's frame, when the env has a limit.
        length = env.max_episode_steps + 1 if env.max_episode_steps else None
        for i in range(episodes):
            path = os.path.join(folder, f"{name_prefix}-episode-{i}.mp4")
            logging.info("recording %s episode %d to %s", env_id, i, path)
            start = time.perf_counter()
            with progress_bar(length, 0, progress, "frame", desc="video", leave=False) as bar:
                obs = env.reset(path, seed=seeds[i])
                bar.update()
                total, done = 0.0, False
                while not done and not (stop is not None and stop()):
                    action = policy(np.asarray(obs, np.float32)[None])[0]
                    obs, reward, terminated, truncated = env.step(action)
                    bar.update()
                    total += reward
                    done = terminated or truncated
                written = env.end_video()
            if not done:  # stopped: half an episode is no video of the policy
                with contextlib.suppress(OSError):
                    os.remove(path)
                logging.warning("stopped recording %s at a stop request; removed it", path)
                break
            seconds = time.perf_counter() - start
            logging.info(
                "wrote %s: %d frames in %.1f s (%.0f frames/s)",
                path,
                written,
                seconds,
                written / seconds,
            )
            returns.append(total)
    return returns


class Evaluator:
    """A run's evaluations: deterministic episodes on `env` and up to EVAL_COPIES - 1 copies
    from `make_env`, seeded as `seed()` says, and a video of every `video_every`-th one."""

    def __init__(
        self,
        env: gym.Env,
        learner,
        spec,
        config,
        videos_dir: str = "videos",
        make_env: Optional[Callable[[], gym.Env]] = None,
    ):
        self.env, self.learner, self.spec, self.config = env, learner, spec, config
        self.videos_dir = videos_dir
        self._make_env = make_env
        self._copies: List[gym.Env] = []  # made at the first evaluation
        # The trainer's SIGINT/SIGTERM flag: a video being recorded ends at once.
        self.stop_requested: Callable[[], bool] = lambda: False

    def envs(self) -> List[gym.Env]:
        if self._make_env is not None and not self._copies:
            count = min(self.config.eval_episodes, EVAL_COPIES) - 1
            self._copies = [self._make_env() for _ in range(count)]
        return [self.env, *self._copies]

    def policy(self, obs: np.ndarray) -> np.ndarray:
        unit = self.learner.act(obs, deterministic=True)
        return unit_to_bounds(unit, self.spec.action_low, self.spec.action_high)

    def seed(self, step: int, scheduled: bool) -> int:
        """seed + 100 + k for the k-th scheduled evaluation (one off it: the next one's k),
        by step, so that a continued run evaluates as one trained at once."""
        every = self.config.eval_every
        k = (step // every - (1 if scheduled else 0)) if every else 0
        return self.config.seed + 100 + max(0, k)

    def evaluate(self, step: int, count: int, scheduled: bool = True) -> Dict:
        cfg, seed, successes = self.config, self.seed(step, scheduled), []
        returns = run_episodes(self.envs(), self.policy, cfg.eval_episodes, seed, successes)
        mean, std = float(np.mean(returns)), float(np.std(returns))
        if cfg.video_every and (count + 1) % cfg.video_every == 0:
            record_video(
                cfg.env_id,
                self.policy,
                self.videos_dir,
                f"step-{step}",
                1,
                cfg.seed + 7,
                cfg.env_kwargs,
                progress=cfg.progress_bar,
                stop=self.stop_requested,
            )
        entry = dict(step=step, return_mean=mean, return_std=std, seed=seed, scheduled=scheduled)
        rate = success_rate(successes)
        if rate is not None:  # envs that report info["is_success"] (goal envs)
            entry["success_rate"] = rate
        logging.info(
            "eval step %d: return %.1f +- %.1f over %d episodes%s",
            step,
            mean,
            std,
            len(returns),
            "" if rate is None else f", success rate {rate:.2f}",
        )
        return entry

    def close(self) -> None:
        for env in [self.env, *self._copies]:
            env.close()
