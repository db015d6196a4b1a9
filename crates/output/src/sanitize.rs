//! Raw bytes to model-facing text: UTF-8 decoding at byte boundaries (invalid
//! sequences become U+FFFD), ANSI escape sequences and control characters
//! removed, `\r` overwrites collapsed to what a terminal would finally show,
//! and long lines capped.

/// Replacement for invalid UTF-8.
const REPLACEMENT: char = '\u{FFFD}';
/// Appended to a line cut at the column cap.
const ELLIPSIS: char = '…';
/// Longest escape string (OSC, DCS, ...) swallowed before giving up on it.
const MAX_ESCAPE_STRING_CHARS: usize = 4096;
/// Longest CSI sequence accepted before treating it as garbage.
const MAX_CSI_CHARS: usize = 256;

/// Where the escape-sequence parser is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Escape {
    Ground,
    Esc,
    EscIntermediate,
    Csi,
    /// Operating-system command, ended by BEL or ST.
    Osc,
    /// DCS, SOS, PM or APC string, ended by ST.
    Str,
    /// Saw ESC inside an OSC/DCS string: `\` ends it.
    StrEsc,
}

/// A streaming sanitizer. Feed raw chunks with [`Sanitizer::push`]; it returns
/// the text of every line completed so far. [`Sanitizer::finish`] returns the
/// last, unterminated line. The output does not depend on how the input was
/// split into chunks, and it never panics on any input.
#[derive(Debug)]
pub struct Sanitizer {
    max_columns: usize,
    // UTF-8 decoder state.
    need: u8,
    code_point: u32,
    lower: u8,
    upper: u8,
    // Escape parser state.
    escape: Escape,
    escape_len: usize,
    // The line being built, as terminal cells, with the cursor column.
    line: Vec<char>,
    cursor: usize,
    line_overflow: bool,
    /// Lines emitted cut at the column cap.
    cut_lines: u64,
    out: String,
}

impl Sanitizer {
    /// A sanitizer that caps lines at `max_columns` bytes (the reference tool
    /// uses 768: 765 bytes of text and `…`).
    pub fn new(max_columns: usize) -> Self {
        Self {
            max_columns: max_columns.max(4),
            need: 0,
            code_point: 0,
            lower: 0x80,
            upper: 0xBF,
            escape: Escape::Ground,
            escape_len: 0,
            line: Vec::new(),
            cursor: 0,
            line_overflow: false,
            cut_lines: 0,
            out: String::new(),
        }
    }

    /// How many lines emitted so far were cut at the column cap.
    pub fn cut_lines(&self) -> u64 {
        self.cut_lines
    }

    /// Consumes raw bytes; returns the text of the lines they completed.
    pub fn push(&mut self, bytes: &[u8]) -> String {
        for &byte in bytes {
            self.decode(byte);
        }
        std::mem::take(&mut self.out)
    }

    /// Ends the stream; returns what is left (an incomplete character becomes
    /// U+FFFD, an unterminated line is emitted without a newline).
    pub fn finish(&mut self) -> String {
        if self.need > 0 {
            self.need = 0;
            self.on_char(REPLACEMENT);
        }
        if !self.line.is_empty() || self.line_overflow {
            self.emit_line();
        }
        self.escape = Escape::Ground;
        std::mem::take(&mut self.out)
    }

