//! Terminals someone else owns: the embedder's backend for running a command
//! in, for example, the editor's terminal (ACP `terminal/*`).

use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;

/// What a [`ClientTerminals`] call returns: the value, or why it failed.
pub type TerminalFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, String>> + Send + 'a>>;

/// A command to start in a client's terminal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientCommand {
    /// The program (`bash`).
    pub command: String,
    /// Its arguments (`-c`, the command text).
    pub args: Vec<String>,
    /// Where it runs (absolute).
    pub cwd: PathBuf,
    /// Variables set for it, over the terminal's own environment.
    pub env: Vec<(String, String)>,
    /// Most output bytes the client keeps (it drops the oldest beyond).
    pub output_byte_limit: u64,
}

/// How a command in a client's terminal ended.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientExit {
    /// Its exit code, when it exited.
    pub exit_code: Option<u32>,
    /// The signal that ended it, when one did.
    pub signal: Option<String>,
}

/// A client terminal's output so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientOutput {
    /// The text the client kept.
    pub output: String,
    /// The client dropped output from the start (its byte limit).
    pub truncated: bool,
    /// How the command ended, once it has.
    pub exit: Option<ClientExit>,
}

/// "Run this command in a terminal someone else owns": installed by an
/// embedder (`RuntimeBuilder::client_terminals`), it is what a session runs
/// its pipe-mode commands in instead of its own shell. A terminal is
/// created, read, waited for, killed, and always released.
pub trait ClientTerminals: Send + Sync + std::fmt::Debug + 'static {
    /// Starts `command` in a new terminal; its id.
    fn create(&self, command: ClientCommand) -> TerminalFuture<'_, String>;
    /// The terminal's output so far (and its exit, once it has one).
    fn output<'a>(&'a self, terminal: &'a str) -> TerminalFuture<'a, ClientOutput>;
    /// Waits until the terminal's command ends.
    fn wait_for_exit<'a>(&'a self, terminal: &'a str) -> TerminalFuture<'a, ClientExit>;
    /// Kills the terminal's command; its output stays readable.
    fn kill<'a>(&'a self, terminal: &'a str) -> TerminalFuture<'a, ()>;
    /// Kills the command if it still runs and lets the terminal go.
    fn release<'a>(&'a self, terminal: &'a str) -> TerminalFuture<'a, ()>;
}
