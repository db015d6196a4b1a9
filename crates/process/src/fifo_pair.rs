//! A shell's two output FIFOs, used in turn.

use std::io;
use std::path::Path;
use std::path::PathBuf;

use tokio::net::unix::pipe;

use crate::OutputFifo;

/// The two output FIFOs of one shell, used by its runs in turn: while a run
/// writes into one, the other is made ready for the next run, so making a
/// FIFO ready ([`OutputFifo::reuse`]: a new keep-alive, a new registration
/// with tokio) happens while bash runs a command rather than between a call
/// and its run.
///
/// At most one FIFO is ready ahead. The Shell takes one for a run, writes
/// the run's line, then makes the other ready from the read end the run
/// before gave back; a run takes the ready one only after checking that its
/// path still names it and that nothing was written into it (the run before
/// may have removed or replaced the file, or opened it by its path and
/// written to it: bytes that are no output of the new run).
#[derive(Debug)]
pub struct FifoPair {
    paths: [PathBuf; 2],
    /// Made ready for the next run: its slot and the FIFO.
    ready: Option<(usize, OutputFifo)>,
    /// A finished run's read end that reached end-of-file: its slot and
    /// the receiver, to be made ready again.
    drained: Option<(usize, pipe::Receiver)>,
    /// The slot of the FIFO taken last (the run in progress, or the last).
    last: Option<usize>,
}

impl FifoPair {
    /// The pair at `dir/o0` and `dir/o1` (`dir` a private directory); no
    /// FIFO is made yet.
    pub fn new(dir: &Path) -> Self {
        Self {
            paths: [dir.join("o0"), dir.join("o1")],
            ready: None,
            drained: None,
            last: None,
        }
    }

    /// The FIFO for a run: the one made ready, if its path still names it
    /// and it is empty, or else one made now (the other pipe, and whatever
    /// was written into it, dropped). [`FifoPair::taken_path`] is its path
    /// from then on. Must be called inside a tokio runtime.
    ///
    /// # Errors
    /// When no FIFO can be made.
    pub fn take(&mut self) -> io::Result<OutputFifo> {
        if let Some((slot, fifo)) = self.ready.take() {
            if fifo.is_at(&self.paths[slot]) && fifo.is_empty() {
                self.last = Some(slot);
                return Ok(fifo);
            }
            tracing::debug!(
                "a prepared output pipe was removed, replaced or written into; made again"
            );
        }
        let (slot, fifo) = self.make()?;
        self.last = Some(slot);
        Ok(fifo)
    }

    /// The path of the FIFO taken last (the run's wrapper writes into it).
    pub fn taken_path(&self) -> &Path {
        &self.paths[self.last.unwrap_or(0)]
    }

    /// Gives back the read end of the FIFO taken last, once its run is over
    /// and its output reached end-of-file (no writer is left): the next
    /// FIFO made reuses it.
    pub fn give_back(&mut self, receiver: pipe::Receiver) {
        if let Some(slot) = self.last {
            self.drained = Some((slot, receiver));
        }
    }

    /// Makes a FIFO ready for the next run, unless one is ready already:
    /// from the read end given back last, if any (while a run is in
    /// progress, the one of the run before it, in the other slot). Must be
    /// called inside a tokio runtime.
    ///
    /// # Errors
    /// When no FIFO can be made (the next [`FifoPair::take`] tries again).
    pub fn prepare(&mut self) -> io::Result<()> {
        if self.ready.is_none() {
            self.ready = Some(self.make()?);
        }
        Ok(())
    }

