"""The error nemeses raise for a fault that cannot be applied as asked (a user or plan mistake)."""

from clusters.errors import ClusterError


class NemesisError(ClusterError):
    """One clear sentence for a person: printed alone by the CLI, recorded as the step's error."""
