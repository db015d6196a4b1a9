//! The interceptor: refuse commands that another tool of the host does better.
//!
//! This steers agents toward better tools; it is **not a security boundary**.
//! Rules match the command's text, and the shell expands text afterwards, so
//! `command cat`, `\cat`, `/bin/cat`, `env cat`, `FOO=1 cat`, `c''at` and many
//! other spellings reach the same program without matching (the tests pin
//! which). The boundary is elsewhere: the user the shells run as, the sandbox,
//! the resource limits.

use fancy_regex::Regex;
use shellvisor_protocol::Error;
use shellvisor_protocol::InterceptRule;
use shellvisor_protocol::Result;

/// `/dev/null`, `/dev/tty`, `/dev/stdout` or `/dev/stderr`, bare or quoted.
const DEV_SINK: &str = r#"(?:"/dev/(?:null|tty|stdout|stderr)"|'/dev/(?:null|tty|stdout|stderr)'|/dev/(?:null|tty|stdout|stderr))"#;

const EDIT_MESSAGE_TAIL: &str = "It provides diff preview and fuzzy matching.";

/// The reference tool's seven default rules, message texts verbatim.
pub fn default_intercept_rules() -> Vec<InterceptRule> {
    let rule = |pattern: String, tool: &str, message: String| InterceptRule {
        pattern,
        flags: String::new(),
        tool: tool.to_owned(),
        message,
    };
    let redirect = format!(
        r#"^\s*(echo|printf|cat\s*<<)\s+(?:(?:[^"'>]|"[^"]*"|'[^']*')|(?<!\|)>{{1,2}}\|?\s*{DEV_SINK}(?:[\s;&|]|$))*(?<!\|)>{{1,2}}\|?\s*(?!{DEV_SINK}(?:[\s;&|]|$))[$\w./~"'-]"#
    );
    vec![
        rule(
            r"^\s*(cat|head|tail|less|more)\s+".to_owned(),
            "read",
            "Use the `read` tool instead of cat/head/tail. It provides better context and handles binary files.".to_owned(),
        ),
        rule(
            r"^\s*(grep|rg|ripgrep|ag|ack)\s+".to_owned(),
            "grep",
            "Use the `grep` tool instead of grep/rg. It respects .gitignore and provides structured output.".to_owned(),
        ),
        rule(
            r"^\s*(find|fd|locate)\s+.*(-name|-iname|-type|--type|-glob)".to_owned(),
            "glob",
            "Use the `glob` tool instead of find/fd. It respects .gitignore and is faster for glob patterns.".to_owned(),
        ),
        rule(
            r"^\s*sed\s+(-i|--in-place)".to_owned(),
            "edit",
            format!("Use the `edit` tool instead of sed -i. {EDIT_MESSAGE_TAIL}"),
        ),
        rule(
            r"^\s*perl\s+.*-[pn]?i".to_owned(),
            "edit",
            format!("Use the `edit` tool instead of perl -i. {EDIT_MESSAGE_TAIL}"),
        ),
        rule(
            r"^\s*awk\s+.*-i\s+inplace".to_owned(),
            "edit",
            format!("Use the `edit` tool instead of awk -i inplace. {EDIT_MESSAGE_TAIL}"),
        ),
        rule(
            redirect,
            "write",
            "Use the `write` tool instead of echo/cat redirection. It handles encoding and provides confirmation.".to_owned(),
        ),
    ]
}

/// Compiled interceptor rules.
#[derive(Debug)]
pub struct Interceptor {
    rules: Vec<(Regex, InterceptRule)>,
}

impl Interceptor {
    /// Compiles `rules`; a rule whose pattern does not compile is skipped with
    /// a warning (as the reference tool does).
    pub fn new(rules: &[InterceptRule]) -> Self {
        let rules = rules
            .iter()
            .filter_map(|rule| match compile(rule) {
                Ok(regex) => Some((regex, rule.clone())),
                Err(err) => {
                    tracing::warn!(pattern = %rule.pattern, %err, "interceptor rule skipped: invalid pattern");
                    None
                }
            })
            .collect();
        Self { rules }
    }

