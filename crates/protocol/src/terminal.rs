//! Pseudo-terminal runs: terminal size, run state, and the rendered screen.

use serde::Deserialize;
use serde::Serialize;

/// A terminal's size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TerminalSize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl TerminalSize {
    /// The size used when the caller gives none (the reference tool's 120×40).
    pub const DEFAULT: TerminalSize = TerminalSize {
        cols: 120,
        rows: 40,
    };
    /// Fewest columns.
    pub const MIN_COLS: u16 = 20;
    /// Most columns.
    pub const MAX_COLS: u16 = 400;
    /// Fewest rows.
    pub const MIN_ROWS: u16 = 5;
    /// Most rows.
    pub const MAX_ROWS: u16 = 200;

    /// A size from optional values: a missing one takes the default, and both
    /// are clamped to 20..=400 columns and 5..=200 rows.
    ///
    /// ```
    /// use shellvisor_protocol::TerminalSize;
    ///
    /// assert_eq!(TerminalSize::clamped(None, None), TerminalSize::DEFAULT);
    /// assert_eq!(TerminalSize::clamped(Some(5), Some(1000)), TerminalSize { cols: 20, rows: 200 });
    /// ```
    pub fn clamped(cols: Option<u16>, rows: Option<u16>) -> Self {
        Self {
            cols: cols
                .unwrap_or(Self::DEFAULT.cols)
                .clamp(Self::MIN_COLS, Self::MAX_COLS),
            rows: rows
                .unwrap_or(Self::DEFAULT.rows)
                .clamp(Self::MIN_ROWS, Self::MAX_ROWS),
        }
    }
}

impl Default for TerminalSize {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// Where a run on a pseudo-terminal stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PtyState {
    /// The program is running (or blocked on something other than the terminal).
    Running,
    /// The terminal's foreground program is blocked reading the terminal: it
    /// waits for input (a prompt, a REPL, a pager, a TUI idle for keys).
    AwaitingInput,
    /// The program ended with this status (128+N for signal N; `None` when
    /// it was stopped before one could be observed).
    Exited {
        /// Its exit status.
        code: Option<i32>,
    },
}

impl PtyState {
    /// The wire name: `running`, `awaiting_input` or `exited`.
    pub fn as_str(self) -> &'static str {
        match self {
            PtyState::Running => "running",
            PtyState::AwaitingInput => "awaiting_input",
            PtyState::Exited { .. } => "exited",
        }
    }
}

/// The visible contents of a terminal, as a human would see them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Screen {
    /// Each visible row, trailing blanks removed.
    pub lines: Vec<String>,
    /// Cursor row (0-based).
    pub cursor_row: u16,
    /// Cursor column (0-based).
    pub cursor_col: u16,
    /// The terminal's size.
    pub size: TerminalSize,
    /// Whether a full-screen program switched to the alternate screen.
    pub alternate_screen: bool,
}

impl Screen {
    /// The rows joined by newlines, without the blank rows at the bottom.
    ///
    /// ```
    /// use shellvisor_protocol::Screen;
    ///
    /// let screen = Screen { lines: vec!["a".into(), "".into(), "b".into(), "".into()], ..Screen::default() };
    /// assert_eq!(screen.text(), "a\n\nb");
    /// ```
    pub fn text(&self) -> String {
        let used = self
            .lines
            .iter()
            .rposition(|line| !line.is_empty())
            .map_or(0, |last| last + 1);
        self.lines[..used].join("\n")
    }
}
