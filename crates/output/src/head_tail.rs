//! A bounded buffer of raw output: the first bytes, the last bytes, and counts.

use std::collections::VecDeque;

/// Keeps the first `head_cap` and the last `tail_cap` bytes of a stream, and
/// counts every byte and newline. Memory is bounded by `head_cap + tail_cap`
/// whatever is pushed.
#[derive(Debug)]
pub struct HeadTail {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    total: u64,
    newlines: u64,
    last_byte: Option<u8>,
}

impl HeadTail {
    /// An empty buffer keeping `head_cap` leading and `tail_cap` trailing bytes.
    pub fn new(head_cap: usize, tail_cap: usize) -> Self {
        Self {
            // Grown on demand: most runs print little, and a finished job's
            // buffers stay for the retention period.
            head: Vec::new(),
            head_cap,
            tail: VecDeque::new(),
            tail_cap,
            total: 0,
            newlines: 0,
            last_byte: None,
        }
    }

    /// Whether pushing `incoming` more bytes would drop bytes from memory (the
    /// moment to start writing the full stream elsewhere).
    pub fn would_drop(&self, incoming: usize) -> bool {
        let head_room = self.head_cap - self.head.len();
        let after_head = incoming.saturating_sub(head_room);
        self.tail.len() + after_head > self.tail_cap
    }

    /// Gives back the capacity the bytes held do not use (call it once the
    /// stream has ended; the buffer may be kept for a long time after).
    pub fn shrink_to_fit(&mut self) {
        self.head.shrink_to_fit();
        self.tail.shrink_to_fit();
    }

    /// Whether every byte pushed so far is still in memory.
    pub fn is_complete(&self) -> bool {
        self.head.len() as u64 + self.tail.len() as u64 == self.total
    }

    /// Appends bytes.
    pub fn push(&mut self, mut chunk: &[u8]) {
        if chunk.is_empty() {
            return;
        }
        self.total += chunk.len() as u64;
        self.newlines += memchr::memchr_iter(b'\n', chunk).count() as u64;
        self.last_byte = chunk.last().copied();
        let head_room = self.head_cap - self.head.len();
        if head_room > 0 {
            let take = head_room.min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(chunk);
    }

    /// Bytes pushed so far.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Newline bytes pushed so far.
    pub fn newlines(&self) -> u64 {
        self.newlines
    }

    /// Lines pushed so far: newlines, plus one for a final unterminated line.
    pub fn total_lines(&self) -> u64 {
        self.newlines + u64::from(self.last_byte.is_some_and(|b| b != b'\n'))
    }

    /// The leading bytes.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The trailing bytes (after the head), in order, copied out.
    pub fn tail_vec(&self) -> Vec<u8> {
        let (a, b) = self.tail.as_slices();
        let mut out = Vec::with_capacity(a.len() + b.len());
        out.extend_from_slice(a);
        out.extend_from_slice(b);
        out
    }

    /// Offset in the stream of the first trailing byte held.
    pub fn tail_offset(&self) -> u64 {
        self.total - self.tail.len() as u64
    }

    /// Copies `[offset, offset + max)` (clipped to what was pushed) when the
    /// whole range is in memory; `None` when part of it was dropped.
    pub fn read(&self, offset: u64, max: usize) -> Option<Vec<u8>> {
        let end = self.total.min(offset.saturating_add(max as u64));
        if offset >= end {
            return Some(Vec::new());
        }
        let head_len = self.head.len() as u64;
        let tail_offset = self.tail_offset();
        let mut out = Vec::with_capacity((end - offset) as usize);
        let mut pos = offset;
        if pos < head_len {
            let stop = end.min(head_len);
            out.extend_from_slice(&self.head[pos as usize..stop as usize]);
            pos = stop;
        }
        if pos < end {
            if pos < tail_offset {
                return None;
            }
            let from = (pos - tail_offset) as usize;
            let to = (end - tail_offset) as usize;
            out.extend(self.tail.range(from..to));
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_counts_everything() {
        let mut buf = HeadTail::new(4, 6);
        buf.push(b"ab\ncd");
        assert!(buf.is_complete());
        assert!(!buf.would_drop(5));
        assert!(buf.would_drop(6));
        buf.push(b"ef\ngh\nij");
        assert_eq!(buf.total_bytes(), 13);
        assert_eq!(buf.newlines(), 3);
        assert_eq!(buf.total_lines(), 4);
        assert_eq!(buf.head(), b"ab\nc");
        assert_eq!(buf.tail_vec(), b"\ngh\nij");
        assert_eq!(buf.tail_offset(), 7);
        assert!(!buf.is_complete());
        assert_eq!(buf.read(0, 3).unwrap(), b"ab\n");
        assert_eq!(buf.read(8, 100).unwrap(), b"gh\nij");
        assert_eq!(buf.read(3, 3), None);
        assert_eq!(buf.read(20, 3).unwrap(), b"");
    }

    #[test]
    fn a_chunk_larger_than_the_tail_keeps_its_end() {
        let mut buf = HeadTail::new(2, 3);
        buf.push(b"0123456789");
        assert_eq!(buf.head(), b"01");
        assert_eq!(buf.tail_vec(), b"789");
        assert_eq!(buf.total_lines(), 1);
    }

    #[test]
    fn complete_buffer_reads_across_head_and_tail() {
        let mut buf = HeadTail::new(3, 10);
        for chunk in [&b"ab"[..], b"cdef", b"g"] {
            buf.push(chunk);
        }
        assert_eq!(buf.read(1, 5).unwrap(), b"bcdef");
        assert_eq!(buf.read(0, 100).unwrap(), b"abcdefg");
    }
}
