"""`python -m cairn ARGS` runs the `cairn` command installed with the package."""

import os
import shutil
import sys
import sysconfig


def _find_cli() -> str | None:
    exe = "cairn.exe" if os.name == "nt" else "cairn"
    for scheme_dir in (sysconfig.get_path("scripts"),
                       sysconfig.get_path("scripts", f"{os.name}_user")):
        if scheme_dir:
            candidate = os.path.join(scheme_dir, exe)
            if os.access(candidate, os.X_OK):
                return candidate
    # A plain CMake build puts the binary next to the package's parent dir.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidate = os.path.join(os.path.dirname(here), "cli", exe)
    if os.access(candidate, os.X_OK):
        return candidate
    return shutil.which(exe)


def main() -> int:
    cli = _find_cli()
    if cli is None:
        print("cairn: the `cairn` command is not installed (pip install . installs it)",
              file=sys.stderr)
        return 127
    os.execv(cli, [cli, *sys.argv[1:]])
    return 127


if __name__ == "__main__":
    sys.exit(main())
