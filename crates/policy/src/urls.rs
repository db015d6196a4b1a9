//! Internal URLs in commands, env values and cwd.
//!
//! An agent may write `local://notes.md` (a per-session scratch directory),
//! `artifact://<job id>` (a job's saved output) or a host scheme such as
//! `skill://name/file` (through a [`UrlResolver`] the host provides). Before a
//! command runs they are replaced by filesystem paths: shell-quoted in the
//! command, raw in env values and cwd.
//!
//! In a command, URLs are found where bash reads words (a real bash
//! tokenizer, see `shell_text`): a URL is the unquoted text of a word from
//! its start, or from just after an `=` (`x=local://f`, `--out=local://f`),
//! to where that text ends (an operator such as `;`, `|`, `&&`, `>` or `)`,
//! a blank, a quote, an escape or an expansion: `local://d/$name` becomes the
//! quoted path followed by `$name`); or a whole quoted word part
//! (`'local://a b'`, `"local://c"`). URLs inside `$(...)` are found the same
//! way. A URL inside a larger quoted string, in a here-document, or that
//! does not resolve is left alone (as in the reference tool), and so is a
//! command bash itself could not read (an unterminated quote).

use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;

use std::ops::Range;

use brush_parser::word::WordPiece;
use brush_parser::word::WordPieceWithSource;

use crate::beneath::BeneathError;
use crate::beneath::percent_decode;
use crate::beneath::resolve_beneath;
use crate::shell_text::Tok;
use crate::shell_text::tokens;

/// The schemes the reference tool recognises.
pub const INTERNAL_SCHEMES: [&str; 7] = [
    "skill", "agent", "artifact", "plan", "memory", "rule", "local",
];

/// Resolves a host-defined internal URL scheme to a filesystem path.
pub trait UrlResolver: Send + Sync + fmt::Debug {
    /// The scheme, without `://` (for example `skill`).
    fn scheme(&self) -> &str;

    /// The path `url` (the whole `scheme://...` text) stands for.
    ///
    /// # Errors
    /// A message saying why it cannot be resolved (the URL is then left as
    /// written).
    fn resolve(&self, url: &str) -> Result<PathBuf, String>;
}

/// Where URLs are expanded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlTarget {
    /// In command text: paths are single-quoted; `local://` parents are created.
    Command,
    /// In an env value: raw paths; `local://` parents are created.
    EnvValue,
    /// In a cwd: raw paths; nothing is created.
    Cwd,
}

/// What follows a job id in the name of its artifact file.
const ARTIFACT_SUFFIX: &str = ".log";

/// Where the artifact of the run `job_id` is written, and where
/// `artifact://<job id>` finds it: `<artifacts_dir>/<job id>.log`.
pub fn artifact_path(artifacts_dir: &Path, job_id: &str) -> PathBuf {
    let dir = artifacts_dir.as_os_str();
    let mut path = OsString::with_capacity(dir.len() + 1 + job_id.len() + ARTIFACT_SUFFIX.len());
    path.push(dir);
    if !dir.as_encoded_bytes().ends_with(b"/") {
        path.push("/");
    }
    path.push(job_id);
    path.push(ARTIFACT_SUFFIX);
    PathBuf::from(path)
}

/// What URL expansion needs.
#[derive(Clone, Copy, Debug)]
pub struct UrlContext<'a> {
    /// The session's `local://` root.
    pub local_root: &'a Path,
    /// The session's artifacts directory (`artifact://<job id>` lives there).
    pub artifacts_dir: &'a Path,
    /// Resolvers for other schemes.
    pub resolvers: &'a [Arc<dyn UrlResolver>],
}

/// Replaces the internal URLs in `text`.
pub fn expand_internal_urls(text: &str, ctx: &UrlContext<'_>, target: UrlTarget) -> String {
    match target {
        UrlTarget::Command => expand_in_command(text, ctx),
        UrlTarget::EnvValue | UrlTarget::Cwd => expand_in_value(text, ctx, target),
    }
}

