//! The runtime's side of one shell's pipes and files.

use std::cell::Cell;
use std::collections::VecDeque;
use std::fs::File;
use std::fs::OpenOptions;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::path::PathBuf;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;

use crate::script;
use crate::status::ShellRecord;
use crate::status::StatusParser;

/// The files one shell reads: the command file (`c`) and the wrapper (`w`),
/// in the shell's private directory (its runs' output FIFOs are a
/// [`crate::FifoPair`] there). Files are opened once and rewritten in place
/// for every run.
#[derive(Debug)]
pub struct ShellFiles {
    command: RewrittenFile,
    wrapper: RewrittenFile,
    command_path: PathBuf,
    wrapper_path: PathBuf,
    init_output_path: PathBuf,
}

impl ShellFiles {
    /// Creates the files in `dir` (an existing private directory), mode 0600.
    ///
    /// # Errors
    /// When a file cannot be created.
    pub fn create(dir: &Path) -> io::Result<Self> {
        let open = |name: &str| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(dir.join(name))
        };
        Ok(Self {
            command: RewrittenFile::new(open("c")?),
            wrapper: RewrittenFile::new(open("w")?),
            command_path: dir.join("c"),
            wrapper_path: dir.join("w"),
            init_output_path: dir.join("i"),
        })
    }

    /// Writes the start-up script (it reports records for `nonce`) and returns
    /// the line that runs it.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_init(
        &self,
        nonce: &str,
        snapshot: Option<&Path>,
        env_record: bool,
    ) -> io::Result<Vec<u8>> {
        self.wrapper.rewrite(&script::init_script(
            nonce,
            &self.wrapper_path,
            snapshot,
            env_record,
        ))?;
        Ok(script::source_line(&self.wrapper_path))
    }

    /// Writes a session's init `text` to run in the shell (it reports
    /// records for `nonce`) and returns the line that runs it.
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn write_session_init(&self, text: &str, nonce: &str) -> io::Result<Vec<u8>> {
        self.command.rewrite(text.as_bytes())?;
        self.wrapper.rewrite(&script::session_init_script(
            nonce,
            &self.command_path,
            &self.init_output_path,
        ))?;
        Ok(script::source_line(&self.wrapper_path))
    }

    /// The last `max` bytes the session's init printed (lossy UTF-8, the
    /// command file's path shown as `init`), then the file is removed.
    pub fn take_init_output(&self, max: usize) -> String {
        let bytes = std::fs::read(&self.init_output_path).unwrap_or_default();
        let _ = std::fs::remove_file(&self.init_output_path);
        let start = bytes.len().saturating_sub(max);
        let text = String::from_utf8_lossy(&bytes[start..]);
        text.replace(&*self.command_path.to_string_lossy(), "init")
            .trim_end()
            .to_owned()
    }

    /// Writes a run: the command text and its wrapper, which sends the run's
    /// output into the FIFO at `output_fifo`.
    ///
    /// # Errors
    /// When a file cannot be written.
    pub fn write_run(&self, run: &script::RunText<'_>, output_fifo: &Path) -> io::Result<()> {
        self.command.rewrite(run.command.as_bytes())?;
        let wrapper = script::WrapperScript {
            run: *run,
            command_file: &self.command_path,
            output_fifo,
        };
        self.wrapper.rewrite(&wrapper.render())
    }

    /// The files bash reads for a run: the command file and the wrapper (its
    /// error messages name them).
    pub fn script_paths(&self) -> [&Path; 2] {
        [&self.command_path, &self.wrapper_path]
    }

    /// The line that makes the shell run the current wrapper.
    pub fn run_line(&self) -> &'static [u8] {
        script::RUN_LINE
    }
}

/// A file rewritten in place for every run. The write extends a shorter file
/// by itself; only a shrink needs the (on tmpfs, comparatively costly)
/// truncate, so the length is remembered.
#[derive(Debug)]
struct RewrittenFile {
    file: File,
    len: Cell<u64>,
}

impl RewrittenFile {
    fn new(file: File) -> Self {
        Self {
            file,
            len: Cell::new(0),
        }
    }

    fn rewrite(&self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all_at(bytes, 0)?;
        let len = bytes.len() as u64;
        if self.len.get() > len {
            self.file.set_len(len)?;
        }
        self.len.set(len);
        Ok(())
    }
}

/// Writes lines to a shell's stdin.
#[derive(Debug)]
pub struct CommandWriter {
    stdin: pipe::Sender,
}

impl CommandWriter {
    /// Wraps the shell's stdin. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// When the descriptor is not a pipe's write end.
    pub fn new(stdin: OwnedFd) -> io::Result<Self> {
        Ok(Self {
            stdin: pipe::Sender::from_owned_fd(stdin)?,
        })
    }

    /// Writes `line` completely.
    ///
    /// # Errors
    /// When the shell has closed its stdin (it exited).
    pub async fn send(&mut self, line: &[u8]) -> io::Result<()> {
        self.stdin.write_all(line).await
    }
}

/// Reads records from a shell's status channel.
#[derive(Debug)]
pub struct StatusReader {
    receiver: pipe::Receiver,
    parser: StatusParser,
    pending: VecDeque<ShellRecord>,
    buf: Vec<u8>,
}

impl StatusReader {
    /// Wraps the status channel's read end. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// When the descriptor is not a pipe's read end.
    pub fn new(status: OwnedFd) -> io::Result<Self> {
        Ok(Self {
            receiver: pipe::Receiver::from_owned_fd(status)?,
            parser: StatusParser::new(),
            pending: VecDeque::new(),
            // Records are reassembled by the parser: reads need not hold one whole.
            buf: vec![0; 8 * 1024],
        })
    }

    /// The next record; `None` once every writer has closed the channel (the
    /// shell exited or exec'd another program).
    ///
    /// # Errors
    /// On a read error or a corrupt channel.
    pub async fn next(&mut self) -> io::Result<Option<ShellRecord>> {
        loop {
            if let Some(record) = self.pending.pop_front() {
                return Ok(Some(record));
            }
            self.receiver.readable().await?;
            match self.receiver.try_read(&mut self.buf) {
                Ok(0) => return Ok(None),
                Ok(n) => {
                    let records = self.parser.push(&self.buf[..n]).map_err(io::Error::other)?;
                    self.pending.extend(records);
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => {}
                Err(err) => return Err(err),
            }
        }
    }
}
