"""The gradient steps a run owes and the compiled calls that pay them, non-finite values refused."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable, Dict, Iterator, Optional

import numpy as np

from tfsac.algorithm.learner import SACLearner
from tfsac.config import SACConfig
from tfsac.config.schedules import parse_schedule
from tfsac.data.replay import ReplayBuffer
from tfsac.data.return_normalizer import ReturnNormalizer
from tfsac.errors import Fault
from tfsac.run.progress import Stopwatch

OFFLINE_CALL = 250  # updates per compiled call in offline-only training


class NonFiniteError(Fault):
    """A NaN or Inf appeared in a loss, a parameter, an observation or a reward."""


class Updates:
    """Owed updates (whole calls only: a checkpoint keeps what is still owed), the
    learning-rate factor of the current step, and the metrics of the last call."""

    def __init__(
        self,
        learner: SACLearner,
        buffer: ReplayBuffer,
        config: SACConfig,
        last_good: Callable[[], Optional[str]],
    ):
        self.learner, self.buffer, self.config = learner, buffer, config
        self.last_good = last_good  # the newest checkpoint, named by the errors
        self.lr_schedule = parse_schedule(config.lr_schedule)
        self.lr_factor = 1.0
        self.owed = 0
        self.metrics: Optional[Dict[str, float]] = None
        self.count = 0  # updates the learner has run, over all sessions
        self.returns = (
            ReturnNormalizer(config.gamma, config.return_bound or 0.0)
            if config.normalize_rewards
            else None
        )

    def nonfinite(self, what: str) -> NonFiniteError:
        latest = self.last_good() or "none"
        return NonFiniteError(f"{what}; training stopped, last good checkpoint: {latest}")

    def observe_returns(self, discounted_returns: Optional[np.ndarray]) -> None:
        if self.returns is not None and discounted_returns is not None:
            self.returns.update(discounted_returns)

    def load_state(self, state: Dict, step: int) -> None:
        self.owed = state["owed_updates"]
        # Progress rows before this session's first update repeat them, as an unbroken run's.
        self.metrics = state.get("last_metrics")
        if self.metrics is not None:
            self.learner.sac.hold_actor_metrics(self.metrics)
        if self.returns is not None:  # a resume keeps normalize_rewards (resume_changes)
            self.returns.load_state(state["return_statistics"])
        # The checkpoint holds the rates of its step; the config of this run decides them.
        self.lr_factor = self.lr_schedule(step, self.config.total_steps)
        self.learner.set_learning_rate_factor(self.lr_factor)

    def state(self) -> Dict:
        state = {"owed_updates": self.owed, "last_metrics": self.metrics}
        if self.returns is not None:
            state["return_statistics"] = self.returns.state()
        return state

    def start(self) -> int:
        self.count = self.learner.update_count
        return self.count

    def pay(
        self,
        step: int,
        clock: Stopwatch,
        per_call: Optional[int],
        observation: Optional[np.ndarray],
        observed: Optional[np.ndarray],
    ) -> Iterator[Optional[np.ndarray]]:
        """Runs the owed updates in calls of `per_call` (None: all in one), yielding each call's
        actions for `observation`, `observed` normalised first. Compilations are off the clock:
        it starts after the first call, and a shorter last call is paused."""
        at_end = step >= self.config.total_steps
        while self.owed and (per_call is None or self.owed >= per_call or at_end):
            count = self.owed if per_call is None else min(per_call, self.owed)
            short = per_call is not None and count < per_call
            with clock.paused() if short else nullcontext():
                action = self._call(count, step, observation, observed)
            observed = None
            if not clock.running:
                clock.start()
            self.owed -= count
            self.count += count
            yield action
        if observed is not None:
            self.learner.observe(observed)
        if at_end:  # no next call whose loss would show a non-finite critic
            self.check_finite(step)

    def pay_offline(self, clock: Stopwatch, total: int, every: int) -> None:
        """Up to OFFLINE_CALL updates towards `total`, ending at the next multiple of `every`."""
        before = self.count
        self.owed = min(OFFLINE_CALL, total - before, every - before % every)
        for _ in self.pay(0, clock, self.owed, None, None):
            pass

    def _call(self, gradient_steps: int, step: int, observation, observed) -> Optional[np.ndarray]:
        """Runs `gradient_steps` updates; with `observation`, returns the next actions too."""
        factor = self.lr_schedule(step, self.config.total_steps)
        # The rates are variables read by the compiled update: set them only when they move.
        if abs(factor - self.lr_factor) > 1e-3 * max(self.lr_factor, 1e-12):
            self.learner.set_learning_rate_factor(factor)
            self.lr_factor = factor
        if self.returns is not None:
            self.learner.set_reward_divisor(self.returns.divisor)
        batches = self.buffer.sample_packed(self.config.batch_size, gradient_steps)
        if observation is None:
            self.metrics, action = self.learner.update(batches, observed), None
        else:
            self.metrics, action = self.learner.update_and_act(batches, observation, observed)
        if not self.metrics["finite"]:
            self.check_finite(step, self.metrics, flagged=True)
        return action

    def check_finite(self, step: int, metrics=None, flagged: bool = False) -> None:
        """Raises naming the metrics and variables that hold a NaN or Inf."""
        names = self.learner.nonfinite_quantities(metrics)
        if names or flagged:
            names = ", ".join(names[:6]) or "the update"
            raise self.nonfinite(f"non-finite values at step {step} in: {names}")
