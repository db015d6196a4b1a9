//! The leading `cd <dir> &&` rewrite, on bash's own reading of the text.
//!
//! `cd DIR && REST` becomes "run REST in DIR" only when that provably does
//! what bash would do: `cd` is the plain word `cd`, DIR is one word whose
//! value needs no expansion bash could do differently (quotes and escapes
//! are fine; parameters, command substitution, globs, braces and `~user`
//! are not; `~` and `~/...` are the home directory), DIR is not an option
//! (`-P`, `--`, `-`), and the next token is `&&`. Anything else is left to
//! bash, byte for byte. The caller still checks that DIR exists (and, for a
//! bare relative name, that no `CDPATH` applies): a `cd` that would fail
//! must fail in bash, so that `cd /x && a || b` runs `b`.

use crate::shell_text::Tok;
use crate::shell_text::literal;
use crate::shell_text::tokens;

use brush_parser::word::TildeExpr;
use brush_parser::word::WordPiece;

/// A leading `cd DIR &&` that can be rewritten.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeadingCd {
    /// DIR's value (it may start with `~`, or be relative).
    pub dir: String,
    /// What follows the `&&` (leading blanks removed).
    pub rest: String,
    /// DIR is a bare relative name (not `.`, `..`, `./...` or `../...`):
    /// bash would search `CDPATH` for it.
    pub searches_cdpath: bool,
}

/// The leading `cd DIR && REST` of `command`, when the rewrite would be
/// equivalent (see the module documentation).
///
/// ```
/// use shellvisor_policy::rewrite_leading_cd;
///
/// let cd = rewrite_leading_cd("cd 'my dir' && make test").unwrap();
/// assert_eq!((cd.dir.as_str(), cd.rest.as_str()), ("my dir", "make test"));
/// assert_eq!(rewrite_leading_cd("cd $HOME && ls"), None);
/// assert_eq!(rewrite_leading_cd("cd /tmp; ls"), None);
/// ```
pub fn rewrite_leading_cd(command: &str) -> Option<LeadingCd> {
    // Cheap refusal for the common case.
    if !command.starts_with("cd") {
        return None;
    }
    let tokens = tokens(command)?;
    let mut tokens = tokens.into_iter();
    match tokens.next()? {
        Tok::Word { pieces, .. }
            if literal(&pieces).as_deref() == Some("cd") && pieces.len() == 1 =>
        {
            if !matches!(&pieces[0].piece, WordPiece::Text(text) if text == "cd") {
                return None;
            }
        }
        _ => return None,
    }
    let dir = match tokens.next()? {
        Tok::Word { pieces, .. } => directory(&pieces)?,
        _ => return None,
    };
    let rest_start = match tokens.next()? {
        Tok::Operator { text, end } if text == "&&" => end,
        _ => return None,
    };
    let rest = command.get(rest_start..)?.trim_start_matches([' ', '\t']);
    if rest.trim().is_empty() {
        return None;
    }
    if dir.is_empty() || dir.starts_with('-') {
        return None;
    }
    let searches_cdpath = !(dir.starts_with(['/', '~'])
        || dir == "."
        || dir == ".."
        || dir.starts_with("./")
        || dir.starts_with("../"));
    Some(LeadingCd {
        dir,
        rest: rest.to_owned(),
        searches_cdpath,
    })
}

/// DIR's value: a literal, or the home directory (`~`, `~/...`) followed by
/// a literal.
fn directory(pieces: &[brush_parser::word::WordPieceWithSource]) -> Option<String> {
    match pieces.first().map(|p| &p.piece) {
        Some(WordPiece::TildeExpansion(TildeExpr::Home)) => {
            let rest = literal(&pieces[1..])?;
            (rest.is_empty() || rest.starts_with('/')).then(|| format!("~{rest}"))
        }
        _ => literal(pieces),
    }
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
            ("cd ~ && ls", "~", "ls"),
            ("cd a\\&b && ls", "a&b", "ls"),
            ("cd /d/with\\ space && pwd", "/d/with space", "pwd"),
            (
                "cd ../up && pwd\necho second line",
                "../up",
                "pwd\necho second line",
            ),
            ("cd /x && a || b", "/x", "a || b"),
        ] {
            let cd = rewrite_leading_cd(command).unwrap_or_else(|| panic!("{command:?}"));
            assert_eq!(
                (cd.dir.as_str(), cd.rest.as_str()),
                (dir, rest),
                "{command:?}"
            );
        }
        assert!(rewrite_leading_cd("cd src && ls").unwrap().searches_cdpath);
        for not_searched in ["cd /x && a", "cd ./x && a", "cd .. && a", "cd ~/x && a"] {
            assert!(!rewrite_leading_cd(not_searched).unwrap().searches_cdpath);
        }
    }

    #[test]
    fn anything_bash_might_read_differently_is_left_alone() {
        for command in [
            "cd $HOME && ls",
            "cd `pwd` && ls",
            "cd $(git rev-parse --show-toplevel) && ls",
            "cd /tmp; ls",
            "cd /usr;pwd && echo semi",
            "cd /tmp",
            "cd /tmp &&",
            "ls && cd /tmp && ls",
            " cd /tmp && ls",
            "cd\n/tmp && ls",
            "cd /tmp || ls",
            "cdx /tmp && ls",
            "cd a & b && ls",
            "cd -P /usr && pwd",
            "cd -- /usr && pwd",
            "cd - && pwd",
            "cd /us* && pwd",
            "cd /{usr,tmp} && pwd",
            "cd ~root && pwd",
            "cd '' && pwd",
            "cd 'unterminated && ls",
            "\\cd /tmp && ls",
            "cd /a /b && ls",
        ] {
            assert_eq!(rewrite_leading_cd(command), None, "{command:?}");
        }
    }
}