/// URLs in shell text, on bash's word boundaries.
fn expand_in_command(command: &str, ctx: &UrlContext<'_>) -> String {
    if !command.contains(':') {
        return command.to_owned();
    }
    let Some(tokens) = tokens(command) else {
        return command.to_owned();
    };
    let mut edits: Vec<(Range<usize>, String)> = Vec::new();
    for token in tokens {
        if let Tok::Word { range, pieces } = token {
            word_edits(command, range.start, &pieces, ctx, &mut edits);
        }
    }
    if edits.is_empty() {
        return command.to_owned();
    }
    let mut out = String::with_capacity(command.len() + 64 * edits.len());
    let mut copied = 0;
    for (range, replacement) in edits {
        out.push_str(&command[copied..range.start]);
        out.push_str(&replacement);
        copied = range.end;
    }
    out.push_str(&command[copied..]);
    out
}

/// The replacements in one word (its pieces start at `base` in `command`).
fn word_edits(
    command: &str,
    base: usize,
    pieces: &[WordPieceWithSource],
    ctx: &UrlContext<'_>,
    edits: &mut Vec<(Range<usize>, String)>,
) {
    for (index, piece) in pieces.iter().enumerate() {
        let range = base + piece.start_index..base + piece.end_index;
        match &piece.piece {
            WordPiece::Text(text) => {
                // A URL starts the word, or follows an `=` in its text.
                let starts = std::iter::once(0)
                    .filter(|_| index == 0)
                    .chain(text.match_indices('=').map(|(at, _)| at + 1));
                for start in starts {
                    let url = &text[start..];
                    if split_url(url).is_some()
                        && let Some(path) = resolve_for_command(url, ctx)
                    {
                        edits.push((range.start + start..range.end, quoted(&path)));
                        break;
                    }
                }
            }
            WordPiece::SingleQuotedText(text) => {
                if split_url(text).is_some()
                    && let Some(path) = resolve_for_command(text, ctx)
                {
                    edits.push((range, quoted(&path)));
                }
            }
            WordPiece::DoubleQuotedSequence(inner) => {
                if let [only] = inner.as_slice()
                    && let WordPiece::Text(text) = &only.piece
                    && split_url(text).is_some()
                    && let Some(path) = resolve_for_command(text, ctx)
                {
                    edits.push((range, quoted(&path)));
                }
            }
            WordPiece::CommandSubstitution(inner) => {
                // `$(` inner `)`: the inner command, expanded the same way.
                let source = command.get(range.clone()).unwrap_or("");
                if source.starts_with("$(")
                    && source.ends_with(')')
                    && source.len() == inner.len() + 3
                {
                    let expanded = expand_in_command(inner, ctx);
                    if expanded != *inner {
                        edits.push((range.start + 2..range.end - 1, expanded));
                    }
                }
            }
            _ => {}
        }
    }
}

fn resolve_for_command(url: &str, ctx: &UrlContext<'_>) -> Option<String> {
    match resolve_internal_url(url, ctx, true) {
        Ok(path) => {
            let mut path = path.to_string_lossy().into_owned();
            // `local://d/$name` is the directory's path, its slash, then `$name`.
            if url.ends_with('/') && !path.ends_with('/') {
                path.push('/');
            }
            Some(path)
        }
        Err(_) => {
            tracing::debug!(
                scheme = url.split(':').next().unwrap_or(""),
                "internal URL left as written"
            );
            None
        }
    }
}

fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    push_quoted(&mut out, text);
    out
}

