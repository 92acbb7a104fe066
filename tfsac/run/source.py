"""Where a run's env steps come from: the trainer's interface, its local implementation, and
the registry where tfsac.scale's env runners on Ray sign in."""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Tuple

import numpy as np

from tfsac.data.collector import Collector, Transitions

_ENV_RUNNERS: Dict[str, Callable] = {}


def register_env_runners(check: Callable, make: Callable) -> None:
    """`check(config)`: the start check (TF-free); `make(config, env_fn, spec, learner,
    schedule, actor_fn, resumes)`: the source."""
    _ENV_RUNNERS.update(check=check, make=make)


def env_runners(part: str) -> Optional[Callable]:
    """The registered `check` or `make`; None before tfsac.scale registers them."""
    return _ENV_RUNNERS.get(part)


class CollectionSource(Protocol):
    """What the trainer needs from a source of env steps. `chunks` yields (transitions, env
    steps) until total_steps; `after_updates` gets the update count and the actions the
    update call picked; `state` (JSON) and `snapshot` go into a checkpoint, `load_state`
    takes them back; `stats` gives the `stats_fields` progress columns since its last call."""

    # Updates per compiled call; None: a chunk's owed in one (acting where `observation` is set).
    updates_per_call: Optional[int] = None

    @property
    def observation(self) -> Optional[np.ndarray]: ...

    def start(self, loop, updates: int) -> bool:
        """Begins collecting at `loop.step`; returns whether it continues restored episodes."""

    def chunks(self, loop) -> Iterator[Tuple[Transitions, int]]: ...

    def after_updates(self, updates: int, next_action: Optional[np.ndarray]) -> None: ...

    def after_chunk(self, phase_ended: bool, updates_due: int) -> None: ...

    def state(self) -> Dict[str, Any]: ...

    def snapshot(self) -> Optional[bytes]: ...

    def load_state(self, state: Dict[str, Any], snapshot: Optional[bytes]) -> None: ...

    def stats_fields(self) -> List[str]:
        return []

    def stats(self) -> Optional[Dict[str, Optional[float]]]:
        return None

    def close(self) -> None: ...


class LocalSource(CollectionSource):
    """Env copies in this process, one vector step per chunk: uniform random actions in
    the warm-up, else those the last update call picked, else the learner's `act`."""

    def __init__(self, collector: Collector, learner, schedule, seed: int, total_steps: int):
        self.collector, self.learner, self.schedule = collector, learner, schedule
        self.seed, self.total_steps = seed, total_steps
        # Checkpointed: acting again after a resume would draw the action RNG twice.
        self.next_action: Optional[np.ndarray] = None

    @property
    def observation(self) -> Optional[np.ndarray]:
        return self.collector.observation

    def start(self, loop, updates: int) -> bool:
        # A resumed run continues the checkpoint's episodes where its envs pickle.
        return self.collector.start(seed=self.seed + loop.episodes)

    def chunks(self, loop) -> Iterator[Tuple[Transitions, int]]:
        while loop.step < self.total_steps:
            if self.schedule.is_warmup(loop.step):
                action = None  # uniform random
            elif self.next_action is not None:
                action, self.next_action = self.next_action, None
            else:
                action = self.learner.act(self.collector.observation)
            yield self.collector.step(action), self.collector.num_envs

    def after_updates(self, updates: int, next_action: Optional[np.ndarray]) -> None:
        self.next_action = next_action

    def after_chunk(self, phase_ended: bool, updates_due: int) -> None:
        if not updates_due and self.schedule.noise_reset_due(phase_ended):
            self.learner.reset_noise()

    def state(self) -> Dict[str, Any]:
        action = None if self.next_action is None else self.next_action.tolist()
        return {**self.collector.state(), "next_action": action}

    def snapshot(self) -> Optional[bytes]:
        return self.collector.snapshot()

    def load_state(self, state: Dict[str, Any], snapshot: Optional[bytes]) -> None:
        if state.get("next_action") is not None:
            self.next_action = np.asarray(state["next_action"], np.float32)
        self.collector.load_state(state, snapshot)

    def close(self) -> None:
        self.collector.close()
