"""One exception type for bad input, so callers can tell data problems from bugs."""
from __future__ import annotations

import os
import sys
from typing import Callable, TypeVar

T = TypeVar("T")


class DataError(ValueError):
    """Malformed or unverifiable input; the message names the file, row or field."""


class ServiceError(DataError, RuntimeError):
    """A server the run depends on cannot be used (refused, unreachable, wrong route): the
    message names its address. A RuntimeError too, for callers that catch a failed reader."""


def report_data_errors(main: Callable[[], T]) -> T:
    """Run a command's body; bad input (DataError), an unusable server (ServiceError) and a
    disk error (OSError: full, read-only, a file where a folder should be) become one line
    on stderr naming the key, address or file, and exit status 2, not a traceback
    (CMC_TRACEBACK=1 shows it). Shared by run.py and the command line."""
    try:
        return main()
    except (DataError, OSError) as exc:
        if os.environ.get("CMC_TRACEBACK"):
            raise
        print(f"cmc: error: {_one_line(exc)}", file=sys.stderr)
        sys.exit(2)


def _one_line(exc: BaseException) -> str:
    if isinstance(exc, OSError) and not isinstance(exc, DataError) and exc.strerror:
        where = " -> ".join(str(name) for name in (exc.filename, exc.filename2) if name is not None)
        return f"{where}: {exc.strerror}" if where else exc.strerror
    return " ".join(str(exc).split("\n"))
