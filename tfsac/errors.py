"""tfsac's errors: refusals of what a user asked, and faults met while running."""


class TfsacError(Exception):
    """A user-facing error: scripts print its message as one line and exit non-zero.

    Raised as such, it is a refusal of what a user asked. Only the checking layer raises
    those (the config's rules, the start's probes, each entry point's own check); the code
    below it trusts what it is handed and raises a `Fault` for what it meets while running.
    """

    # Raised while TF traces a function (a variant's check inside the update): AutoGraph
    # would re-raise it with its frames of "user code" prepended, not one line.
    ag_pass_through = True


class Fault(TfsacError):
    """Something met while running that no check at the start could have seen: a file that
    fails to read or write, a non-finite value, a lost Ray node, an env that breaks its
    own space mid-run. One line too, and a non-zero exit."""


def first_line(error: Exception) -> str:
    """The first line of an exception's message (TF's are many lines), or its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
