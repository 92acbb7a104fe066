"""The two kinds of step every part of the update takes: a gradient step and a Polyak step."""

from __future__ import annotations


def polyak_update(target_variables, source_variables, tau: float):
    """target <- tau * source + (1 - tau) * target, variable by variable."""
    for target, source in zip(target_variables, source_variables, strict=True):
        target.assign(tau * source + (1.0 - tau) * target)


def apply_gradients(optimizer, tape, loss, variables) -> None:
    optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables, strict=True))