    /// Number of usable rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether no rule is usable.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Checks `command` (and, when a leading `cd` was stripped, `stripped`)
    /// against every rule whose tool is among `tools`.
    ///
    /// # Errors
    /// [`Error::Blocked`]: `Blocked: <message>\n\nOriginal command: <command>`.
    pub fn check(&self, command: &str, stripped: Option<&str>, tools: &[String]) -> Result<()> {
        for (regex, rule) in &self.rules {
            if !tools.contains(&rule.tool) {
                continue;
            }
            let hit = [Some(command), stripped]
                .into_iter()
                .flatten()
                .any(|text| regex.is_match(text.trim()).unwrap_or(false));
            if hit {
                return Err(Error::Blocked {
                    message: rule.message.clone(),
                    command: command.to_owned(),
                });
            }
        }
        Ok(())
    }
}

/// Compiles a rule, turning its JavaScript-style flags into inline flags.
fn compile(rule: &InterceptRule) -> std::result::Result<Regex, fancy_regex::Error> {
    let flags: String = rule
        .flags
        .chars()
        .filter(|f| matches!(f, 'i' | 'm' | 's'))
        .collect();
    if flags.is_empty() {
        Regex::new(&rule.pattern)
    } else {
        Regex::new(&format!("(?{flags}){}", rule.pattern))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_tools() -> Vec<String> {
        ["read", "grep", "glob", "edit", "write"]
            .map(str::to_owned)
            .to_vec()
    }

    fn blocked_by(command: &str) -> Option<String> {
        match Interceptor::new(&default_intercept_rules()).check(command, None, &all_tools()) {
            Ok(()) => None,
            Err(Error::Blocked { message, .. }) => Some(message),
            Err(other) => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn every_default_rule_fires_on_its_commands() {
        let table: &[(&str, &str)] = &[
            ("cat README.md", "read"),
            ("  head -n 5 file", "read"),
            ("tail -f log", "read"),
            ("less notes", "read"),
            ("more notes", "read"),
            ("grep -rn needle src", "grep"),
            ("rg needle", "grep"),
            ("ripgrep needle", "grep"),
            ("ag needle", "grep"),
            ("ack needle", "grep"),
            ("find . -name '*.rs'", "glob"),
            ("fd --type f", "glob"),
            ("locate -iname foo", "glob"),
            ("sed -i 's/a/b/' file", "sed -i"),
            ("sed --in-place 's/a/b/' file", "sed -i"),
            ("perl -pi -e 's/a/b/' file", "perl -i"),
            ("perl -i -pe 's/a/b/' file", "perl -i"),
            ("awk -i inplace '{print}' file", "awk -i inplace"),
            ("echo hello > file.txt", "write"),
            ("echo hello >> file.txt", "write"),
            ("printf '%s' x > out", "write"),
            ("echo a > /dev/null > real.txt", "write"),
            ("echo x >| forced.txt", "write"),
        ];
        for (command, expect) in table {
            let message = blocked_by(command).unwrap_or_else(|| panic!("{command:?} passed"));
            assert!(message.contains(expect), "{command:?}: {message}");
        }
    }

    #[test]
    fn rules_apply_in_order_so_a_heredoc_into_a_file_is_a_read_first() {
        let interceptor = Interceptor::new(&default_intercept_rules());
        // The reference's write rule wants a blank after `<<`; `cat <<EOF > f`
        // is only caught by the `cat` rule.
        assert!(
            interceptor
                .check("cat <<EOF > f\nx\nEOF", None, &["write".to_owned()])
                .is_ok()
        );
        let heredoc = "cat << EOF > file\nbody\nEOF";
        let first = interceptor.check(heredoc, None, &all_tools()).unwrap_err();
        assert!(first.to_string().contains("`read` tool"), "{first}");
        let write_only = interceptor
            .check(heredoc, None, &["write".to_owned()])
            .unwrap_err();
        assert!(
            write_only.to_string().contains("`write` tool"),
            "{write_only}"
        );
    }

    #[test]
    fn the_messages_are_the_reference_texts() {
        let messages: Vec<String> = default_intercept_rules()
            .into_iter()
            .map(|r| r.message)
            .collect();
        assert_eq!(
            messages,
            vec![
                "Use the `read` tool instead of cat/head/tail. It provides better context and handles binary files.",
                "Use the `grep` tool instead of grep/rg. It respects .gitignore and provides structured output.",
                "Use the `glob` tool instead of find/fd. It respects .gitignore and is faster for glob patterns.",
                "Use the `edit` tool instead of sed -i. It provides diff preview and fuzzy matching.",
                "Use the `edit` tool instead of perl -i. It provides diff preview and fuzzy matching.",
                "Use the `edit` tool instead of awk -i inplace. It provides diff preview and fuzzy matching.",
                "Use the `write` tool instead of echo/cat redirection. It handles encoding and provides confirmation.",
            ]
        );
        let err = Interceptor::new(&default_intercept_rules())
            .check("cat x", None, &all_tools())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "Blocked: Use the `read` tool instead of cat/head/tail. It provides better context and handles binary files.\n\nOriginal command: cat x"
        );
    }

    #[test]
    fn allowed_commands_pass() {
        for command in [
            "cargo test",
            "echo hello",
            "echo done > /dev/null",
            "echo oops >&2",
            "echo 'a > b'",
            "echo \"x > y\" | tee",
            "printf 'x\\n' >/dev/stderr",
            "echo hi 2>/dev/null",
            "ls | grep foo",
            "git log | head -n 5",
            "sed 's/a/b/' file",
            "find . -maxdepth 1",
            "perl -e 'print 1'",
            "echo x | cat",
        ] {
            assert_eq!(blocked_by(command), None, "{command:?} was blocked");
        }
    }

    #[test]
    fn bypass_forms_pass_through_by_design() {
        // The interceptor is not a security boundary: these reach `cat` anyway.
        for command in [
            "command cat secrets",
            "\\cat secrets",
            "/bin/cat secrets",
            "/usr/bin/cat secrets",
            "env cat secrets",
            "FOO=1 cat secrets",
            "exec cat secrets",
            "eval cat secrets",
            "c''at secrets",
            "\"cat\" secrets",
            "$(echo cat) secrets",
            "xargs cat < list",
            "sh -c 'cat secrets'",
            "busybox cat secrets",
        ] {
            assert_eq!(
                blocked_by(command),
                None,
                "{command:?} was blocked; update the documented bypass corpus"
            );
        }
    }

    #[test]
    fn rules_need_their_tool_and_check_the_cd_stripped_command() {
        let interceptor = Interceptor::new(&default_intercept_rules());
        assert!(
            interceptor
                .check("cat x", None, &["grep".to_owned()])
                .is_ok()
        );
        assert!(interceptor.check("cat x", None, &[]).is_ok());
        let err = interceptor
            .check("cd src && cat main.rs", Some("cat main.rs"), &all_tools())
            .unwrap_err();
        assert_eq!(
            err,
            Error::Blocked {
                message: "Use the `read` tool instead of cat/head/tail. It provides better context and handles binary files.".into(),
                command: "cd src && cat main.rs".into(),
            }
        );
    }

    #[test]
    fn invalid_rules_are_skipped_and_flags_apply() {
        let rules = vec![
            InterceptRule {
                pattern: "(unclosed".into(),
                flags: String::new(),
                tool: "read".into(),
                message: "never".into(),
            },
            InterceptRule {
                pattern: "^DANGER".into(),
                flags: "i".into(),
                tool: "read".into(),
                message: "no danger".into(),
            },
        ];
        let interceptor = Interceptor::new(&rules);
        assert_eq!(interceptor.len(), 1);
        let err = interceptor
            .check("danger zone", None, &["read".to_owned()])
            .unwrap_err();
        assert!(matches!(err, Error::Blocked { message, .. } if message == "no danger"));
    }
}
