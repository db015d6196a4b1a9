//! The leading `cd <dir> &&` rewrite.

use std::sync::LazyLock;

use regex::Regex;

/// The reference tool's pattern: `cd`, blanks, a path without `&`, newline or
/// unescaped backslash, blanks, `&&`, blanks.
static LEADING_CD: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^cd[ \t]+((?:[^&\\\n\r]|\\.)+?)[ \t]*&&[ \t]*").ok());

/// A command that starts with `cd <dir> && ...`, split into the directory and
/// the rest, as the reference tool does when a call names no `cwd`: the path
/// must sit on one line and contain no `$`, backtick or `(` (it would need the
/// shell to expand it); it is trimmed and loses one leading and one trailing
/// quote. Returns `None` when the command does not qualify.
///
/// ```
/// use shellvisor_policy::rewrite_leading_cd;
///
/// assert_eq!(
///     rewrite_leading_cd("cd 'my dir' && make test"),
///     Some(("my dir".to_owned(), "make test".to_owned()))
/// );
/// assert_eq!(rewrite_leading_cd("cd $HOME && ls"), None);
/// ```
pub fn rewrite_leading_cd(command: &str) -> Option<(String, String)> {
    let pattern = LEADING_CD.as_ref()?;
    let captures = pattern.captures(command)?;
    let path = captures.get(1)?.as_str();
    if path.contains(['$', '`', '(']) {
        return None;
    }
    let path = path.trim();
    let path = path.strip_prefix(['"', '\'']).unwrap_or(path);
    let path = path.strip_suffix(['"', '\'']).unwrap_or(path);
    let rest = &command[captures.get(0)?.end()..];
    Some((path.to_owned(), rest.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_forms() {
        for (command, dir, rest) in [
            ("cd /tmp && ls", "/tmp", "ls"),
            ("cd src&&cargo build", "src", "cargo build"),
            ("cd\tsub \t&& \tmake", "sub", "make"),
            ("cd \"with space\" && ls -la", "with space", "ls -la"),
            ("cd 'quoted' && ls", "quoted", "ls"),
            (
                "cd ~/project && git status && git diff",
                "~/project",
                "git status && git diff",
            ),
            ("cd a\\&b && ls", "a\\&b", "ls"),
            (
                "cd ../up && pwd\necho second line",
                "../up",
                "pwd\necho second line",
            ),
            ("cd 'mismatched\" && ls", "mismatched", "ls"),
        ] {
            assert_eq!(
                rewrite_leading_cd(command),
                Some((dir.to_owned(), rest.to_owned())),
                "{command:?}"
            );
        }
    }

    #[test]
    fn refused_forms() {
        for command in [
            "cd $HOME && ls",
            "cd `pwd` && ls",
            "cd $(git rev-parse --show-toplevel) && ls",
            "cd /tmp; ls",
            "cd /tmp",
            "ls && cd /tmp && ls",
            " cd /tmp && ls",
            "cd\n/tmp && ls",
            "cd /tmp || ls",
            "cdx /tmp && ls",
            "cd a & b && ls",
        ] {
            assert_eq!(rewrite_leading_cd(command), None, "{command:?}");
        }
    }
}