/// URLs in an env value or a cwd (not shell text): bare or whole quoted
/// tokens, as the reference tool finds them.
fn expand_in_value(text: &str, ctx: &UrlContext<'_>, target: UrlTarget) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut index = 0;
    let mut quote: Option<u8> = None;
    while index < bytes.len() {
        let byte = bytes[index];
        if let Some(open) = quote {
            if byte == open {
                quote = None;
            } else if open == b'"' && byte == b'\\' {
                index += 1;
            }
            index += 1;
            continue;
        }
        let at_token_start = index == 0 || is_token_boundary(bytes[index - 1]);
        if at_token_start && let Some((end, url)) = url_token(text, index) {
            if let Ok(path) = resolve_internal_url(&url, ctx, target != UrlTarget::Cwd) {
                out.push_str(&text[copied..index]);
                match target {
                    UrlTarget::Command => push_quoted(&mut out, &path.to_string_lossy()),
                    UrlTarget::EnvValue | UrlTarget::Cwd => out.push_str(&path.to_string_lossy()),
                }
                copied = end;
            } else {
                tracing::debug!(
                    scheme = url.split(':').next().unwrap_or(""),
                    "internal URL left as written"
                );
            }
            index = end;
            continue;
        }
        match byte {
            b'\'' | b'"' => quote = Some(byte),
            b'\\' => index += 1,
            _ => {}
        }
        index += 1;
    }
    out.push_str(&text[copied..]);
    out
}

/// Resolves one internal URL to a path.
///
/// # Errors
/// A message saying why it cannot be resolved.
pub fn resolve_internal_url(
    url: &str,
    ctx: &UrlContext<'_>,
    create_parents: bool,
) -> Result<PathBuf, String> {
    let (scheme, rest) = split_url(url).ok_or_else(|| format!("not an internal URL: {url}"))?;
    match scheme {
        "local" => resolve_beneath(ctx.local_root, rest, create_parents).map_err(|err| match err {
            BeneathError::Escapes => "local:// URL escapes local root".to_owned(),
            BeneathError::Refused(why) => format!("local:// URL refused: {why}"),
            BeneathError::Io(err) => format!("local:// URL: {err}"),
        }),
        "artifact" => {
            let id = rest.trim_end_matches('/');
            if id.is_empty()
                || !id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            {
                return Err(format!("invalid artifact id: {id}"));
            }
            let path = resolve_beneath(ctx.artifacts_dir, &format!("{id}{ARTIFACT_SUFFIX}"), false)
                .map_err(|_| format!("invalid artifact id: {id}"))?;
            if path.is_file() {
                Ok(path)
            } else {
                Err(format!("no such artifact: {id}"))
            }
        }
        other => ctx
            .resolvers
            .iter()
            .find(|resolver| resolver.scheme() == other)
            .ok_or_else(|| format!("no resolver for {other}:// URLs"))?
            .resolve(url),
    }
}

/// `(scheme, rest)` of `scheme://rest` (or `local:/rest`, the reference's
/// normalization of `local:/x` to `local://x`).
fn split_url(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once(':')?;
    if !INTERNAL_SCHEMES.contains(&scheme) {
        return None;
    }
    if let Some(rest) = rest.strip_prefix("//") {
        return Some((scheme, rest));
    }
    if scheme == "local" {
        return rest.strip_prefix('/').map(|rest| (scheme, rest));
    }
    None
}

/// The URL token starting at `start`: a whole quoted string holding a URL, or
/// a bare URL. Returns the end of the token and the URL.
fn url_token(text: &str, start: usize) -> Option<(usize, String)> {
    let bytes = text.as_bytes();
    let first = bytes[start];
    if first == b'\'' || first == b'"' {
        let close = text[start + 1..].find(first as char)? + start + 1;
        let inner = &text[start + 1..close];
        split_url(inner)?;
        return Some((close + 1, inner.to_owned()));
    }
    let end = text[start..]
        .find(|c: char| c.is_whitespace() || matches!(c, '\'' | '"' | ')' | '`' | '\\'))
        .map_or(text.len(), |offset| start + offset);
    let candidate = &text[start..end];
    split_url(candidate)?;
    Some((end, candidate.to_owned()))
}

fn is_token_boundary(byte: u8) -> bool {
    byte.is_ascii_whitespace() || matches!(byte, b'=' | b'(' | b';' | b'&' | b'|' | b'<' | b'>')
}

