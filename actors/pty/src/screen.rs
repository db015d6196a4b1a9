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
pub(crate) struct SharedScreen(Arc<Mutex<vt100::Parser>>);

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
        Self(Arc::new(Mutex::new(vt100::Parser::new(
            rows, cols, SCROLLBACK,
        ))))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, vt100::Parser> {
        // A panic while holding the lock leaves a usable (if partial) screen.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn process(&self, bytes: &[u8]) {
        self.lock().process(bytes);
    }

    pub(crate) fn resize(&self, size: TerminalSize) {
        let (rows, cols) = dims(size);
        self.lock().screen_mut().set_size(rows, cols);
    }

    pub(crate) fn application_cursor(&self) -> bool {
        self.lock().screen().application_cursor()
    }

    pub(crate) fn render(&self) -> Screen {
        let parser = self.lock();
        let screen = parser.screen();
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
}
