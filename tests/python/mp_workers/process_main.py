"""How a worker process of a multi-process test runs its main()."""

from __future__ import annotations

import os
import sys
import traceback


def run_exiting_at_once_on_error(main) -> None:
    """Runs `main()`; on any error prints it and exits with 1 at once:
    jax.distributed's exit handler would wait for the other processes, which
    are blocked at a barrier waiting for this one."""
    try:
        main()
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(1)
