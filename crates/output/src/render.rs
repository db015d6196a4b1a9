//! Rendering a run's output and result text for a model.

use std::fmt::Write as _;
use std::time::Duration;

use crate::sanitize::sanitize_counting;

/// A run's output rendered as text, with what it shows of the raw stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RenderedOutput {
    /// Sanitized text: the whole output, or head, elision marker and tail.
    pub body: String,
    /// Raw bytes represented in `body`.
    pub shown_bytes: u64,
    /// Raw lines represented in `body`.
    pub shown_lines: u64,
    /// Lines of the head shown (the first `head_lines` lines of the stream).
    pub head_lines: u64,
    /// Raw offset where the shown tail starts (the total when nothing is elided).
    pub tail_offset: u64,
    /// Raw bytes left out.
    pub elided_bytes: u64,
    /// Raw lines left out.
    pub elided_lines: u64,
    /// Total lines of the stream.
    pub total_lines: u64,
    /// Lines shown cut at the column cap (the rest of each is left out).
    pub cut_lines: u64,
    /// The head's last shown line goes on past the elision.
    pub head_partial: bool,
    /// The tail's first shown line began before the elision.
    pub tail_partial: bool,
}

impl RenderedOutput {
    /// Whether part of the output is not in the body: bytes elided, or
    /// lines cut at the column cap.
    pub fn truncated(&self) -> bool {
        self.elided_bytes > 0 || self.cut_lines > 0
    }

    /// The notice pointing at the full output, for a truncated rendering, in
    /// the reference tool's words:
    /// `[Showing lines 1-H and T-Z of Z (50KB limit); N middle lines (S) elided. Read artifact://<id> for full output]`,
    /// or `[Showing lines T-Z of Z (50KB limit). Read artifact://<id> for full output]`
    /// when no head is shown. Where the elision cuts through a line, it says
    /// which part of which line is left out instead of counting middle
    /// lines; lines cut at the column cap are counted. `artifact` is the
    /// artifact id, or `Err(reason)` when it could not be written;
    /// `inline_cap` is the cap in bytes.
    ///
    /// ```
    /// use shellvisor_output::render_output;
    ///
    /// // One 5,000-byte line: shown cut to 768 columns.
    /// let out = render_output(&[b'x'; 5000], &[], 5000, 0, 768, 51200);
    /// assert!(out.truncated());
    /// assert_eq!(
    ///     out.truncation_notice(Ok("job_1"), 51200).unwrap(),
    ///     "[1 long line cut short (…). Read artifact://job_1 for full output]"
    /// );
    /// ```
    pub fn truncation_notice(
        &self,
        artifact: Result<&str, &str>,
        inline_cap: usize,
    ) -> Option<String> {
        if !self.truncated() {
            return None;
        }
        let pointer = match artifact {
            Ok(id) => format!("Read artifact://{id} for full output"),
            Err(reason) => format!("Full output unavailable: {reason}"),
        };
        let cut = (self.cut_lines > 0).then(|| {
            let lines = if self.cut_lines == 1 { "line" } else { "lines" };
            format!("{} long {lines} cut short (…)", self.cut_lines)
        });
        if self.elided_bytes == 0 {
            return Some(format!("[{}. {pointer}]", cut.unwrap_or_default()));
        }
        let cut = cut.map(|cut| format!("; {cut}")).unwrap_or_default();
        let tail_lines = self.shown_lines - self.head_lines;
        let first_tail_line = self.total_lines.saturating_sub(tail_lines) + 1;
        let last = self.total_lines;
        let limit = format_size(inline_cap as u64);
        let size = format_size(self.elided_bytes);
        if self.head_lines == 0 {
            let part = if self.tail_partial {
                format!("; {size} elided, with the start of line {first_tail_line}")
            } else {
                String::new()
            };
            return Some(format!(
                "[Showing lines {first_tail_line}-{last} of {last} ({limit} limit){part}{cut}. {pointer}]"
            ));
        }
        let what = if !self.head_partial && !self.tail_partial {
            let lines = if self.elided_lines == 1 {
                "line"
            } else {
                "lines"
            };
            format!("{} middle {lines} ({size}) elided", self.elided_lines)
        } else if self.head_partial && self.tail_partial && self.head_lines == first_tail_line {
            format!("{size} of line {first_tail_line} elided")
        } else {
            let mut parts = Vec::new();
            if self.head_partial {
                parts.push(format!("the rest of line {}", self.head_lines));
            }
            let first_whole = self.head_lines + 1;
            let last_whole = first_tail_line.saturating_sub(1);
            if last_whole >= first_whole {
                let n = last_whole - first_whole + 1;
                parts.push(if n == 1 {
                    "1 whole line".to_owned()
                } else {
                    format!("{n} whole lines")
                });
            }
            if self.tail_partial {
                parts.push(format!("the start of line {first_tail_line}"));
            }
            format!("{size} elided: {}", parts.join(", "))
        };
        Some(format!(
            "[Showing lines 1-{} and {first_tail_line}-{last} of {last} ({limit} limit); {what}{cut}. {pointer}]",
            self.head_lines,
        ))
    }
}

