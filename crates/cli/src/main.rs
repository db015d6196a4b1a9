//! The `shellvisor` command. Everything lives in the library part of this
//! crate; this file only maps its outcome to an exit code.

fn main() -> std::process::ExitCode {
    match shellvisor_cli::main_with_args(std::env::args_os()) {
        Ok(code) => code,
        Err(err) if shellvisor_cli::is_broken_pipe(&err) => {
            std::process::ExitCode::from(shellvisor_cli::BROKEN_PIPE_EXIT)
        }
        Err(err) => {
            use std::io::Write;
            // A closed stderr is no reason to panic.
            let _ = writeln!(std::io::stderr(), "shellvisor: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}
