"""When the updates run: warm-up, collection phases and the gradient steps they owe."""

from __future__ import annotations

import dataclasses
from typing import Dict, Tuple

from tfsac.config import SACConfig


def crossed(step_before: int, step: int, every: int) -> bool:
    """Whether a multiple of `every` lies in (step_before, step]; never for every <= 0."""
    return every > 0 and step // every > step_before // every


# The schedule's state, saved in checkpoints under these names.
STATE = ("pending_env_steps", "rollout_steps", "rollout_episodes")


@dataclasses.dataclass
class UpdateSchedule:
    """After each phase of `train_freq` env steps (or `episodes_per_rollout` episodes) the
    `gradient_steps` owed (-1: one per env step) run; steps count every env copy."""

    learning_starts: int
    train_freq: int = 1
    gradient_steps: int = 1
    episodes_per_rollout: int = 0
    num_envs: int = 1
    use_sde: bool = False
    sde_sample_freq: int = -1
    use_sde_at_warmup: bool = False
    # The state (STATE):
    pending_env_steps: int = 0  # learning-phase env steps not yet paid for in updates
    rollout_steps: int = 0  # env steps of the current collection phase
    rollout_episodes: int = 0  # episodes finished in it

    @classmethod
    def from_config(cls, config: SACConfig) -> UpdateSchedule:
        settings = [f.name for f in dataclasses.fields(cls) if f.name not in STATE]
        return cls(**{name: getattr(config, name) for name in settings})

    def is_warmup(self, step: int) -> bool:
        """Whether the env step from `step` takes uniform random actions."""
        return step + self.num_envs <= self.learning_starts and not self.use_sde_at_warmup

    def after_env_step(
        self, step_before: int, step: int, finished_episodes: int
    ) -> Tuple[bool, int]:
        """Books the env steps in (step_before, step] and their finished episodes; returns
        whether a collection phase ended and the gradient steps now due."""
        self.rollout_steps += step - step_before
        self.rollout_episodes += finished_episodes
        learning_steps = step - max(step_before, self.learning_starts)
        if learning_steps > 0:
            self.pending_env_steps += learning_steps
        if self.episodes_per_rollout:
            ended = self.rollout_episodes >= self.episodes_per_rollout
            collected = self.pending_env_steps if ended else 0
            if ended:
                self.pending_env_steps = 0
            due = self.steps_per_phase(collected) if collected else 0
        else:
            phases, self.pending_env_steps = divmod(self.pending_env_steps, self.train_freq)
            due = phases * self.steps_per_phase(self.train_freq)
            # Warm-up phases end too (gSDE draws new noise at each phase's start).
            ended = due > 0 or (
                step <= self.learning_starts and crossed(step_before, step, self.train_freq)
            )
        if ended:
            self.rollout_steps = self.rollout_episodes = 0
        return ended, due

    def steps_per_phase(self, collected: int) -> int:
        """Gradient steps owed for a collection phase of `collected` env steps."""
        return collected if self.gradient_steps == -1 else self.gradient_steps

    def noise_reset_due(self, phase_ended: bool) -> bool:
        """gSDE without an update: new noise at a phase's start and every `sde_sample_freq`."""
        steps = self.rollout_steps
        return self.use_sde and (
            phase_ended or crossed(steps - self.num_envs, steps, self.sde_sample_freq)
        )

    def state(self) -> Dict[str, int]:
        return {name: getattr(self, name) for name in STATE}

    def load_state(self, state: Dict[str, int]) -> None:
        for name in STATE:
            setattr(self, name, state[name])