/// Renders raw output held as a head (stream bytes `0..head.len()`) and a tail
/// (stream bytes from `tail_offset`). Output of at most `inline_cap` bytes is
/// shown whole. Longer output shows its first lines (at most 60% of the cap,
/// and no more than the head holds) and its last lines (at most 25% of the
/// cap), each cut at a line boundary, with `[…<N>ln elided…]` (or
/// `[…<B>B elided…]` when at most one line is left out) between them: the
/// reference tool's final inline cap.
pub fn render_output(
    head: &[u8],
    tail: &[u8],
    tail_offset: u64,
    total_newlines: u64,
    max_columns: usize,
    inline_cap: usize,
) -> RenderedOutput {
    let total = tail_offset + tail.len() as u64;
    let contiguous = tail_offset <= head.len() as u64;
    let ends_unterminated = match (tail.last(), head.last()) {
        (Some(b), _) => *b != b'\n',
        (None, Some(b)) if contiguous => *b != b'\n',
        _ => false,
    };
    let total_lines = total_newlines + u64::from(ends_unterminated);
    // The bytes available to show: the whole stream when it is in memory.
    let joined;
    let (head, tail, tail_offset) = if contiguous {
        let mut all = head.to_vec();
        let overlap = (head.len() as u64 - tail_offset) as usize;
        all.extend_from_slice(tail.get(overlap..).unwrap_or_default());
        joined = all;
        (&joined[..], &joined[..], 0u64)
    } else {
        (head, tail, tail_offset)
    };
    if contiguous && total <= inline_cap as u64 {
        let (body, cut_lines) = sanitize_counting(head, max_columns);
        return RenderedOutput {
            body,
            shown_bytes: total,
            shown_lines: total_lines,
            head_lines: total_lines,
            tail_offset: total,
            elided_bytes: 0,
            elided_lines: 0,
            total_lines,
            cut_lines,
            head_partial: false,
            tail_partial: false,
        };
    }
    let head = &head[..head.len().min(inline_cap * 6 / 10)];
    let tail_keep = tail.len().min(inline_cap / 4);
    // The byte before the shown tail, when it is held: a newline there means
    // the tail starts a line.
    let before_tail = (tail.len() > tail_keep).then(|| tail[tail.len() - tail_keep - 1]);
    let tail_offset = tail_offset + (tail.len() - tail_keep) as u64;
    let tail = &tail[tail.len() - tail_keep..];
    let head_cut = match memchr::memrchr(b'\n', head) {
        Some(pos) => pos + 1,
        None => head.len(),
    };
    let shown_head = &head[..head_cut];
    let tail_start = match memchr::memchr(b'\n', tail) {
        Some(pos) if pos + 1 < tail.len() => pos + 1,
        _ => tail
            .iter()
            .take(3)
            .take_while(|b| (0x80..0xC0).contains(*b))
            .count(),
    };
    let shown_tail = &tail[tail_start..];
    let found_line_start = memchr::memchr(b'\n', tail).is_some_and(|pos| pos + 1 < tail.len());
    let tail_partial = !shown_tail.is_empty() && !found_line_start && before_tail != Some(b'\n');
    let head_partial = shown_head.last().is_some_and(|b| *b != b'\n');
    let head_newlines = memchr::memchr_iter(b'\n', shown_head).count() as u64;
    let tail_newlines = memchr::memchr_iter(b'\n', shown_tail).count() as u64;
    let head_lines = head_newlines + u64::from(shown_head.last().is_some_and(|b| *b != b'\n'));
    let tail_lines = tail_newlines + u64::from(ends_unterminated && !shown_tail.is_empty());
    let shown_tail_offset = tail_offset + tail_start as u64;
    let elided_bytes = shown_tail_offset - head_cut as u64;
    let elided_lines = total_newlines.saturating_sub(head_newlines + tail_newlines);

    let (mut body, head_cut_lines) = sanitize_counting(shown_head, max_columns);
    // The head's last line, when the elision cuts through it, is all left
    // out past what is shown: the elision says so, not the column cap too.
    // (A partial first tail line cut at the cap hides its end: that counts.)
    let head_last = body.rsplit('\n').next().unwrap_or("");
    let partial_cuts =
        u64::from(head_partial && head_last.ends_with('…') && head_last.len() + 3 >= max_columns);
    if !body.is_empty() && !body.ends_with('\n') {
        body.push('\n');
    }
    if elided_lines > 1 {
        let _ = writeln!(body, "[…{elided_lines}ln elided…]");
    } else {
        let _ = writeln!(body, "[…{elided_bytes}B elided…]");
    }
    let (tail_text, tail_cut_lines) = sanitize_counting(shown_tail, max_columns);
    body.push_str(&tail_text);
    RenderedOutput {
        body,
        shown_bytes: head_cut as u64 + shown_tail.len() as u64,
        shown_lines: head_lines + tail_lines,
        head_lines,
        tail_offset: shown_tail_offset,
        elided_bytes,
        elided_lines,
        total_lines,
        cut_lines: (head_cut_lines + tail_cut_lines).saturating_sub(partial_cuts),
        head_partial,
        tail_partial,
    }
}

