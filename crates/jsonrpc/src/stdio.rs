//! The process's stdin and stdout as streams the reactor drives.
//!
//! `tokio::io::stdin()` and `stdout()` hand every read and every write to a
//! thread of the blocking pool: a request and its answer cost a handful of
//! thread wake-ups and context switches before the server sees a byte
//! (measured: 14 of the 16 futex calls per `run` request of
//! `shellvisor serve`). [`stdio`] reads and writes through epoll instead,
//! without touching the flags of the descriptions the process inherited
//! (they may be shared with the parent or a sibling, which would start
//! seeing `EAGAIN`):
//! - a pipe or FIFO is opened again through `/proc/self/fd/N`, which gives a
//!   new open file description of the same pipe, non-blocking on its own;
//! - a socket (Node.js gives its children socket pairs) is read and written
//!   with `MSG_DONTWAIT` on a duplicate of the descriptor;
//! - anything else (a terminal, a regular file, `/dev/null`), or no runtime
//!   with I/O, keeps tokio's blocking-pool stdio.

use std::io;
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::Context;
use std::task::Poll;
use std::task::ready;

use rustix::fs::FileType;
use rustix::fs::Mode;
use rustix::fs::OFlags;
use rustix::net::RecvFlags;
use rustix::net::SendFlags;
use tokio::io::AsyncRead;
use tokio::io::AsyncWrite;
use tokio::io::Interest;
use tokio::io::ReadBuf;
use tokio::io::unix::AsyncFd;
use tokio::net::unix::pipe;

/// The process's stdin as an [`AsyncRead`] (see the [module](self)).
#[derive(Debug)]
pub struct StdinStream(Input);

/// The process's stdout as an [`AsyncWrite`] (see the [module](self)).
#[derive(Debug)]
pub struct StdoutStream(Output);

#[derive(Debug)]
enum Input {
    Pipe(pipe::Receiver),
    Socket(AsyncFd<OwnedFd>),
    Blocking(tokio::io::Stdin),
}

#[derive(Debug)]
enum Output {
    Pipe(pipe::Sender),
    Socket(AsyncFd<OwnedFd>),
    Blocking(tokio::io::Stdout),
}

/// What a standard descriptor is, as far as reading it goes.
enum Kind {
    Pipe,
    Socket,
    Other,
}

fn kind(fd: BorrowedFd<'_>) -> Kind {
    match rustix::fs::fstat(fd).map(|stat| FileType::from_raw_mode(stat.st_mode)) {
        Ok(FileType::Fifo) => Kind::Pipe,
        Ok(FileType::Socket) => Kind::Socket,
        _ => Kind::Other,
    }
}

/// Opens standard descriptor `fd` again as a new, non-blocking description
/// of the same pipe.
fn reopen_pipe(fd: i32, access: OFlags) -> io::Result<OwnedFd> {
    let flags = access | OFlags::NONBLOCK | OFlags::CLOEXEC;
    Ok(rustix::fs::open(
        format!("/proc/self/fd/{fd}"),
        flags,
        Mode::empty(),
    )?)
}

/// A duplicate of socket `fd`, registered with the reactor for `interest`.
#[allow(unsafe_code)]
fn duplicate(fd: BorrowedFd<'_>, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    let duplicate = rustix::io::fcntl_dupfd_cloexec(fd, 3)?;
    // SAFETY: the `OwnedFd` is moved into the `AsyncFd`, which alone owns it
    // (and closes it) from now on: it stays open and the same descriptor.
    Ok(unsafe { AsyncFd::register_with_interest(duplicate, interest)? })
}

/// stdin and stdout, each driven by the reactor where it can be (see the
/// [module](self)); the blocking pool's otherwise.
///
/// Call it from a task of a runtime with I/O enabled; outside one it falls
/// back to tokio's stdio.
///
/// ```no_run
/// # async fn serve(runtime: shellvisor::Runtime) -> std::io::Result<()> {
/// let (stdin, stdout) = shellvisor_jsonrpc::stdio::stdio();
/// shellvisor_jsonrpc::serve(runtime, stdin, stdout, Default::default()).await
/// # }
/// ```
#[must_use]
pub fn stdio() -> (StdinStream, StdoutStream) {
    let reactor = tokio::runtime::Handle::try_current().is_ok();
    let stdin = reactor.then(|| open_input().ok()).flatten();
    let stdout = reactor.then(|| open_output().ok()).flatten();
    (
        StdinStream(stdin.unwrap_or_else(|| Input::Blocking(tokio::io::stdin()))),
        StdoutStream(stdout.unwrap_or_else(|| Output::Blocking(tokio::io::stdout()))),
    )
}

fn open_input() -> io::Result<Input> {
    let fd = rustix::stdio::stdin();
    match kind(fd) {
        Kind::Pipe => Ok(Input::Pipe(pipe::Receiver::from_owned_fd(reopen_pipe(
            0,
            OFlags::RDONLY,
        )?)?)),
        Kind::Socket => Ok(Input::Socket(duplicate(fd, Interest::READABLE)?)),
        Kind::Other => Err(io::ErrorKind::Unsupported.into()),
    }
}

fn open_output() -> io::Result<Output> {
    let fd = rustix::stdio::stdout();
    match kind(fd) {
        Kind::Pipe => Ok(Output::Pipe(pipe::Sender::from_owned_fd(reopen_pipe(
            1,
            OFlags::WRONLY,
        )?)?)),
        Kind::Socket => Ok(Output::Socket(duplicate(fd, Interest::WRITABLE)?)),
        Kind::Other => Err(io::ErrorKind::Unsupported.into()),
    }
}

impl AsyncRead for StdinStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            Input::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Input::Blocking(stdin) => Pin::new(stdin).poll_read(cx, buf),
            Input::Socket(socket) => loop {
                let mut guard = ready!(socket.poll_read_ready(cx))?;
                let unfilled = buf.initialize_unfilled();
                let read = guard.try_io(|fd| {
                    Ok(rustix::net::recv(fd.get_ref().as_fd(), unfilled, RecvFlags::DONTWAIT)?.0)
                });
                if let Ok(read) = read {
                    buf.advance(read?);
                    return Poll::Ready(Ok(()));
                }
            },
        }
    }
}

impl AsyncWrite for StdoutStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bytes: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            Output::Pipe(pipe) => Pin::new(pipe).poll_write(cx, bytes),
            Output::Blocking(stdout) => Pin::new(stdout).poll_write(cx, bytes),
            Output::Socket(socket) => loop {
                let mut guard = ready!(socket.poll_write_ready(cx))?;
                // No SIGPIPE for a host that has gone: the write fails instead.
                let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
                let sent =
                    guard.try_io(|fd| Ok(rustix::net::send(fd.get_ref().as_fd(), bytes, flags)?));
                if let Ok(sent) = sent {
                    return Poll::Ready(sent);
                }
            },
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            Output::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            Output::Blocking(stdout) => Pin::new(stdout).poll_flush(cx),
            Output::Socket(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            Output::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            Output::Blocking(stdout) => Pin::new(stdout).poll_shutdown(cx),
            Output::Socket(_) => Poll::Ready(Ok(())),
        }
    }
}
