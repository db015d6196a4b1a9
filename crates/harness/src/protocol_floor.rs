//! The shell protocol without the runtime: the same bash, wrapper, command
//! file, per-run output FIFO and status records as a Shell actor uses
//! (`shellvisor_process`), driven by one blocking loop with no actors, tasks
//! or hops. Its round trip is the floor the runtime's warm path can reach;
//! the gap to a bare pipe is what the protocol's safety costs inside bash.

use std::io::Read;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use shellvisor_process::ChildProcess;
use shellvisor_process::FifoPair;
use shellvisor_process::GroupGuard;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::ShellFiles;
use shellvisor_process::ShellRecord;
use shellvisor_process::ShellSpawnSpec;
use shellvisor_process::SpawnedShell;
use shellvisor_process::StatusParser;
use shellvisor_process::spawn_shell;

use crate::samples::Samples;

/// A warm bash driven with shellvisor's shell protocol by a blocking loop.
#[derive(Debug)]
pub struct ProtocolPipe {
    // Dropping the guard kills the shell's group.
    _group: GroupGuard,
    _child: ChildProcess,
    /// bash's own stdout and stderr (kept open: it writes nothing here).
    _output: std::os::fd::OwnedFd,
    stdin: std::fs::File,
    status: std::fs::File,
    files: ShellFiles,
    parser: StatusParser,
    runs: u64,
    /// The runs' output FIFOs, used in turn as the runtime does.
    fifos: FifoPair,
    _dir: tempfile::TempDir,
}

impl ProtocolPipe {
    /// Starts the shell (no cgroup) and waits until it is ready.
    ///
    /// # Errors
    /// When bash cannot be started or does not report.
    pub fn start() -> std::io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let spec = ShellSpawnSpec {
            program: PathBuf::from("bash"),
            env: std::env::vars_os().collect(),
            cwd: std::env::temp_dir(),
            containment: None,
            nice: 0,
        };
        let registry: Arc<ProcessRegistry> = ProcessRegistry::new();
        let SpawnedShell {
            child,
            group,
            stdin,
            status,
            output,
        } = spawn_shell(&spec, &registry)?;
        let files = ShellFiles::create(dir.path())?;
        let mut pipe = Self {
            _group: group,
            _child: child,
            _output: output,
            stdin: std::fs::File::from(stdin),
            status: std::fs::File::from(status),
            files,
            parser: StatusParser::new(),
            runs: 0,
            fifos: FifoPair::new(dir.path()),
            _dir: dir,
        };
        let line = pipe.files.write_init("i", None, true)?;
        pipe.stdin.write_all(&line)?;
        pipe.wait_status("i")?;
        Ok(pipe)
    }

    /// `count` round trips of `command`, each with its own FIFO, as the
    /// runtime does.
    ///
    /// # Errors
    /// When the shell stops answering.
    pub fn round_trips_of(&mut self, command: &str, count: usize) -> std::io::Result<Samples> {
        let mut samples = Samples::default();
        let mut sink = vec![0u8; 64 * 1024];
        for _ in 0..count {
            let started = Instant::now();
            self.runs += 1;
            let nonce = format!("n{}", self.runs);
            // As the runtime does: the run takes the FIFO made ready during
            // the previous run, and the other one is made ready (its read
            // end reused once it read end-of-file, always here) while bash
            // runs this one. Read once the run reported, as the runtime
            // reads a run that reports within `WATCH_AFTER`.
            let fifo = self.fifos.take()?;
            self.files.write_run(
                &shellvisor_process::RunText {
                    nonce: &nonce,
                    marker: "floor.1",
                    command,
                    cwd: None,
                    env: &[],
                    env_record: false,
                    confinement: None,
                },
                self.fifos.taken_path(),
            )?;
            self.stdin.write_all(self.files.run_line())?;
            self.fifos.prepare()?;
            self.wait_status(&nonce)?;
            loop {
                match fifo.read_now(&mut sink) {
                    Ok(0) => {
                        self.fifos.give_back(fifo);
                        break;
                    }
                    Ok(_) => {}
                    Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(err) => return Err(err),
                }
            }
            samples.push(started.elapsed());
        }
        Ok(samples)
    }

    fn wait_status(&mut self, nonce: &str) -> std::io::Result<()> {
        let mut buf = [0u8; 8192];
        loop {
            let n = self.status.read(&mut buf)?;
            if n == 0 {
                return Err(std::io::Error::other("bash exited"));
            }
            let records = self.parser.push(&buf[..n]).map_err(std::io::Error::other)?;
            if records
                .iter()
                .any(|r| matches!(r, ShellRecord::Status(s) if s.nonce == nonce))
            {
                return Ok(());
            }
        }
    }
}
