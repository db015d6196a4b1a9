"""Where the `shellvisor` binary is: `$SHELLVISOR_BIN`, the one the wheel
installed beside this package's environment, or the first on `PATH`."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig


def find_binary() -> str:
    given = os.environ.get("SHELLVISOR_BIN")
    if given:
        return given
    candidates = [sysconfig.get_path("scripts"), os.path.join(sys.prefix, "bin")]
    user = sysconfig.get_path("scripts", scheme=f"{os.name}_user") if os.name == "posix" else None
    if user:
        candidates.append(user)
    for folder in candidates:
        path = os.path.join(folder, "shellvisor")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    found = shutil.which("shellvisor")
    if found:
        return found
    raise FileNotFoundError(
        "the shellvisor binary was not found: install the wheel (pip install shellvisor), "
        "put shellvisor on PATH, or set SHELLVISOR_BIN"
    )
