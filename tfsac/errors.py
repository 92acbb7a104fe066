"""The error type for user mistakes (bad config, unknown env, unwritable paths)."""


class TfsacError(Exception):
    """A user-facing error: scripts print its message as one line and exit non-zero."""


def first_line(error: Exception) -> str:
    """The first line of an exception's message (TF's are many lines), or its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