/// `[Command timed out after N seconds]`, the first line of a timed-out result.
pub fn timeout_notice(seconds: u64) -> String {
    format!("[Command timed out after {seconds} seconds]")
}

/// `[Command produced no output for N seconds]`, the first line of a run
/// ended by its idle timeout (`N` as given: `1`, `0.5`).
pub fn idle_notice(idle: Duration) -> String {
    format!(
        "[Command produced no output for {} seconds]",
        idle.as_secs_f64()
    )
}

/// Why the runtime stopped a run, as its result's first line says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Its deadline fired after this many seconds.
    Deadline(u64),
    /// It printed nothing for this long.
    Idle(Duration),
    /// It was killed on request.
    Cancelled,
}

/// The pieces of a result's model-facing text.
#[derive(Clone, Debug, Default)]
pub struct ResultTextParts<'a> {
    /// The rendered output body.
    pub body: &'a str,
    /// Why the runtime stopped the run, if it did.
    pub stopped: Option<Stopped>,
    /// How long the run took.
    pub wall_time: Duration,
    /// Notice lines (timeout clamping, shell restarts, ...).
    pub notices: &'a [String],
    /// The exit code, if known.
    pub exit_code: Option<i32>,
    /// The truncation notice, if the output was truncated.
    pub truncation_notice: Option<&'a str>,
}

/// Lays out a result as the reference tool does:
///
/// ```text
/// [Command timed out after N seconds]     (only on timeout)
/// [Command produced no output for N seconds]  (only on an idle timeout)
/// [Command cancelled]                     (only when killed on request)
/// <output, or "(no output)">
///
/// Wall time: <s> seconds
/// <notices, one per line>
///
/// Command exited with code <n>            (only for a non-zero exit)
///
/// [Showing lines ... Read artifact://<id> for full output]   (only when truncated)
/// ```
pub fn result_text(parts: &ResultTextParts<'_>) -> String {
    let mut text = String::with_capacity(parts.body.len() + 128);
    match parts.stopped {
        Some(Stopped::Deadline(seconds)) => text.push_str(&timeout_notice(seconds)),
        Some(Stopped::Idle(idle)) => text.push_str(&idle_notice(idle)),
        Some(Stopped::Cancelled) => text.push_str("[Command cancelled]"),
        None => {}
    }
    if parts.stopped.is_some() {
        text.push('\n');
    }
    let body = parts.body.trim_end_matches('\n');
    text.push_str(if body.is_empty() { "(no output)" } else { body });
    let _ = write!(
        text,
        "\n\nWall time: {:.2} seconds",
        parts.wall_time.as_secs_f64()
    );
    for notice in parts.notices {
        text.push('\n');
        text.push_str(notice);
    }
    if let Some(code) = parts.exit_code.filter(|code| *code != 0) {
        let _ = write!(text, "\n\nCommand exited with code {code}");
    }
    if let Some(notice) = parts.truncation_notice {
        text.push_str("\n\n");
        text.push_str(notice);
    }
    text
}

