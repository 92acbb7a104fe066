"""The training loop's Python state, as checkpoints keep it, and a finished run's summary."""

from __future__ import annotations

import collections
import dataclasses
from typing import Dict, List, Optional

import numpy as np
from absl import logging

from tfsac import __version__


@dataclasses.dataclass
class LoopState:
    """The training loop's Python state; checkpoints save `to_dict()`."""

    step: int = 0
    episodes: int = 0
    recent_returns: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=10)
    )
    recent_lengths: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=10)
    )
    evaluations: List[Dict] = dataclasses.field(default_factory=list)
    wall_time_s: float = 0.0  # of the sessions before this one
    # Learning-phase throughput over all sessions, from each one's first update call.
    learning_steps: int = 0
    learning_time_s: float = 0.0
    resumes: int = 0  # sessions after the first (env runners seed from it)

    def record_episode(self, episode_return: float, length: int) -> None:
        self.recent_returns.append(episode_return)
        self.recent_lengths.append(length)
        self.episodes += 1

    def mean_recent_return(self) -> Optional[float]:
        return float(np.mean(self.recent_returns)) if self.recent_returns else None

    def mean_recent_length(self) -> Optional[float]:
        return float(np.mean(self.recent_lengths)) if self.recent_lengths else None

    def to_dict(self) -> Dict:
        state = dataclasses.asdict(self)
        state["recent_returns"] = list(self.recent_returns)
        state["recent_lengths"] = list(self.recent_lengths)
        return state

    @classmethod
    def from_dict(cls, state: Dict) -> LoopState:
        loop = cls(**{f.name: state[f.name] for f in dataclasses.fields(cls) if f.name in state})
        loop.recent_returns = collections.deque(state.get("recent_returns", []), maxlen=10)
        loop.recent_lengths = collections.deque(state.get("recent_lengths", []), maxlen=10)
        return loop


def run_summary(config, loop: LoopState, wall_time: float, learning_time: float, **paths) -> Dict:
    """summary.json of a finished run; `paths`: stop, resumed_from, checkpoint, saved_model_path."""
    final = loop.evaluations[-1]
    return {
        "env": config.env_id,
        "seed": config.seed,
        "total_steps": config.total_steps,
        "env_steps": loop.step,  # total_steps, or fewer where a callback stopped the run
        "stop": paths["stop"],
        "episodes": loop.episodes,
        "eval_return_mean": final["return_mean"],
        "eval_return_std": final["return_std"],
        # Goal envs only (info["is_success"]).
        **({"eval_success_rate": final["success_rate"]} if "success_rate" in final else {}),
        "eval_episodes": config.eval_episodes,
        "evaluations": loop.evaluations,
        "wall_time_s": wall_time,
        "env_steps_per_s": loop.step / wall_time,
        # From learning_starts on: acting, env steps and updates, evaluations excluded.
        "learning_env_steps_per_s": (
            loop.learning_steps / learning_time if loop.learning_steps else None
        ),
        "resumed_from": paths["resumed_from"],
        "checkpoint": paths["checkpoint"],
        "saved_model_path": paths["saved_model_path"],
        "tfsac_version": __version__,
    }


def log_summary(summary: Dict, run_dir: str) -> None:
    """The run's last line: its final evaluation, wall time, speed and summary's place."""
    final = summary["evaluations"][-1]
    rate = final.get("success_rate")
    logging.info(
        "done: eval return %.1f +- %.1f%s, %.1fs, %.0f env steps/s; summary in %s",
        final["return_mean"],
        final["return_std"],
        "" if rate is None else f" (success rate {rate:.2f})",
        summary["wall_time_s"],
        summary["env_steps_per_s"],
        run_dir,
    )
