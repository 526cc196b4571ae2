"""The one error type clusters/ raises for anything a user can fix or must know about."""


class ClusterError(Exception):
    """A failure with a message meant for a person: the CLI prints it alone, without a traceback."""