/// The text of a background job's start, as the reference tool words it: the
/// output so far (when auto-backgrounded), the notices, then
///
/// ```text
/// Background job <id> started: <label>
/// Result will be delivered automatically when complete.
/// <hint, with {job_id} replaced by the job's id>
/// ```
///
/// ```
/// let text = shellvisor_output::background_text("job_1", "make", "", &[], "Wait with wait({job_id}).");
/// assert!(text.ends_with("when complete.\nWait with wait(job_1)."));
/// ```
pub fn background_text(
    job_id: &str,
    label: &str,
    preview: &str,
    notices: &[String],
    hint: &str,
) -> String {
    let mut text = lead(preview.trim(), notices);
    let _ = write!(
        text,
        "Background job {job_id} started: {label}\n\
         Result will be delivered automatically when complete.\n"
    );
    text.push_str(&hint.replace("{job_id}", job_id));
    text
}

/// The text answered when a foreground run on a terminal waits for input:
/// the screen, notices, then how to answer it.
///
/// ```
/// let text = shellvisor_output::awaiting_input_text("job_1", "read -p 'name? ' n", "name?", &[]);
/// assert!(text.starts_with("name?\n\n"));
/// assert!(text.contains("Job job_1 is waiting for terminal input: read -p 'name? ' n"));
/// ```
pub fn awaiting_input_text(job_id: &str, label: &str, screen: &str, notices: &[String]) -> String {
    // A screen keeps its leading indentation; only blank rows go.
    let mut text = lead(screen.trim_end(), notices);
    let _ = write!(
        text,
        "Job {job_id} is waiting for terminal input: {label}\n\
         The screen is shown above. Send input or keys (Enter, C-c, C-d, ...) to the job to continue, \
         or kill it; its result will be delivered automatically when it exits."
    );
    text
}

/// What comes before a background answer's closing lines: the output or
/// screen so far, then the notices, each followed by a blank line.
fn lead(shown: &str, notices: &[String]) -> String {
    let mut text = String::new();
    if !shown.is_empty() {
        text.push_str(shown);
        text.push_str("\n\n");
    }
    if !notices.is_empty() {
        text.push_str(&notices.join("\n"));
        text.push_str("\n\n");
    }
    text
}

