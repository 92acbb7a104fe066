"""Running mean and variance from batches (Chan et al.'s parallel update), shared by the
observation normaliser (inside the networks) and the return normaliser (on the host)."""

from __future__ import annotations


def combine_moments(count, mean, variance, n, batch_mean, batch_var):
    """The running (count, mean, variance) with a batch's (n, mean, variance) folded in (Chan
    et al.'s parallel update), in float64, on numpy arrays or TF tensors alike. With count 0
    it is the batch's own: the initial variance of 1 is a neutral start, not data."""
    total = count + n
    delta = batch_mean - mean
    new_mean = mean + delta * n / total
    new_var = (count * variance + n * batch_var + delta**2 * count * n / total) / total
    return total, new_mean, new_var
