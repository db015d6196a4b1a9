//! The rendered screen: a terminal emulator fed with the program's output.

use std::num::NonZeroU16;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;

use shellvisor_protocol::Screen;
use shellvisor_protocol::TerminalSize;

/// A terminal emulator shared by the reader thread (which feeds it) and the
/// actor (which renders and resizes it). Each use holds the lock briefly.
#[derive(Clone)]
pub(crate) struct SharedScreen(Arc<Mutex<Emulator>>);

/// The emulator and the last view a full-screen program showed before it
/// left the alternate screen (which restores the main one and loses it).
struct Emulator {
    parser: vt100::Parser,
    last_full_screen: Option<Screen>,
    /// The full-screen view as it was after the last text, when what came
    /// since may have moved it (a newline that scrolls, a clear): programs
    /// tidy up so before they leave.
    view_at_text: Option<Screen>,
}

impl Emulator {
    /// Processes `bytes`, keeping [`Emulator::view_at_text`] current.
    fn feed(&mut self, bytes: &[u8]) {
        let end = last_text_end(bytes);
        let alternate = self.parser.screen().alternate_screen();
        if end == 0 {
            if alternate && self.view_at_text.is_none() && disturbs(bytes) {
                self.view_at_text = Some(render(self.parser.screen()));
            }
            self.parser.process(bytes);
            return;
        }
        self.parser.process(&bytes[..end]);
        self.view_at_text = (self.parser.screen().alternate_screen() && disturbs(&bytes[end..]))
            .then(|| render(self.parser.screen()));
        self.parser.process(&bytes[end..]);
    }
}

/// Whether `bytes` (no text) may move what the screen shows: a line feed
/// (which scrolls at the bottom), an erase, a scroll, a reset.
fn disturbs(bytes: &[u8]) -> bool {
    if bytes.iter().any(|b| matches!(b, b'\n' | 0x0b | 0x0c)) {
        return true;
    }
    let mut i = 0;
    while let Some(offset) = memchr::memchr(0x1b, &bytes[i..]) {
        i += offset + 1;
        match bytes.get(i) {
            Some(b'M' | b'c') => return true,
            Some(b'[') => {
                let params = i + 1;
                let len = bytes[params..]
                    .iter()
                    .position(|b| (0x40..=0x7e).contains(b));
                if let Some(len) = len {
                    if matches!(bytes[params + len], b'J' | b'S' | b'T' | b'L' | b'M') {
                        return true;
                    }
                    i = params + len;
                }
            }
            _ => {}
        }
    }
    false
}

/// The sequences that leave the alternate screen.
const LEAVE_ALTERNATE: [&[u8]; 3] = [b"\x1b[?1049l", b"\x1b[?1047l", b"\x1b[?47l"];

impl std::fmt::Debug for SharedScreen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedScreen")
    }
}

/// Lines of scrollback kept (the screen shows only the visible rows).
const SCROLLBACK: usize = 0;