/// `512B`, `80KB`, `3.4MB`.
fn format_size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes < KIB {
        format!("{bytes}B")
    } else if bytes < MIB {
        format!("{}KB", bytes.div_ceil(KIB))
    } else {
        format!("{:.1}MB", bytes as f64 / MIB as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::HeadTail;

    fn render(buf: &HeadTail) -> RenderedOutput {
        render_output(
            buf.head(),
            &buf.tail_vec(),
            buf.tail_offset(),
            buf.newlines(),
            768,
            40,
        )
    }

    #[test]
    fn whole_output_when_it_fits() {
        let mut buf = HeadTail::new(8, 8);
        buf.push(b"one\ntwo\nthree");
        let out = render(&buf);
        assert_eq!(out.body, "one\ntwo\nthree");
        assert_eq!(
            (out.total_lines, out.shown_lines, out.elided_bytes),
            (3, 3, 0)
        );
        assert!(!out.truncated());
        assert_eq!(out.truncation_notice(Ok("job_x"), 40), None);
    }

    #[test]
    fn head_marker_tail_at_line_boundaries() {
        let mut buf = HeadTail::new(10, 10);
        let text: String = (1..=100).map(|i| format!("{i}\n")).collect();
        buf.push(text.as_bytes());
        let out = render(&buf);
        // Head "1\n2\n3\n4\n5\n" is exactly 10 bytes; tail is the last 10 bytes "\n99\n100\n"...
        assert!(out.body.starts_with("1\n2\n3\n4\n5\n[…"), "{}", out.body);
        assert!(out.body.ends_with("99\n100\n"), "{}", out.body);
        assert_eq!(out.total_lines, 100);
        assert_eq!(out.head_lines, 5);
        assert_eq!(out.shown_lines, 7);
        assert_eq!(out.elided_lines, 93);
        assert!(out.body.contains("[…93ln elided…]"));
        assert_eq!(
            out.truncation_notice(Ok("job_x"), 51200).unwrap(),
            format!(
                "[Showing lines 1-5 and 99-100 of 100 (50KB limit); 93 middle lines ({}B) elided. Read artifact://job_x for full output]",
                out.elided_bytes
            )
        );
        assert_eq!(out.shown_bytes + out.elided_bytes, text.len() as u64);
    }

    #[test]
    fn one_giant_line_uses_the_byte_marker() {
        let mut buf = HeadTail::new(10, 10);
        buf.push(&[b'x'; 1000]);
        let out = render(&buf);
        assert_eq!(
            out.body,
            format!("{}\n[…980B elided…]\n{}", "x".repeat(10), "x".repeat(10))
        );
        assert_eq!(out.total_lines, 1);
    }

    #[test]
    fn background_text_follows_the_reference() {
        assert_eq!(
            background_text(
                "job_1",
                "sleep 5",
                "",
                &[],
                "You can use `job` to poll until complete, but prefer to continue with another task in the meanwhile if it's not blocking."
            ),
            "Background job job_1 started: sleep 5\nResult will be delivered automatically when complete.\nYou can use `job` to poll until complete, but prefer to continue with another task in the meanwhile if it's not blocking."
        );
        let notices =
            vec!["Timeout clamped to 3600s (requested 9000s; allowed range 1-3600s).".to_owned()];
        let text = background_text("job_2", "make", "building...\n", &notices, "hint");
        assert!(
            text.starts_with("building...\n\nTimeout clamped to 3600s"),
            "{text}"
        );
        assert!(text.contains("\n\nBackground job job_2 started: make\n"));
    }

    #[test]
    fn the_inline_cap_keeps_60_percent_head_and_25_percent_tail_at_line_boundaries() {
        let text: String = (0..10_000).map(|i| format!("line {i:05}\n")).collect();
        let mut buf = HeadTail::new(20 * 1024, 50 * 1024);
        buf.push(text.as_bytes());
        let out = render_output(
            buf.head(),
            &buf.tail_vec(),
            buf.tail_offset(),
            buf.newlines(),
            768,
            51200,
        );
        let (head, rest) = out.body.split_once("[…").unwrap();
        let tail = rest.split_once("…]\n").unwrap().1;
        // The head buffer (20 KiB) is less than 60% of the cap; the tail is 25%.
        assert!(
            head.len() <= 20 * 1024 && head.len() > 20 * 1024 - 11,
            "{}",
            head.len()
        );
        assert!(
            tail.len() <= 12_800 && tail.len() > 12_800 - 11,
            "{}",
            tail.len()
        );
        assert!(head.ends_with('\n') && tail.ends_with("line 09999\n"));
        assert!(tail.starts_with("line "), "cut at a line boundary");
        assert_eq!(out.shown_lines + out.elided_lines, 10_000);

        // In memory but over the cap: still capped, from the whole stream.
        let small: String = (0..6_000).map(|i| format!("{i:07}\n")).collect();
        let mut buf = HeadTail::new(64 * 1024, 64 * 1024);
        buf.push(small.as_bytes());
        assert!(buf.is_complete());
        let out = render_output(
            buf.head(),
            &buf.tail_vec(),
            buf.tail_offset(),
            buf.newlines(),
            768,
            10_000,
        );
        assert!(out.truncated());
        assert!(out.body.starts_with("0000000\n"));
        assert!(out.body.ends_with("0005999\n"));
        assert!(out.body.len() < 10_000);
        assert_eq!(out.shown_lines + out.elided_lines, 6_000);
    }

    #[test]
    fn a_tail_only_rendering_uses_the_reference_short_notice() {
        let out = RenderedOutput {
            body: String::new(),
            shown_bytes: 10,
            shown_lines: 393,
            head_lines: 0,
            tail_offset: 90,
            elided_bytes: 90,
            elided_lines: 811,
            total_lines: 1204,
            ..RenderedOutput::default()
        };
        assert_eq!(
            out.truncation_notice(Ok("job_1"), 51200).unwrap(),
            "[Showing lines 812-1204 of 1204 (50KB limit). Read artifact://job_1 for full output]"
        );
    }

    fn notice_of(bytes: &[u8]) -> String {
        let mut buf = HeadTail::new(64 * 1024, 64 * 1024);
        buf.push(bytes);
        let out = render_output(
            buf.head(),
            &buf.tail_vec(),
            buf.tail_offset(),
            buf.newlines(),
            768,
            51200,
        );
        out.truncation_notice(Ok("job_1"), 51200).unwrap()
    }

    /// The notices the issue found contradicting themselves.
    #[test]
    fn notices_say_which_part_of_a_long_line_is_left_out() {
        // A huge first line and a short second one.
        let mut two = vec![b'x'; 4_900_000];
        two.extend_from_slice(b"\nend\n");
        assert_eq!(
            notice_of(&two),
            "[Showing lines 1-1 and 2-2 of 2 (50KB limit); 4.6MB elided: the rest of line 1. Read artifact://job_1 for full output]"
        );
        // A short line and a 60 KB last line.
        let mut last = b"short\n".to_vec();
        last.extend_from_slice(&[b'y'; 60_000]);
        assert_eq!(
            notice_of(&last),
            "[Showing lines 1-1 and 2-2 of 2 (50KB limit); 47KB elided: the start of line 2; 1 long line cut short (…). Read artifact://job_1 for full output]"
        );
        // One line, cut in its middle.
        assert_eq!(
            notice_of(&[b'z'; 100_000]),
            "[Showing lines 1-1 and 1-1 of 1 (50KB limit); 56KB of line 1 elided; 1 long line cut short (…). Read artifact://job_1 for full output]"
        );
        // Whole lines around a long one.
        let mut mixed: Vec<u8> = (0..3).flat_map(|i| format!("{i}\n").into_bytes()).collect();
        mixed.extend_from_slice(&[b'w'; 80_000]);
        mixed.extend_from_slice(b"\nlast\n");
        assert_eq!(
            notice_of(&mixed),
            "[Showing lines 1-3 and 5-5 of 5 (50KB limit); 1 middle line (79KB) elided. Read artifact://job_1 for full output]"
        );
    }

    /// Whatever the output, the notice's line numbers are in order and
    /// within the total, and no count of left-out lines is zero.
    #[test]
    fn notices_never_contradict_themselves() {
        let shapes: Vec<Vec<u8>> = (0..40)
            .map(|seed: usize| {
                let mut bytes = Vec::new();
                let mut x = seed.wrapping_mul(2_654_435_761) | 1;
                while bytes.len() < 120_000 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let len = match x % 4 {
                        0 => x % 10,
                        1 => x % 1_000,
                        2 => x % 30_000,
                        _ => x % 200,
                    };
                    bytes.extend(std::iter::repeat_n(b'a', len));
                    bytes.push(b'\n');
                }
                if seed % 2 == 1 {
                    bytes.pop();
                }
                bytes
            })
            .collect();
        for bytes in shapes {
            let notice = notice_of(&bytes);
            assert!(
                !notice.contains(" 0 middle lines") && !notice.contains(" 0 whole"),
                "{notice}"
            );
            let numbers: Vec<u64> = notice
                .split(|c: char| !c.is_ascii_digit())
                .filter(|s| !s.is_empty())
                .take(5)
                .map(|s| s.parse().unwrap())
                .collect();
            // 1, head, first tail, last, total.
            let [one, head, first, last, total] = numbers[..] else {
                panic!("{notice}")
            };
            assert_eq!((one, last), (1, total), "{notice}");
            assert!(head <= first && first <= last, "{notice}");
            if notice.contains("middle line") {
                assert!(first > head + 1, "{notice}");
            }
        }
    }

    #[test]
    fn result_text_layout() {
        let notices =
            vec!["Timeout clamped to 3600s (requested 9999s; allowed range 1-3600s).".to_owned()];
        let text = result_text(&ResultTextParts {
            body: "hello\n",
            wall_time: Duration::from_millis(1234),
            notices: &notices,
            exit_code: Some(2),
            ..Default::default()
        });
        assert_eq!(
            text,
            "hello\n\nWall time: 1.23 seconds\nTimeout clamped to 3600s (requested 9999s; allowed range 1-3600s).\n\nCommand exited with code 2"
        );
        let text = result_text(&ResultTextParts {
            body: "",
            stopped: Some(Stopped::Deadline(1)),
            wall_time: Duration::from_millis(1000),
            ..Default::default()
        });
        assert_eq!(
            text,
            "[Command timed out after 1 seconds]\n(no output)\n\nWall time: 1.00 seconds"
        );
        let text = result_text(&ResultTextParts {
            body: "a\n",
            stopped: Some(Stopped::Idle(Duration::from_millis(1500))),
            wall_time: Duration::from_millis(1600),
            ..Default::default()
        });
        assert_eq!(
            text,
            "[Command produced no output for 1.5 seconds]\na\n\nWall time: 1.60 seconds"
        );
    }
}