    /// Makes a FIFO: from a drained read end when there is one (its run is
    /// over), in its slot; otherwise afresh, in the slot the last run did not
    /// use (a `&` child may still write into that slot's old pipe; the path
    /// then names a new one).
    fn make(&mut self) -> io::Result<(usize, OutputFifo)> {
        match self.drained.take() {
            Some((slot, receiver)) => {
                let path = &self.paths[slot];
                let fifo =
                    OutputFifo::reuse(receiver, path).or_else(|_| OutputFifo::create(path))?;
                Ok((slot, fifo))
            }
            None => {
                let slot = self.last.map_or(0, |last| 1 - last);
                Ok((slot, OutputFifo::create(&self.paths[slot])?))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::Write;
    use std::os::fd::AsRawFd;

    use super::*;
    use crate::read_now;

    /// One run: a writer opens the taken FIFO by name, writes, closes; the
    /// keep-alive goes and the read end is drained to end-of-file.
    fn run_once(pair: &mut FifoPair, text: &[u8]) -> (PathBuf, i32) {
        let fifo = pair.take().unwrap();
        let path = pair.taken_path().to_owned();
        let fd = fifo.receiver.as_raw_fd();
        // The next run's FIFO is made while this one runs.
        pair.prepare().unwrap();
        let mut writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        writer.write_all(text).unwrap();
        drop(writer);
        drop(fifo.keepalive);
        let mut buf = [0u8; 64];
        let n = read_now(&fifo.receiver, &mut buf).unwrap();
        assert_eq!(&buf[..n], text);
        assert_eq!(read_now(&fifo.receiver, &mut buf).unwrap(), 0);
        pair.give_back(fifo.receiver);
        (path, fd)
    }

    #[tokio::test]
    async fn runs_alternate_between_two_fifos_and_reuse_their_read_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut pair = FifoPair::new(dir.path());
        pair.prepare().unwrap();
        let runs: Vec<_> = (0..6)
            .map(|run| run_once(&mut pair, format!("run {run}\n").as_bytes()))
            .collect();
        for (run, (path, _)) in runs.iter().enumerate() {
            assert_eq!(path, &dir.path().join(["o0", "o1"][run % 2]));
        }
        // From the third run on, each slot's read end is the one it had.
        assert_eq!(runs[2].1, runs[0].1);
        assert_eq!(runs[3].1, runs[1].1);
        assert_eq!(runs[5].1, runs[3].1);
    }

    #[tokio::test]
    async fn a_prepared_fifo_that_was_replaced_or_removed_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let mut pair = FifoPair::new(dir.path());
        let is_fifo = |name: &str| {
            use std::os::unix::fs::FileTypeExt;
            std::fs::symlink_metadata(dir.path().join(name))
                .unwrap()
                .file_type()
                .is_fifo()
        };
        run_once(&mut pair, b"first\n");
        // The first run's command replaced the FIFO made ready for the next.
        let next = dir.path().join("o1");
        std::fs::remove_file(&next).unwrap();
        std::fs::write(&next, b"not a fifo").unwrap();
        // The run still gets its output (`run_once` reads it back), through
        // the first run's FIFO; the replaced slot is made anew for the next.
        let (path, _) = run_once(&mut pair, b"second\n");
        assert_eq!(path, dir.path().join("o0"));
        assert!(is_fifo("o1"));
        // And one that is simply gone.
        std::fs::remove_file(&next).unwrap();
        run_once(&mut pair, b"third\n");
        assert!(is_fifo("o0") && is_fifo("o1"));
    }

    #[tokio::test]
    async fn a_prepared_fifo_that_was_written_into_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let mut pair = FifoPair::new(dir.path());
        run_once(&mut pair, b"first\n");
        // The first run's command wrote into the FIFO made ready for the
        // next, by its path (read-write, so the open cannot block).
        let next = dir.path().join("o1");
        let mut stray = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&next)
            .unwrap();
        stray.write_all(b"stray\n").unwrap();
        drop(stray);
        // The next run reads its own output alone (`run_once` checks it),
        // through the first run's FIFO; the run after it through a pipe
        // made anew at the written one's path.
        let (path, _) = run_once(&mut pair, b"second\n");
        assert_eq!(path, dir.path().join("o0"));
        let (path, _) = run_once(&mut pair, b"third\n");
        assert_eq!(path, next);
    }

    #[tokio::test]
    async fn a_fifo_a_child_still_holds_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let mut pair = FifoPair::new(dir.path());
        let fifo = pair.take().unwrap();
        let path = pair.taken_path().to_owned();
        // A `&` child keeps the run's output open: no end-of-file, nothing
        // is given back, and the slot's next FIFO is a new pipe.
        let child = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        drop(fifo.keepalive);
        let mut buf = [0u8; 8];
        assert_eq!(
            read_now(&fifo.receiver, &mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        run_once(&mut pair, b"other slot\n");
        let (again, _) = run_once(&mut pair, b"same slot, new pipe\n");
        assert_eq!(again, path);
        drop(child);
        assert_eq!(read_now(&fifo.receiver, &mut buf).unwrap(), 0);
    }
}
