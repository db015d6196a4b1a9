//! Can a command change the shell's exported environment?
//!
//! After each run the runtime snapshots the shell's exported variables
//! (`export -p`), so a restarted or isolated shell starts from the same
//! environment. The snapshot costs about 0.65 µs of shell time per exported
//! variable, so it is skipped when a command provably cannot change the
//! environment. The test is conservative: any doubt means "may change".
//!
//! A command may change the environment only through the current shell:
//! an assignment, a builtin that sets, unsets, exports or sources (`export`,
//! `declare`, `read`, `.`, `eval`, ...), a call of a shell function (known from
//! the last snapshot), an alias or a trap (then every command counts), or a
//! word in command position that is expanded at run time (`$cmd`). External
//! programs, subshells and pipelines run in child processes and cannot.

use std::collections::BTreeSet;

/// Builtins and keywords that can set, unset or export variables, run code in
/// the current shell, or change how later commands run.
const ENV_CHANGING_WORDS: &[&str] = &[
    ".",
    "source",
    "eval",
    "exec",
    "export",
    "declare",
    "typeset",
    "local",
    "readonly",
    "unset",
    "set",
    "read",
    "readarray",
    "mapfile",
    "printf",
    "getopts",
    "let",
    "for",
    "select",
    "coproc",
    "shopt",
    "alias",
    "unalias",
    "trap",
    "enable",
    "builtin",
    "command",
    "function",
    "wait",
    "fc",
];

/// What the last snapshot said about the shell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShellTraits {
    /// Names of the shell functions defined.
    pub functions: BTreeSet<String>,
    /// Whether alias expansion is on (an alias can run anything).
    pub aliases: bool,
    /// Whether a DEBUG, RETURN or ERR trap is set (it runs around every command).
    pub traps: bool,
}

/// Whether running `command` in a shell with these traits may change its
/// exported environment. `false` only when it certainly cannot.
pub fn may_change_environment(command: &str, traits: &ShellTraits) -> bool {
    if traits.aliases || traits.traps {
        return true;
    }
    // Assignments (`A=1`, `${A:=1}`, `((A=1))`), function definitions and
    // arithmetic commands.
    if command.contains('=') || command.contains("()") || command.contains("((") {
        return true;
    }
    let mut command_position = true;
    for token in Tokens::new(command) {
        match token {
            Token::Operator => command_position = true,
            Token::Redirection => {}
            Token::Word(word) => {
                let bare = word.trim_start_matches('\\');
                let unquoted = bare.trim_matches(|c| c == '\'' || c == '"');
                if ENV_CHANGING_WORDS.contains(&unquoted) || traits.functions.contains(unquoted) {
                    return true;
                }
                if command_position {
                    // A command word expanded at run time could be anything.
                    if bare.contains(['$', '`', '\'', '"']) {
                        return true;
                    }
                    // Reserved words keep the next word in command position.
                    command_position = is_reserved_word(bare);
                }
            }
        }
    }
    false
}

fn is_reserved_word(word: &str) -> bool {
    matches!(
        word,
        "if" | "then"
            | "else"
            | "elif"
            | "fi"
            | "do"
            | "done"
            | "while"
            | "until"
            | "case"
            | "esac"
            | "in"
            | "!"
            | "time"
            | "{"
            | "}"
    )
}

#[derive(Debug, PartialEq, Eq)]
enum Token<'a> {
    Word(&'a str),
    /// `;`, `&`, `|`, `&&`, `||`, `(`, `)`, newline: a new command follows.
    Operator,
    /// `<`, `>`, `>>`, `2>`, ...: the next word is a file, not a command.
    Redirection,
}