fn push_quoted(out: &mut String, text: &str) {
    out.push('\'');
    out.push_str(&text.replace('\'', "'\\''"));
    out.push('\'');
}

/// The reference tool's `skill://name[/path]` resolution, as an example of a
/// host resolver: each skill has a base directory; the path must stay in it.
#[derive(Clone, Debug, Default)]
pub struct SkillResolver {
    skills: std::collections::BTreeMap<String, PathBuf>,
}

impl SkillResolver {
    /// A resolver for these skills (name to base directory).
    pub fn new(skills: std::collections::BTreeMap<String, PathBuf>) -> Self {
        Self { skills }
    }
}

impl UrlResolver for SkillResolver {
    fn scheme(&self) -> &str {
        "skill"
    }

    fn resolve(&self, url: &str) -> Result<PathBuf, String> {
        let rest = url
            .strip_prefix("skill://")
            .ok_or_else(|| format!("Invalid skill:// URL: {url}"))?;
        let (name, path) = rest.split_once('/').unwrap_or((rest, ""));
        if name.is_empty() {
            return Err(format!("skill:// URL requires a skill name: {url}"));
        }
        let name = percent_decode(name)
            .ok_or_else(|| format!("Invalid skill:// URL path encoding: {url}"))?;
        let Some(base) = self.skills.get(&name) else {
            let available = if self.skills.is_empty() {
                "none".to_owned()
            } else {
                self.skills.keys().cloned().collect::<Vec<_>>().join(", ")
            };
            return Err(format!("Unknown skill: {name}. Available: {available}"));
        };
        let decoded = percent_decode(path)
            .ok_or_else(|| format!("Invalid skill:// URL path encoding: {url}"))?;
        if decoded.starts_with('/') {
            return Err("Absolute paths are not allowed in skill:// URLs".to_owned());
        }
        if decoded.split('/').any(|component| component == "..") {
            return Err("Path traversal (..) is not allowed in skill:// URLs".to_owned());
        }
        resolve_beneath(base, path, false)
            .map_err(|_| "Path traversal is not allowed in skill:// URLs".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct Fixture {
        _base: tempfile::TempDir,
        local: PathBuf,
        artifacts: PathBuf,
        resolvers: Vec<Arc<dyn UrlResolver>>,
    }

    impl Fixture {
        fn new() -> Fixture {
            let base = tempfile::tempdir().unwrap();
            let local = base.path().join("local");
            let artifacts = base.path().join("artifacts");
            let skills = base.path().join("skills/review");
            std::fs::create_dir_all(&artifacts).unwrap();
            std::fs::create_dir_all(&skills).unwrap();
            std::fs::write(artifacts.join("job_abc.log"), "raw").unwrap();
            std::fs::write(skills.join("SKILL.md"), "skill").unwrap();
            let resolvers: Vec<Arc<dyn UrlResolver>> = vec![Arc::new(SkillResolver::new(
                [("review".to_owned(), skills)].into_iter().collect(),
            ))];
            Fixture {
                _base: base,
                local,
                artifacts,
                resolvers,
            }
        }

        fn ctx(&self) -> UrlContext<'_> {
            UrlContext {
                local_root: &self.local,
                artifacts_dir: &self.artifacts,
                resolvers: &self.resolvers,
            }
        }
    }

    #[test]
    fn an_artifact_path_is_the_job_id_with_its_suffix_in_the_directory() {
        for dir in ["/a/b", "/a/b/"] {
            assert_eq!(
                artifact_path(Path::new(dir), "job_x"),
                Path::new("/a/b").join("job_x.log")
            );
        }
    }

    #[test]
    fn commands_get_quoted_paths_and_env_and_cwd_raw_ones() {
        let fx = Fixture::new();
        let local = fx.local.display().to_string();
        let art = fx.artifacts.join("job_abc.log").display().to_string();
        let expand = |text: &str, target| expand_internal_urls(text, &fx.ctx(), target);
        assert_eq!(
            expand("cat local://notes/a.md", UrlTarget::Command),
            format!("cat '{local}/notes/a.md'")
        );
        assert!(
            fx.local.join("notes").is_dir(),
            "parents are created for commands"
        );
        assert_eq!(
            expand("cat local:/x.md", UrlTarget::Command),
            format!("cat '{local}/x.md'")
        );
        assert_eq!(
            expand("wc 'local://a b.txt'", UrlTarget::Command),
            format!("wc '{local}/a b.txt'")
        );
        assert_eq!(
            expand("wc \"local://c\"", UrlTarget::Command),
            format!("wc '{local}/c'")
        );
        assert_eq!(
            expand("(cat local://x)|wc", UrlTarget::Command),
            format!("(cat '{local}/x')|wc")
        );
        assert_eq!(
            expand("grep x artifact://job_abc", UrlTarget::Command),
            format!("grep x '{art}'")
        );
        assert_eq!(
            expand("local://it%27s", UrlTarget::Command),
            format!("'{local}/it'\\''s'")
        );
        // Text bash cannot read (an unterminated quote) is left to bash.
        assert_eq!(expand("local://it's", UrlTarget::Command), "local://it's");
        // Words end where bash ends them: at operators, blanks and quotes.
        assert_eq!(
            expand("echo ok > local://f.txt; echo next", UrlTarget::Command),
            format!("echo ok > '{local}/f.txt'; echo next")
        );
        assert_eq!(
            expand("cat local://f.txt|tr a-z A-Z&&echo ok", UrlTarget::Command),
            format!("cat '{local}/f.txt'|tr a-z A-Z&&echo ok")
        );
        assert_eq!(
            expand("x=local://f.txt; cat --in=local://g $x", UrlTarget::Command),
            format!("x='{local}/f.txt'; cat --in='{local}/g' $x")
        );
        assert_eq!(
            expand(
                "for f in local://f.txt; do cat \"$f\"; done",
                UrlTarget::Command
            ),
            format!("for f in '{local}/f.txt'; do cat \"$f\"; done")
        );
        assert_eq!(
            expand("cat local://d/$name local://my\\ file", UrlTarget::Command),
            format!("cat '{local}/d/'$name '{local}/my'\\ file")
        );
        assert_eq!(
            expand("wc $(cat local://list)", UrlTarget::Command),
            format!("wc $(cat '{local}/list')")
        );
        assert_eq!(
            expand("cat <<EOF\nlocal://data\nEOF", UrlTarget::Command),
            "cat <<EOF\nlocal://data\nEOF",
            "a here-document's body is data"
        );
        assert_eq!(
            expand("local://dir/f", UrlTarget::EnvValue),
            format!("{local}/dir/f")
        );
        assert_eq!(
            expand("local://nope/deeper", UrlTarget::Cwd),
            format!("{local}/nope/deeper")
        );
        assert!(
            !fx.local.join("nope").exists(),
            "nothing is created for a cwd"
        );
        let skill = expand("cat skill://review/SKILL.md", UrlTarget::Command);
        assert!(skill.ends_with("/skills/review/SKILL.md'"), "{skill}");
    }

    #[test]
    fn urls_that_do_not_qualify_are_left_as_written() {
        let fx = Fixture::new();
        for text in [
            "echo 'see local://x here'",
            "echo \"a local://x\"",
            "echo xlocal://x",
            "curl https://example.com",
            "echo artifact://job_missing",
            "echo artifact://../../etc/passwd",
            "echo local://../escape",
            "echo agent://unknown-scheme-resolver",
            "echo skill://unknown/x",
            "echo local:x",
        ] {
            assert_eq!(
                expand_internal_urls(text, &fx.ctx(), UrlTarget::Command),
                text
            );
        }
    }

    #[test]
    fn the_traversal_corpus_never_leaves_local_or_artifact_roots() {
        use crate::beneath::tests::ESCAPES;
        use crate::beneath::tests::setup;
        let (_base, root, outside) = setup();
        std::fs::write(root.join("job_ok.log"), "artifact").unwrap();
        let canonical = root.canonicalize().unwrap();
        let resolvers: Vec<Arc<dyn UrlResolver>> = Vec::new();
        let ctx = UrlContext {
            local_root: &root,
            artifacts_dir: &root,
            resolvers: &resolvers,
        };
        let mut tried = 0;
        for payload in ESCAPES {
            for url in [
                format!("local://{payload}"),
                format!("artifact://{payload}"),
            ] {
                tried += 1;
                crate::beneath::OPENED.with(|opened| opened.borrow_mut().clear());
                if let Ok(path) = resolve_internal_url(&url, &ctx, true) {
                    let mut probe = path.clone();
                    while !probe.exists() {
                        probe.pop();
                    }
                    assert!(
                        probe.canonicalize().unwrap().starts_with(&canonical),
                        "{url} -> {path:?}"
                    );
                }
                crate::beneath::OPENED.with(|opened| {
                    for path in opened.borrow().iter() {
                        assert!(path.starts_with(&canonical), "{url} opened {path:?}");
                    }
                });
            }
        }
        assert!(tried >= 80);
        assert!(resolve_internal_url("artifact://job_ok", &ctx, false).is_ok());
        assert_eq!(
            std::fs::read_dir(&outside).unwrap().count(),
            1,
            "nothing was created outside"
        );
    }

    #[test]
    fn skill_urls_follow_the_reference_errors() {
        let fx = Fixture::new();
        let resolver = &fx.resolvers[0];
        assert_eq!(
            resolver.resolve("skill://").unwrap_err(),
            "skill:// URL requires a skill name: skill://"
        );
        assert_eq!(
            resolver.resolve("skill://nope/x").unwrap_err(),
            "Unknown skill: nope. Available: review"
        );
        assert_eq!(
            resolver.resolve("skill://review//etc").unwrap_err(),
            "Absolute paths are not allowed in skill:// URLs"
        );
        assert_eq!(
            resolver.resolve("skill://review/../x").unwrap_err(),
            "Path traversal (..) is not allowed in skill:// URLs"
        );
        assert_eq!(
            resolver.resolve("skill://review/%zz").unwrap_err(),
            "Invalid skill:// URL path encoding: skill://review/%zz"
        );
        assert_eq!(
            SkillResolver::default().resolve("skill://x").unwrap_err(),
            "Unknown skill: x. Available: none"
        );
    }

    fn bash_printf(command: &str) -> Vec<u8> {
        let output = std::process::Command::new("bash")
            .args(["--noprofile", "--norc", "-c", command])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{command}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn any_name_round_trips_through_bash_and_never_runs(name in "[^/\u{0}\\\\%]{1,24}") {
            // `.` and `..` are path components, not names (`..` is refused).
            prop_assume!(name != "." && name != "..");
            let fx = Fixture::new();
            let canary = fx.local.parent().unwrap().join("CANARY");
            // Percent-encode every byte so any character can appear in the name.
            let encoded: String = name.bytes().map(|b| format!("%{b:02X}")).collect();
            let injected = format!("printf %s local://{encoded}; touch {}", canary.display());
            let command = expand_internal_urls(
                &format!("printf %s local://{encoded}"),
                &fx.ctx(),
                UrlTarget::Command,
            );
            let expected = fx.local.join(&name);
            prop_assert_eq!(bash_printf(&command), expected.to_string_lossy().as_bytes().to_vec());
            prop_assert!(!canary.exists(), "the name ran as code: {}", command);
            // Shell syntax after a URL is read by bash, not swallowed: the
            // URL ends at `;` and the rest is left exactly as written.
            let after = format!("printf %s local://x;echo {}", name.replace('\'', ""));
            let command = expand_internal_urls(&after, &fx.ctx(), UrlTarget::Command);
            let suffix = &after["printf %s local://x".len()..];
            prop_assert!(command.ends_with(suffix), "{} does not end with {}", command, suffix);
            let _ = injected;
        }
    }
}
