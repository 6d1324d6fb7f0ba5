"""Conversions killed part way, for the resume and crash tests: a child
process runs `cairn.convert` with a `progress` callback that kills it
(SIGKILL, as an OOM kill or a preemption would) once it has copied a given
number of arrays. Nothing in cairn itself kills a process."""

import json
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent("""
    import json
    import os
    import signal
    import sys

    import cairn

    options = json.loads(sys.argv[1])
    after = options.pop("kill_after_arrays")
    source, dest = options.pop("source"), options.pop("dest")

    def progress(bytes_done, bytes_total, arrays_done, arrays_total):
        if arrays_done >= after:
            os.kill(os.getpid(), signal.SIGKILL)

    cairn.convert(source, dest, progress=progress, **options)
    print("finished")
""")


def convert_killed_after_arrays(source, dest, arrays, timeout=300, **options):
    """`cairn.convert(source, dest, **options)` in a child process killed
    once `arrays` arrays are copied; the finished subprocess."""
    spec = dict(options, source=str(source), dest=str(dest), kill_after_arrays=arrays)
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    return subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True,
                          timeout=timeout, env=env)
