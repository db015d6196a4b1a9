"""Process scans shared by the protocol tests."""

import os


def processes_with_env(needle: str) -> list[tuple[int, str]]:
    """Live (non-zombie) processes whose environment holds `needle` (NAME=value)."""
    found = []
    want = needle.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if want in environ and state != "Z":
            found.append((int(name), cmdline))
    return found
