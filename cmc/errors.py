"""One exception type for bad input, so callers can tell data problems from bugs."""
from __future__ import annotations

import os
import sys
from typing import Callable, TypeVar

T = TypeVar("T")


class DataError(ValueError):
    """Malformed or unverifiable input; the message names the file, row or field."""


def report_data_errors(main: Callable[[], T]) -> T:
    """Run a command's body; bad input (DataError) becomes one line on stderr and exit
    status 2, not a traceback (CMC_TRACEBACK=1 shows it). Shared by run.py and the scripts."""
    try:
        return main()
    except DataError as exc:
        if os.environ.get("CMC_TRACEBACK"):
            raise
        print(f"cmc: error: {exc}", file=sys.stderr)
        sys.exit(2)