    fn decode(&mut self, byte: u8) {
        if self.need > 0 {
            if (self.lower..=self.upper).contains(&byte) {
                self.code_point = (self.code_point << 6) | u32::from(byte & 0x3F);
                self.need -= 1;
                self.lower = 0x80;
                self.upper = 0xBF;
                if self.need == 0 {
                    let c = char::from_u32(self.code_point).unwrap_or(REPLACEMENT);
                    self.on_char(c);
                }
                return;
            }
            // Invalid continuation: the partial sequence is one replacement,
            // and this byte starts over.
            self.need = 0;
            self.lower = 0x80;
            self.upper = 0xBF;
            self.on_char(REPLACEMENT);
        }
        match byte {
            0x00..=0x7F => self.on_char(char::from(byte)),
            0xC2..=0xDF => self.start_sequence(byte & 0x1F, 1, 0x80, 0xBF),
            0xE0 => self.start_sequence(byte & 0x0F, 2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => self.start_sequence(byte & 0x0F, 2, 0x80, 0xBF),
            0xED => self.start_sequence(byte & 0x0F, 2, 0x80, 0x9F),
            0xF0 => self.start_sequence(byte & 0x07, 3, 0x90, 0xBF),
            0xF1..=0xF3 => self.start_sequence(byte & 0x07, 3, 0x80, 0xBF),
            0xF4 => self.start_sequence(byte & 0x07, 3, 0x80, 0x8F),
            _ => self.on_char(REPLACEMENT),
        }
    }

    fn start_sequence(&mut self, bits: u8, need: u8, lower: u8, upper: u8) {
        self.code_point = u32::from(bits);
        self.need = need;
        self.lower = lower;
        self.upper = upper;
    }

    fn on_char(&mut self, c: char) {
        match self.escape {
            Escape::Ground => self.ground(c),
            Escape::Esc => match c {
                '[' => self.enter(Escape::Csi),
                ']' => self.enter(Escape::Osc),
                'P' | 'X' | '^' | '_' => self.enter(Escape::Str),
                '\x1b' => self.enter(Escape::Esc),
                ' '..='/' => self.enter(Escape::EscIntermediate),
                '0'..='~' => self.escape = Escape::Ground,
                _ => {
                    self.escape = Escape::Ground;
                    self.ground(c);
                }
            },
            Escape::EscIntermediate => match c {
                ' '..='/' => {}
                '0'..='~' => self.escape = Escape::Ground,
                _ => {
                    self.escape = Escape::Ground;
                    self.ground(c);
                }
            },
            Escape::Csi => {
                self.escape_len += 1;
                match c {
                    '0'..='?' | ' '..='/' if self.escape_len <= MAX_CSI_CHARS => {}
                    '@'..='~' => self.escape = Escape::Ground,
                    '\x1b' => self.enter(Escape::Esc),
                    _ => {
                        self.escape = Escape::Ground;
                        self.ground(c);
                    }
                }
            }
            Escape::Osc | Escape::Str => {
                self.escape_len += 1;
                match c {
                    '\x07' if self.escape == Escape::Osc => self.escape = Escape::Ground,
                    '\u{9c}' => self.escape = Escape::Ground,
                    '\x1b' => self.escape = Escape::StrEsc,
                    _ if self.escape_len > MAX_ESCAPE_STRING_CHARS => {
                        self.escape = Escape::Ground;
                        self.ground(c);
                    }
                    _ => {}
                }
            }
            Escape::StrEsc => {
                if c == '\\' {
                    self.escape = Escape::Ground;
                } else {
                    self.enter(Escape::Esc);
                    self.on_char(c);
                }
            }
        }
    }

    fn enter(&mut self, state: Escape) {
        self.escape = state;
        self.escape_len = 0;
    }

    fn ground(&mut self, c: char) {
        match c {
            '\n' => {
                self.emit_line();
                self.out.push('\n');
            }
            '\r' => self.cursor = 0,
            '\t' => self.put('\t'),
            '\x08' => self.cursor = self.cursor.saturating_sub(1),
            '\x1b' => self.enter(Escape::Esc),
            '\u{9b}' => self.enter(Escape::Csi),
            '\u{9d}' => self.enter(Escape::Osc),
            '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => self.enter(Escape::Str),
            c if c.is_control() => {}
            c => self.put(c),
        }
    }

    fn put(&mut self, c: char) {
        if self.cursor < self.line.len() {
            self.line[self.cursor] = c;
        } else if self.line.len() < self.max_columns {
            // Cells past the cursor never exist: the cursor only moves by
            // writing, `\r` and backspace, so it is at most the line length.
            self.line.push(c);
        } else {
            self.line_overflow = true;
            return;
        }
        self.cursor += 1;
    }

    fn emit_line(&mut self) {
        let start = self.out.len();
        self.out.extend(self.line.iter());
        let len = self.out.len() - start;
        if len > self.max_columns || self.line_overflow {
            let mut cut = start + self.max_columns.saturating_sub(ELLIPSIS.len_utf8());
            while !self.out.is_char_boundary(cut) {
                cut -= 1;
            }
            self.out.truncate(cut);
            self.out.push(ELLIPSIS);
            self.cut_lines += 1;
        }
        self.line.clear();
        self.cursor = 0;
        self.line_overflow = false;
    }
}

/// Sanitizes a whole byte string at once (see [`Sanitizer`]).
pub fn sanitize(bytes: &[u8], max_columns: usize) -> String {
    sanitize_counting(bytes, max_columns).0
}

/// [`sanitize`], and how many lines it cut at the column cap.
pub(crate) fn sanitize_counting(bytes: &[u8], max_columns: usize) -> (String, u64) {
    let mut sanitizer = Sanitizer::new(max_columns);
    let mut text = sanitizer.push(bytes);
    text.push_str(&sanitizer.finish());
    (text, sanitizer.cut_lines())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn strips_ansi_and_controls_and_keeps_tabs() {
        assert_eq!(
            sanitize(b"\x1b[1;31mbold\x1b[0m\tx\x07\x00y\n", 768),
            "bold\txy\n"
        );
        assert_eq!(
            sanitize(b"a\x1b]0;title\x07b\x1b]8;;http://x\x1b\\c\n", 768),
            "abc\n"
        );
        assert_eq!(sanitize(b"a\x1bPdcs stuff\x1b\\b", 768), "ab");
        assert_eq!(sanitize(b"\x1b(Bplain", 768), "plain");
    }

    #[test]
    fn carriage_returns_overwrite_like_a_terminal() {
        assert_eq!(sanitize(b"10%\r20%\r100%\n", 768), "100%\n");
        assert_eq!(sanitize(b"abcdef\rXY\n", 768), "XYcdef\n");
        assert_eq!(sanitize(b"line\r\n", 768), "line\n");
        assert_eq!(sanitize(b"ab\x08c\n", 768), "ac\n");
    }

    #[test]
    fn invalid_utf8_becomes_replacement_characters() {
        assert_eq!(sanitize(b"a\xffb", 768), "a\u{FFFD}b");
        assert_eq!(sanitize("é".as_bytes(), 768), "é");
        assert_eq!(sanitize(&"é".as_bytes()[..1], 768), "\u{FFFD}");
        assert_eq!(sanitize(b"\xe2\x82x", 768), "\u{FFFD}x");
        assert_eq!(
            sanitize(b"\xed\xa0\x80", 768),
            String::from_utf8_lossy(b"\xed\xa0\x80")
        );
    }

    #[test]
    fn long_lines_are_capped_with_an_ellipsis_at_a_char_boundary() {
        let line = "x".repeat(2000);
        let out = sanitize(line.as_bytes(), 768);
        assert_eq!(out.len(), 768);
        assert!(out.ends_with('…'));
        let wide = "é".repeat(1000);
        let out = sanitize(format!("{wide}\nnext\n").as_bytes(), 768);
        let first = out.lines().next().unwrap();
        assert!(first.len() <= 768 && first.ends_with('…'));
        assert!(out.ends_with("next\n"));
    }

    proptest! {
        #[test]
        fn any_bytes_any_split_gives_the_same_valid_text(
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let whole = sanitize(&bytes, 64);
            let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut sanitizer = Sanitizer::new(64);
            let mut pieces = String::new();
            let mut start = 0;
            for point in points {
                pieces.push_str(&sanitizer.push(&bytes[start..point]));
                start = point;
            }
            pieces.push_str(&sanitizer.push(&bytes[start..]));
            pieces.push_str(&sanitizer.finish());
            prop_assert_eq!(&pieces, &whole);
            for line in whole.split('\n') {
                prop_assert!(line.len() <= 64);
                prop_assert!(!line.chars().any(|c| c.is_control() && c != '\t'));
            }
        }

        #[test]
        fn plain_text_passes_through(text in "[a-zA-Z0-9 .,;:!?é日本\t\n-]{0,200}") {
            prop_assert_eq!(sanitize(text.as_bytes(), 10_000), text);
        }
    }
}
