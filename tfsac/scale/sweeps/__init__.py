"""Sweeps on Ray Tune: a grid of flag values times seeds, or an Optuna search; a trial is a run."""
