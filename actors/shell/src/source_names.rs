//! bash names the file it was reading in its error messages: a command's
//! own syntax error or failed `cd` would read
//! `/dev/shm/shellvisor-…/sh-…/c: line 1: …`. Agents know that message as
//! `bash -c` prints it, `bash: line 1: …`, so the runtime's file names are
//! put back to `bash` in the run's output, across chunk boundaries.
//!
//! Only bash writes these names: the directory is private and random per
//! shell, so no other output contains it by chance.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use bytes::BytesMut;

/// What the runtime's file names become.
const REPLACEMENT: &[u8] = b"bash: line ";

/// Rewrites `<runtime file>: line ` to `bash: line ` in a byte stream.
#[derive(Clone, Debug)]
pub(crate) struct SourceNames {
    /// `<file>: line ` for each file bash reads for a run (the same for
    /// all of a shell's runs: each run's copy shares them).
    patterns: Arc<[Box<[u8]>]>,
    /// The end of the last chunk that may begin a pattern.
    carry: BytesMut,
}

impl SourceNames {
    /// Rewrites the names of `files` (the command file and the wrapper).
    pub(crate) fn new(files: &[&Path]) -> Self {
        use std::os::unix::ffi::OsStrExt;
        let patterns = files
            .iter()
            .map(|file| {
                let mut pattern = file.as_os_str().as_bytes().to_vec();
                pattern.extend_from_slice(b": line ");
                pattern.into_boxed_slice()
            })
            .collect();
        Self {
            patterns,
            carry: BytesMut::new(),
        }
    }

    /// The next chunk, rewritten. Bytes that may begin a name are held back
    /// until the next chunk (or [`SourceNames::flush`]) shows what they are.
    pub(crate) fn filter(&mut self, chunk: Bytes) -> Bytes {
        let data = if self.carry.is_empty() {
            chunk
        } else {
            self.carry.extend_from_slice(&chunk);
            self.carry.split().freeze()
        };
        let held = self.partial_tail(&data);
        let body = &data[..data.len() - held];
        let rewritten = match self.rewrite(body) {
            Some(rewritten) => rewritten,
            None => data.slice(..body.len()),
        };
        self.carry.extend_from_slice(&data[data.len() - held..]);
        rewritten
    }

    /// What is held back, at the end of the stream.
    pub(crate) fn flush(&mut self) -> Bytes {
        if self.carry.is_empty() {
            // Most runs hold nothing back; splitting would allocate.
            return Bytes::new();
        }
        self.carry.split().freeze()
    }

    /// `body` with every name replaced, or `None` when it has none.
    fn rewrite(&self, body: &[u8]) -> Option<Bytes> {
        let mut out: Option<BytesMut> = None;
        let mut from = 0;
        let mut at = 0;
        while let Some(offset) = memchr::memchr(b'/', &body[at..]) {
            let start = at + offset;
            match self
                .patterns
                .iter()
                .find(|pattern| body[start..].starts_with(pattern))
            {
                Some(pattern) => {
                    let out = out.get_or_insert_with(|| BytesMut::with_capacity(body.len()));
                    out.extend_from_slice(&body[from..start]);
                    out.extend_from_slice(REPLACEMENT);
                    from = start + pattern.len();
                    at = from;
                }
                None => at = start + 1,
            }
        }
        let mut out = out?;
        out.extend_from_slice(&body[from..]);
        Some(out.freeze())
    }

    /// How many bytes at the end of `data` are a proper beginning of a name.
    fn partial_tail(&self, data: &[u8]) -> usize {
        let longest = self
            .patterns
            .iter()
            .map(|pattern| pattern.len())
            .max()
            .unwrap_or(0);
        let window = data.len().min(longest.saturating_sub(1));
        let tail = &data[data.len() - window..];
        // The earliest candidate holds back the most; any later one is inside it.
        memchr::memchr_iter(b'/', tail)
            .find(|&start| {
                let rest = &tail[start..];
                self.patterns
                    .iter()
                    .any(|pattern| pattern.starts_with(rest))
            })
            .map_or(0, |start| window - start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> SourceNames {
        SourceNames::new(&[Path::new("/d/sh-x/c"), Path::new("/d/sh-x/w")])
    }

    #[test]
    fn names_become_bash_at_any_split() {
        let input: &[u8] = b"ok\n/d/sh-x/c: line 1: cd: /nope: No such file or directory\n/d/sh-x/w: line 3: x\n/d/other/c: line 2\n/d/sh-x/c";
        let want: &[u8] = b"ok\nbash: line 1: cd: /nope: No such file or directory\nbash: line 3: x\n/d/other/c: line 2\n/d/sh-x/c";
        for split in 0..=input.len() {
            let mut names = names();
            let mut out = names
                .filter(Bytes::copy_from_slice(&input[..split]))
                .to_vec();
            out.extend_from_slice(&names.filter(Bytes::copy_from_slice(&input[split..])));
            out.extend_from_slice(&names.flush());
            assert_eq!(out, want, "split at {split}");
        }
    }

    #[test]
    fn chunks_without_a_name_pass_through_untouched() {
        let mut names = names();
        let chunk = Bytes::from_static(b"plain output /usr/bin\n");
        let out = names.filter(chunk.clone());
        assert_eq!(out, chunk);
        assert_eq!(out.as_ptr(), chunk.as_ptr(), "no copy");
        assert!(names.flush().is_empty());
    }
}
