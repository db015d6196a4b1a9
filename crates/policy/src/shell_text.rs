//! Shell text as bash reads it: words and operators, from a real bash
//! tokenizer and word parser (`brush-parser`, the parser of the brush shell),
//! with byte offsets into the text, so a rewrite can replace exactly the
//! part of a word it proves equivalent and leave every other byte alone.

use std::ops::Range;

use brush_parser::ParserOptions;
use brush_parser::Token;
use brush_parser::word::WordPiece;
use brush_parser::word::WordPieceWithSource;

/// A token of shell text.
#[derive(Debug)]
pub(crate) enum Tok {
    /// A word: its byte range in the text and its pieces (piece offsets are
    /// relative to the word's start).
    Word {
        range: Range<usize>,
        pieces: Vec<WordPieceWithSource>,
    },
    /// An operator (`&&`, `;`, `|`, `>`, a newline, ...) and the byte
    /// offset just past it.
    Operator { text: String, end: usize },
    /// A here-document's delimiter, body or end marker (the body is data for
    /// its command, and the delimiter must keep matching the end marker).
    Heredoc,
}

/// The tokens of `text`, or `None` when bash itself would not read it (an
/// unterminated quote, ...): rewrites then leave the text to bash unchanged.
pub(crate) fn tokens(text: &str) -> Option<Vec<Tok>> {
    let raw = brush_parser::tokenize_str(text).ok()?;
    // The tokenizer counts characters; rewrites need byte offsets.
    let mut bytes_at: Vec<usize> = text.char_indices().map(|(b, _)| b).collect();
    bytes_at.push(text.len());
    let byte = |char_index: usize| bytes_at.get(char_index).copied();
    let options = ParserOptions::default();
    let mut out = Vec::with_capacity(raw.len());
    // After `<<`: the delimiter word, then the body, then the end marker.
    let mut heredoc_words = 0usize;
    for token in raw {
        match token {
            Token::Operator(op, span) => {
                if op == "<<" || op == "<<-" {
                    heredoc_words = 3;
                }
                out.push(Tok::Operator {
                    text: op,
                    end: byte(span.end.index)?,
                });
            }
            Token::Word(word, span) => {
                if heredoc_words > 0 {
                    heredoc_words -= 1;
                    out.push(Tok::Heredoc);
                    continue;
                }
                let range = byte(span.start.index)?..byte(span.end.index)?;
                if text.get(range.clone())? != word {
                    return None;
                }
                let pieces = brush_parser::word::parse(&word, &options).ok()?;
                out.push(Tok::Word { range, pieces });
            }
        }
    }
    Some(out)
}

/// The literal value of a word whose pieces are only quoted or unquoted
/// text and escapes, with no expansion of any kind: no parameter, command
/// or arithmetic expansion, no glob or brace pattern, no tilde.
pub(crate) fn literal(pieces: &[WordPieceWithSource]) -> Option<String> {
    let mut value = String::new();
    for piece in pieces {
        match &piece.piece {
            WordPiece::Text(text) => {
                if text.contains(['*', '?', '[', '{', '}']) {
                    return None;
                }
                value.push_str(text);
            }
            WordPiece::SingleQuotedText(text) => value.push_str(text),
            WordPiece::DoubleQuotedSequence(inner) => {
                value.push_str(&double_quoted_literal(inner)?)
            }
            WordPiece::EscapeSequence(escape) => value.push_str(unescape(escape)?),
            _ => return None,
        }
    }
    Some(value)
}

/// The literal value inside double quotes (text and escapes only).
fn double_quoted_literal(pieces: &[WordPieceWithSource]) -> Option<String> {
    let mut value = String::new();
    for piece in pieces {
        match &piece.piece {
            WordPiece::Text(text) => value.push_str(text),
            WordPiece::EscapeSequence(escape) => value.push_str(unescape(escape)?),
            _ => return None,
        }
    }
    Some(value)
}

/// `\x` outside or inside double quotes stands for `x`; `\<newline>` for
/// nothing.
fn unescape(escape: &str) -> Option<&str> {
    let rest = escape.strip_prefix('\\')?;
    Some(if rest == "\n" { "" } else { rest })
}