/// A rough shell tokenizer: words are runs of characters other than blanks
/// and operators, with quoted spans kept inside the word.
struct Tokens<'a> {
    text: &'a str,
    pos: usize,
    after_redirection: bool,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            pos: 0,
            after_redirection: false,
        }
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && matches!(bytes[self.pos], b' ' | b'\t') {
            self.pos += 1;
        }
        let start = self.pos;
        let first = *bytes.get(start)?;
        match first {
            b'\n' | b';' | b'&' | b'|' | b'(' | b')' => {
                self.pos += 1;
                while self.pos < bytes.len() && matches!(bytes[self.pos], b'&' | b'|' | b';') {
                    self.pos += 1;
                }
                self.after_redirection = false;
                return Some(Token::Operator);
            }
            b'<' | b'>' => {
                while self.pos < bytes.len() && matches!(bytes[self.pos], b'<' | b'>' | b'&' | b'|')
                {
                    self.pos += 1;
                }
                self.after_redirection = true;
                return Some(Token::Redirection);
            }
            _ => {}
        }
        let mut quote: Option<u8> = None;
        while self.pos < bytes.len() {
            let c = bytes[self.pos];
            match quote {
                Some(q) if c == q => quote = None,
                Some(b'"') if c == b'\\' => self.pos += 1,
                Some(_) => {}
                None => match c {
                    b'\'' | b'"' => quote = Some(c),
                    b'\\' => self.pos += 1,
                    b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>' => break,
                    _ => {}
                },
            }
            self.pos += 1;
        }
        let end = self.pos.min(bytes.len());
        let word = self.text.get(start..end).unwrap_or("");
        if self.after_redirection {
            // The redirection's target: not a command word.
            self.after_redirection = false;
            return self.next();
        }
        // `2>file`: a word of digits directly before a redirection is an fd number.
        if word.bytes().all(|b| b.is_ascii_digit()) && matches!(bytes.get(end), Some(b'<' | b'>')) {
            return self.next();
        }
        Some(Token::Word(word))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(command: &str) -> bool {
        may_change_environment(command, &ShellTraits::default())
    }

    #[test]
    fn ordinary_commands_cannot_change_the_environment() {
        for command in [
            "true",
            "ls -la",
            "cat src/main.rs | head -n 20",
            "git status && git diff --stat",
            "cargo test --workspace 2>&1 | tail -5",
            "python3 script.py > out.txt",
            "grep -rn 'needle' src/ || echo none",
            "cd /tmp && ls",
            "echo $HOME ${PATH}",
            "make -j4; echo done",
            "if test -f x; then echo yes; else echo no; fi",
            "sleep 1 &",
            "(cd sub; make)",
            "cat <<EOF\nhello\nEOF",
            "npm run build",
        ] {
            assert!(
                !changes(command),
                "{command:?} was judged to change the environment"
            );
        }
    }

    #[test]
    fn commands_that_may_change_it_are_caught() {
        for command in [
            "export FOO=1",
            "FOO=1",
            "FOO=bar some-command",
            "declare -x FOO",
            "unset PATH",
            "source venv/bin/activate",
            ". ./env.sh",
            "\\export X",
            "'export' X",
            "eval \"$setup\"",
            "read -r line < file",
            "printf -v X %s y",
            "for i in 1 2; do :; done",
            "f() { export A; }",
            "function f { :; }",
            "((count++))",
            "echo ${X:=default}",
            "$cmd arg",
            "\"$cmd\" arg",
            "`which thing` arg",
            "ls; $setup",
            "true && export X",
            "set -a",
            "shopt -s expand_aliases",
            "trap 'export X' DEBUG",
            "builtin export X",
            "command export X",
            "mapfile -t lines < f",
            "exec 3>file",
            "if true; then $cmd; fi",
        ] {
            assert!(
                changes(command),
                "{command:?} was judged unable to change the environment"
            );
        }
    }

    #[test]
    fn known_functions_aliases_and_traps_count() {
        let traits = ShellTraits {
            functions: BTreeSet::from(["activate".to_owned()]),
            ..ShellTraits::default()
        };
        assert!(may_change_environment("activate", &traits));
        assert!(may_change_environment("ls && activate", &traits));
        assert!(!may_change_environment("ls", &traits));
        let aliases = ShellTraits {
            aliases: true,
            ..ShellTraits::default()
        };
        assert!(may_change_environment("ls", &aliases));
        let traps = ShellTraits {
            traps: true,
            ..ShellTraits::default()
        };
        assert!(may_change_environment("ls", &traps));
    }

    #[test]
    fn redirection_targets_and_fd_numbers_are_not_command_words() {
        assert!(!changes("ls > $OUT"));
        assert!(!changes("ls 2> $ERR"));
        assert!(!changes("> $LOG cat file"));
    }
}
