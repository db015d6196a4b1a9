//! What several of the binary's test files share.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

/// The `shellvisor` binary, run as the tests' user or, with `unprivileged`,
/// as uid 65534 when the tests run as root (`setpriv` execs it in place, so
/// the child's pid is the binary's).
pub(crate) fn shellvisor_as(unprivileged: bool) -> Command {
    let binary = env!("CARGO_BIN_EXE_shellvisor");
    if unprivileged && rustix::process::getuid().is_root() {
        let mut command = Command::new("setpriv");
        command.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--",
            binary,
        ]);
        command.env("HOME", "/tmp");
        command
    } else {
        Command::new(binary)
    }
}

/// Live (non-zombie) processes whose environment holds `needle`
/// (`NAME=value`), with their command lines.
pub(crate) fn marked(needle: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if !environ.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, r)| r.trim_start().chars().next());
        if state == Some('Z') || state.is_none() {
            continue;
        }
        let cmd = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        found.push((pid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
    }
    found
}
