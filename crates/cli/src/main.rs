//! The `shellvisor` command. Everything lives in the library part of this
//! crate; this file only maps its outcome to an exit code.

fn main() -> std::process::ExitCode {
    match shellvisor_cli::main_with_args(std::env::args_os()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("shellvisor: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}