/// Words that make a command compound (or more than one simple command).
const COMPOUND_WORDS: &[&str] = &[
    "if", "then", "else", "elif", "fi", "for", "while", "until", "do", "done", "case", "esac",
    "select", "function", "{", "}", "!", "[[", "]]", "time", "coproc",
];

/// The words of `command` when it is one simple command, as bash reads it:
/// no pipe, list, redirection, subshell, compound or here-document, its
/// program a literal word. Variable assignments before the program are left
/// out; a word with an expansion reads as an empty string (it matches no
/// literal). `None` for anything else.
///
/// ```
/// use shellvisor_policy::simple_command_words;
///
/// assert_eq!(
///     simple_command_words("RUST_LOG=1 cargo build --release\n"),
///     Some(vec!["cargo".to_owned(), "build".to_owned(), "--release".to_owned()])
/// );
/// assert_eq!(simple_command_words("git status | cat"), None);
/// assert_eq!(simple_command_words("make && make install"), None);
/// assert_eq!(simple_command_words("$TOOL run"), None);
/// ```
pub fn simple_command_words(command: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    for token in tokens(command)? {
        match token {
            Tok::Operator { text, .. } if text == "\n" => {}
            Tok::Operator { .. } | Tok::Heredoc => return None,
            Tok::Word { range, pieces } => {
                let raw = command.get(range)?;
                if words.is_empty() && is_assignment(raw) {
                    continue;
                }
                if words.is_empty() && COMPOUND_WORDS.contains(&raw) {
                    return None;
                }
                match literal(&pieces) {
                    Some(value) => words.push(value),
                    None if words.is_empty() => return None,
                    None => words.push(String::new()),
                }
            }
        }
    }
    // `((` and `(` arrive as operators; anything else is a command.
    (!words.is_empty()).then_some(words)
}

fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let name = name.strip_suffix('+').unwrap_or(name);
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn only_one_simple_command_has_words() {
        let words = |text: &str| simple_command_words(text);
        let owned = |list: &[&str]| Some(list.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>());
        assert_eq!(words("FOO=1 BAR+=x make -j4"), owned(&["make", "-j4"]));
        assert_eq!(words("echo 'a|b' \"c;d\""), owned(&["echo", "a|b", "c;d"]));
        assert_eq!(words("cargo build $FLAGS"), owned(&["cargo", "build", ""]));
        for text in [
            "cd x && cargo build",
            "cargo build 2>&1",
            "cargo build > log",
            "(cargo build)",
            "{ make; }",
            "if true; then make; fi",
            "time make",
            "make &",
            "cat <<EOF\nx\nEOF",
            "git status | cat",
            "",
            "FOO=1",
            "'unterminated",
        ] {
            assert_eq!(words(text), None, "{text:?}");
        }
    }

    fn words(text: &str) -> Vec<&str> {
        tokens(text)
            .unwrap()
            .into_iter()
            .filter_map(|t| match t {
                Tok::Word { range, .. } => Some(&text[range]),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn words_end_where_bash_ends_them() {
        assert_eq!(
            words("echo ok > local://f.txt; echo next"),
            ["echo", "ok", "local://f.txt", "echo", "next"]
        );
        assert_eq!(
            words("cat local://f.txt|tr a-z A-Z"),
            ["cat", "local://f.txt", "tr", "a-z", "A-Z"]
        );
        assert_eq!(words("é local://é.txt&&x"), ["é", "local://é.txt", "x"]);
    }

    #[test]
    fn heredoc_bodies_are_not_words() {
        assert_eq!(
            words("cat <<EOF\nlocal://x\nEOF\necho done"),
            ["cat", "echo", "done"]
        );
    }

    #[test]
    fn literals_are_words_without_expansion() {
        let literal_of = |text: &str| match tokens(text).unwrap().remove(0) {
            Tok::Word { pieces, .. } => literal(&pieces),
            _ => None,
        };
        assert_eq!(
            literal_of("/d/with\\ space").as_deref(),
            Some("/d/with space")
        );
        assert_eq!(literal_of("'a b'\"c\\\"d\"").as_deref(), Some("a bc\"d"));
        for expanding in ["/us*", "$HOME", "~root", "~/x", "a{b,c}", "$(pwd)", "`pwd`"] {
            assert_eq!(literal_of(expanding), None, "{expanding}");
        }
        assert!(tokens("echo 'unterminated").is_none());
    }
}
