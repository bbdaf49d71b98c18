"""One exception type for bad input, so callers can tell data problems from bugs."""


class DataError(ValueError):
    """Malformed or unverifiable input; the message names the file, row or field."""
