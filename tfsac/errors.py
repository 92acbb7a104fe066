"""The error type for user mistakes (bad config, unknown env, unwritable paths)."""


class TfsacError(Exception):
    """A user-facing error: scripts print its message as one line and exit non-zero."""
