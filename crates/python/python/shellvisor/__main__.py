"""`python -m shellvisor ...` runs the bundled binary."""

import os
import sys

from ._binary import find_binary

if __name__ == "__main__":
    binary = find_binary()
    os.execv(binary, [binary, *sys.argv[1:]])