impl SharedScreen {
    pub(crate) fn new(size: TerminalSize) -> Self {
        let (rows, cols) = dims(size);
        Self(Arc::new(Mutex::new(Emulator {
            parser: vt100::Parser::new(rows, cols, SCROLLBACK),
            last_full_screen: None,
            view_at_text: None,
        })))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Emulator> {
        // A panic while holding the lock leaves a usable (if partial) screen.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Feeds output. Where it leaves the alternate screen, the view is kept
    /// first (see [`SharedScreen::last_full_screen`]).
    pub(crate) fn process(&self, bytes: &[u8]) {
        let mut emulator = self.lock();
        let mut rest = bytes;
        while let Some((at, len)) = leave_alternate(rest) {
            emulator.feed(&rest[..at]);
            if emulator.parser.screen().alternate_screen() {
                let view = emulator
                    .view_at_text
                    .take()
                    .unwrap_or_else(|| render(emulator.parser.screen()));
                emulator.last_full_screen = Some(view);
            }
            emulator.parser.process(&rest[at..at + len]);
            rest = &rest[at + len..];
        }
        emulator.feed(rest);
    }

    pub(crate) fn resize(&self, size: TerminalSize) {
        let (rows, cols) = dims(size);
        self.lock().parser.screen_mut().set_size(rows, cols);
    }

    pub(crate) fn application_cursor(&self) -> bool {
        self.lock().parser.screen().application_cursor()
    }

    /// The last view of a full-screen program: the alternate screen as it
    /// left it, or as it is now if it is still on it. `None` for a program
    /// that never used it.
    pub(crate) fn last_full_screen(&self) -> Option<Screen> {
        let emulator = self.lock();
        let screen = emulator.parser.screen();
        if screen.alternate_screen() {
            return Some(render(screen));
        }
        emulator.last_full_screen.clone()
    }

    pub(crate) fn render(&self) -> Screen {
        render(self.lock().parser.screen())
    }
}

/// Where the first sequence leaving the alternate screen starts in `bytes`,
/// and its length.
fn leave_alternate(bytes: &[u8]) -> Option<(usize, usize)> {
    LEAVE_ALTERNATE
        .iter()
        .filter_map(|seq| memchr::memmem::find(bytes, seq).map(|at| (at, seq.len())))
        .min()
}

/// Where the last printable text in `bytes` ends (`0`: none), skipping
/// control characters and escape sequences.
fn last_text_end(bytes: &[u8]) -> usize {
    let mut end = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0x1b => {
                i += 1;
                match bytes.get(i) {
                    // CSI: parameters, then a final byte.
                    Some(b'[') => {
                        i += 1;
                        while bytes.get(i).is_some_and(|b| !(0x40..=0x7e).contains(b)) {
                            i += 1;
                        }
                    }
                    // OSC: up to BEL or ESC \.
                    Some(b']') => {
                        while i < bytes.len() && bytes[i] != 0x07 && bytes[i] != 0x1b {
                            i += 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            0x00..=0x1f | 0x7f => i += 1,
            _ => {
                i += 1;
                end = i;
            }
        }
    }
    end.min(bytes.len())
}

fn render(screen: &vt100::Screen) -> Screen {
    let (rows, cols) = screen.size();
    let lines = screen
        .rows(0, cols.get())
        .map(|row| row.trim_end().to_owned())
        .collect();
    let (cursor_row, cursor_col) = screen.cursor_position();
    Screen {
        lines,
        cursor_row,
        cursor_col,
        size: TerminalSize {
            cols: cols.get(),
            rows: rows.get(),
        },
        alternate_screen: screen.alternate_screen(),
    }
}

fn dims(size: TerminalSize) -> (NonZeroU16, NonZeroU16) {
    let clamped = TerminalSize::clamped(Some(size.cols), Some(size.rows));
    // Clamped sizes are at least 5 rows and 20 columns, so never zero.
    (
        NonZeroU16::new(clamped.rows).unwrap_or(NonZeroU16::MIN),
        NonZeroU16::new(clamped.cols).unwrap_or(NonZeroU16::MIN),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_addressing_lands_where_a_terminal_puts_it() {
        let screen = SharedScreen::new(TerminalSize { cols: 40, rows: 10 });
        // tput cup 5 5 (0-based row 5, column 5) then X.
        screen.process(b"hello\r\n\x1b[6;6HX");
        let rendered = screen.render();
        assert_eq!(rendered.lines[0], "hello");
        assert_eq!(rendered.lines[5], "     X");
        assert_eq!((rendered.cursor_row, rendered.cursor_col), (5, 6));
        assert_eq!(rendered.size, TerminalSize { cols: 40, rows: 10 });
        screen.resize(TerminalSize { cols: 30, rows: 8 });
        assert_eq!(screen.render().lines.len(), 8);
    }

    /// What an editor shows before it leaves the alternate screen is kept,
    /// also when the leaving sequence arrives in the same chunk.
    #[test]
    fn the_last_full_screen_view_survives_leaving_the_alternate_screen() {
        let screen = SharedScreen::new(TerminalSize { cols: 40, rows: 10 });
        screen.process(b"$ vim f\r\n");
        assert_eq!(screen.last_full_screen(), None);
        screen.process(b"\x1b[?1049h\x1b[Hhello\x1b[10;1H\"f\" 1L written");
        assert!(screen.last_full_screen().unwrap().alternate_screen);
        // What vim writes on `:wq`: the message, then a newline that scrolls
        // the view and modes reset, then it leaves; in one chunk or several.
        screen.process(b"\x1b[2J\x1b[Hhello world\x1b[10;1H\"f\" 1L, 12B written\r\x1b[23;2t");
        screen.process(b"\r\r\n");
        screen.process(b"\x1b[?1004l\x1b>\x1b[?1049l\x1b[23;0;0tdone\r\n");
        let view = screen.last_full_screen().unwrap();
        assert_eq!(view.lines[0], "hello world");
        assert_eq!(view.lines[9], "\"f\" 1L, 12B written");
        let after = screen.render();
        assert!(!after.alternate_screen);
        assert_eq!(after.text(), "$ vim f\ndone");

        // All at once.
        let screen = SharedScreen::new(TerminalSize { cols: 40, rows: 10 });
        screen.process(b"\x1b[?1049h\x1b[Hhi\x1b[10;1Hbye\r\r\n\x1b[?1049l");
        let view = screen.last_full_screen().unwrap();
        assert_eq!(
            (view.lines[0].as_str(), view.lines[9].as_str()),
            ("hi", "bye")
        );
    }
}
