//! A shell's two output FIFOs, used in turn.

use std::io;
use std::path::Path;
use std::path::PathBuf;

use crate::OutputFifo;

/// The two output FIFOs of one shell, used by its runs in turn: while a run
/// writes into one, the other is made ready for the next run (a FIFO made
/// afresh, when the run before could not give its read end back), so that
/// work happens while bash runs a command rather than between a call and
/// its run.
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
    /// A finished run's FIFO that reached end-of-file: its slot and the
    /// FIFO, to be made ready again.
    drained: Option<(usize, OutputFifo)>,
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

    /// The FIFO for a run: the one made ready, else one a run gave back,
    /// each only if its path still names it and it is empty, or else one
    /// made now (the others, and whatever was written into them, dropped).
    /// [`FifoPair::taken_path`] is its path from then on.
    ///
    /// # Errors
    /// When no FIFO can be made.
    pub fn take(&mut self) -> io::Result<OutputFifo> {
        // The given-back one is looked at only when the ready one is not
        // usable: otherwise it stays, to be made ready for the next run.
        let ready = self.ready.take();
        if let Some(fifo) = self.usable(ready) {
            return Ok(fifo);
        }
        let drained = self.drained.take();
        if let Some(fifo) = self.usable(drained) {
            return Ok(fifo);
        }
        let slot = self.last.map_or(0, |last| 1 - last);
        let fifo = OutputFifo::create(&self.paths[slot])?;
        self.last = Some(slot);
        Ok(fifo)
    }

    /// `candidate`, taken for the run, if its path still names it and it
    /// is empty; otherwise it is dropped.
    fn usable(&mut self, candidate: Option<(usize, OutputFifo)>) -> Option<OutputFifo> {
        let (slot, fifo) = candidate?;
        if fifo.is_at(&self.paths[slot]) && fifo.is_empty() {
            self.last = Some(slot);
            return Some(fifo);
        }
        tracing::debug!("an output pipe was removed, replaced or written into; made again");
        None
    }

    /// The path of the FIFO taken last (the run's wrapper writes into it).
    pub fn taken_path(&self) -> &Path {
        &self.paths[self.last.unwrap_or(0)]
    }

    /// Gives back the FIFO taken last, once its run is over and its output
    /// reached end-of-file (no writer is left): the next FIFO made in its
    /// slot is this one.
    pub fn give_back(&mut self, fifo: OutputFifo) {
        if let Some(slot) = self.last {
            self.drained = Some((slot, fifo));
        }
    }

    /// Makes a FIFO ready for the next run, unless one is ready already:
    /// from the read end given back last, if any (while a run is in
    /// progress, the one of the run before it, in the other slot).
    ///
    /// # Errors
    /// When no FIFO can be made (the next [`FifoPair::take`] tries again).
    pub fn prepare(&mut self) -> io::Result<()> {
        if self.ready.is_none() {
            self.ready = Some(self.make()?);
        }
        Ok(())
    }

    /// Makes a FIFO ready: the drained one when there is one (its run is
    /// over), in its slot, checked as it is taken; otherwise one made
    /// afresh, in the slot the last run did not use (a `&` child may still
    /// write into that slot's old pipe; the path then names a new one).
    fn make(&mut self) -> io::Result<(usize, OutputFifo)> {
        match self.drained.take() {
            Some(drained) => Ok(drained),
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
    use std::os::fd::AsFd;

    use super::*;

    /// A pipe buffer size no FIFO starts with: set on each pipe a run
    /// takes, so a later run that finds it took the same pipe again.
    const MARKED: usize = 128 * 1024;

    /// One run: a writer opens the taken FIFO by name, writes, closes; the
    /// read end is drained to end-of-file. Answers the path and whether the
    /// pipe had served a run before (its buffer size was marked).
    fn run_once(pair: &mut FifoPair, text: &[u8]) -> (PathBuf, bool) {
        let fifo = pair.take().unwrap();
        let path = pair.taken_path().to_owned();
        let reused = rustix::pipe::fcntl_getpipe_size(fifo.as_fd()).unwrap() == MARKED;
        rustix::pipe::fcntl_setpipe_size(fifo.as_fd(), MARKED).unwrap();
        // The next run's FIFO is made while this one runs.
        pair.prepare().unwrap();
        let mut writer = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        writer.write_all(text).unwrap();
        drop(writer);
        let mut buf = [0u8; 64];
        let n = fifo.read_now(&mut buf).unwrap();
        assert_eq!(&buf[..n], text);
        assert_eq!(fifo.read_now(&mut buf).unwrap(), 0);
        pair.give_back(fifo);
        (path, reused)
    }

    #[test]
    fn runs_alternate_between_two_fifos_and_reuse_their_read_ends() {
        let dir = tempfile::tempdir().unwrap();
        let mut pair = FifoPair::new(dir.path());
        pair.prepare().unwrap();
        let runs: Vec<_> = (0..6)
            .map(|run| run_once(&mut pair, format!("run {run}\n").as_bytes()))
            .collect();
        for (run, (path, _)) in runs.iter().enumerate() {
            assert_eq!(path, &dir.path().join(["o0", "o1"][run % 2]));
        }
        // From the third run on, each slot's pipe is the one it had.
        let reused: Vec<bool> = runs.iter().map(|(_, reused)| *reused).collect();
        assert_eq!(reused, [false, false, true, true, true, true]);
    }

    #[test]
    fn a_prepared_fifo_that_was_replaced_or_removed_is_not_used() {
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

    #[test]
    fn a_fifo_given_back_whose_path_was_replaced_is_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let mut pair = FifoPair::new(dir.path());
        run_once(&mut pair, b"first\n");
        // The next run's command replaced both FIFOs, the one made ready
        // and its own, which it gives back at end-of-file.
        let fifo = pair.take().unwrap();
        let own = pair.taken_path().to_owned();
        for name in ["o0", "o1"] {
            let path = dir.path().join(name);
            std::fs::remove_file(&path).unwrap();
            std::fs::write(&path, b"not a fifo").unwrap();
        }
        let mut buf = [0u8; 8];
        assert_eq!(fifo.read_now(&mut buf).unwrap(), 0);
        pair.give_back(fifo);
        // Neither is used: the run after gets a FIFO made anew, and its
        // output (`run_once` reads it back).
        let (path, _) = run_once(&mut pair, b"third\n");
        assert_ne!(path, own);
        run_once(&mut pair, b"fourth\n");
    }

    #[test]
    fn a_prepared_fifo_that_was_written_into_is_not_used() {
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

    #[test]
    fn a_fifo_a_child_still_holds_is_not_reused() {
        let dir = tempfile::tempdir().unwrap();
        let mut pair = FifoPair::new(dir.path());
        let fifo = pair.take().unwrap();
        let path = pair.taken_path().to_owned();
        // A `&` child keeps the run's output open: no end-of-file, nothing
        // is given back, and the slot's next FIFO is a new pipe.
        let child = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(
            fifo.read_now(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        run_once(&mut pair, b"other slot\n");
        let (again, _) = run_once(&mut pair, b"same slot, new pipe\n");
        assert_eq!(again, path);
        drop(child);
        assert_eq!(fifo.read_now(&mut buf).unwrap(), 0);
    }
}
