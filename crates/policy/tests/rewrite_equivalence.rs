//! The request shaping (the leading-`cd` rewrite and `local://` expansion)
//! never changes what a command means: for generated commands, the planned
//! command either is the request's text byte for byte, or has the same
//! observable effect in a real bash (output, exit status, final `$PWD`,
//! `$OLDPWD`, and the files under the local root).
//!
//! The oracle is plain bash running the *original* text in a working
//! directory that holds a symlink named `local:` to the local root: bash
//! reads `local://f.txt` as the path `local:/f.txt`, which is exactly the
//! file the URL names. The planned command runs the way the Shell runs it
//! (`cd -- <cwd> && { . <file>; } 2>&1`) in an identical tree, and paths
//! of each tree are written back as the other's before comparing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

use proptest::prelude::*;
use shellvisor_policy::PlanContext;
use shellvisor_policy::UrlContext;
use shellvisor_policy::plan;
use shellvisor_protocol::Config;
use shellvisor_protocol::RunRequest;

/// One tree: a home, a working directory with subdirectories, and a local
/// root with a file in it.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Tree {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["home", "work/sub/deeper", "work/sp ace", "local/dir"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("local/f.txt"), "in f\n").unwrap();
        std::fs::write(root.join("local/dir/g.txt"), "in g\n").unwrap();
        std::fs::write(root.join("work/sub/note"), "note\n").unwrap();
        // Wherever the command may `cd`, `local:` means the local root.
        for at in [
            "",
            "home",
            "work",
            "work/sub",
            "work/sub/deeper",
            "work/sp ace",
            "local",
            "local/dir",
        ] {
            std::os::unix::fs::symlink(root.join("local"), root.join(at).join("local:")).unwrap();
        }
        Self { _dir: dir, root }
    }

    fn work(&self) -> PathBuf {
        self.root.join("work")
    }

    /// Runs `command` as the Shell would (after `cd` into `cwd`, if any),
    /// from the working directory; returns what can be observed.
    fn observe(&self, command: &str, cwd: Option<&Path>) -> String {
        let file = self.root.join("command");
        std::fs::write(&file, command).unwrap();
        let cd = cwd.map_or(String::new(), |cwd| {
            format!(
                "builtin cd -- '{}' && ",
                cwd.display().to_string().replace('\'', "'\\''")
            )
        });
        let script = format!(
            "{cd}{{ builtin . '{}'; }} </dev/null 2>&1\nprintf '\\n[rc=%s pwd=%s oldpwd=%s]\\n' $? \"$PWD\" \"${{OLDPWD-}}\"",
            file.display()
        );
        let output = Command::new("bash")
            .args(["--noprofile", "--norc", "-c", &script])
            .current_dir(self.work())
            .env_clear()
            .env("HOME", self.root.join("home"))
            .env("PATH", std::env::var_os("PATH").unwrap())
            .env("LC_ALL", "C")
            .output()
            .unwrap();
        let mut seen = String::from_utf8_lossy(&output.stdout).into_owned();
        seen.push_str(&self.files());
        seen
    }

    /// The local root's files and their contents.
    fn files(&self) -> String {
        let mut files = Vec::new();
        let mut stack = vec![self.root.join("local")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let kind = entry.file_type().unwrap();
                if kind.is_symlink() {
                    continue;
                }
                if kind.is_dir() {
                    stack.push(path);
                } else {
                    let content = std::fs::read(&path).unwrap_or_default();
                    files.push(format!(
                        "{}={}",
                        path.strip_prefix(&self.root).unwrap().display(),
                        String::from_utf8_lossy(&content)
                    ));
                }
            }
        }
        files.sort();
        files.join("|")
    }

    /// `text` with this tree's paths written as tree-independent names: the
    /// local root as the URL form bash saw, the rest as `ROOT`.
    fn normalize(&self, text: &str) -> String {
        let root = self.root.display().to_string();
        let text = text
            .replace(&format!("{root}/local/"), "local://")
            .replace("/local://", "/local:/")
            .replace(&format!("{root}/work/sub/deeper/local:/"), "local://")
            .replace(&format!("{root}/work/sub/local:/"), "local://")
            .replace(&format!("{root}/work/sp ace/local:/"), "local://")
            .replace(&format!("{root}/work/local:/"), "local://")
            .replace(&format!("{root}/home/local:/"), "local://")
            .replace(&format!("{root}/local/dir/local:/"), "local://")
            .replace(&format!("{root}/local/local:/"), "local://")
            .replace(&format!("{root}/local:/"), "local://")
            .replace(&root, "ROOT");
        // Tools quote a name with `:` in their messages (`cat: 'local://x'`)
        // and not the path it stands for: compare the names unquoted.
        unquote_urls(&text)
    }
}

/// `'local://…'` written as `local://…`.
fn unquote_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("'local://") {
        out.push_str(&rest[..at]);
        let url = &rest[at + 1..];
        match url.find('\'') {
            Some(end) => {
                out.push_str(&url[..end]);
                rest = &url[end + 1..];
            }
            None => {
                out.push_str(&rest[at..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Plans `command` against `tree` as a session in its working directory.
fn planned(command: &str, tree: &Tree) -> (String, Option<PathBuf>) {
    let config = Config::default();
    let home = tree.root.join("home");
    let local_root = tree.root.join("local");
    let artifacts = tree.root.join("artifacts");
    let work = tree.work();
    let ctx = PlanContext {
        config: &config,
        interceptor: None,
        urls: UrlContext {
            local_root: &local_root,
            artifacts_dir: &artifacts,
            resolvers: &[],
        },
        session_cwd: &work,
        home: Some(&home),
        cdpath: false,
    };
    let plan = plan(&RunRequest::new(command), &ctx).unwrap();
    (plan.command, plan.cwd)
}

fn dir_word() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "sub",
        "sub/deeper",
        "'sp ace'",
        "\"sp ace\"",
        "sp\\ ace",
        "/nonexistent",
        "..",
        "~",
        "~/",
        "-P sub",
        "-- sub",
        "su*",
        "$HOME",
        "missing",
        "-",
        "sub/note",
        "local://dir",
        "'local://dir'",
    ])
}

fn url() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "local://f.txt",
        "local://dir/g.txt",
        "local://missing",
        "local://dir/",
        "'local://f.txt'",
        "\"local://f.txt\"",
        "local://f.txt\\;x",
        "pre=local://f.txt",
        "local://",
        "xlocal://f.txt",
    ])
}

fn simple() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("pwd".to_owned()),
        Just("echo plain".to_owned()),
        Just("false".to_owned()),
        Just("cd sub".to_owned()),
        Just("cd -".to_owned()),
        Just("cat note".to_owned()),
        url().prop_map(|u| format!("cat {u}")),
        url().prop_map(|u| format!("echo {u}")),
        url().prop_map(|u| format!("echo new > {u}")),
        url().prop_map(|u| format!("echo more >> {u}")),
        url().prop_map(|u| format!("x={u}; cat $x")),
        url().prop_map(|u| format!("(cat {u})")),
        url().prop_map(|u| format!("for f in {u}; do cat \"$f\"; done")),
        url().prop_map(|u| format!("test -e {u} && echo yes")),
        url().prop_map(|u| format!("cat {u}|tr a-z A-Z")),
        url().prop_map(|u| format!("echo $(cat {u})")),
        url().prop_map(|u| format!("cat <<'EOF'\n{u}\nEOF")),
        url().prop_map(|u| format!("cat <<EOF\n{u}\nEOF")),
    ]
}

fn separator() -> impl Strategy<Value = &'static str> {
    // No pipes between commands: two processes writing at once interleave at random.
    prop::sample::select(vec!["; ", " && ", " || ", "&&", ";", "\n"])
}

fn leading() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        dir_word().prop_map(|d| format!("cd {d} && ")),
        dir_word().prop_map(|d| format!("cd {d}&&")),
        dir_word().prop_map(|d| format!("cd {d}; ")),
        dir_word().prop_map(|d| format!("cd {d} || ")),
        dir_word().prop_map(|d| format!("  cd {d} && ")),
    ]
}

fn command() -> impl Strategy<Value = String> {
    (
        leading(),
        simple(),
        prop::collection::vec((separator(), simple()), 0..3),
    )
        .prop_map(|(lead, first, rest)| {
            let mut command = lead + &first;
            for (sep, next) in rest {
                command.push_str(sep);
                command.push_str(&next);
            }
            command
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 600,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn shaping_keeps_what_a_command_means(command in command()) {
        let original = Tree::new();
        let shaped = Tree::new();
        let (text, cwd) = planned(&command, &shaped);
        if text == command && cwd.is_none() {
            // Byte-identical: nothing to compare.
            return Ok(());
        }
        let want = original.normalize(&original.observe(&command, None));
        let got = shaped.normalize(&shaped.observe(&text, cwd.as_deref()));
        prop_assert_eq!(&got, &want, "command {:?} became {:?} in {:?}", command, text, cwd);
    }
}

/// The generator is not vacuous: it makes commands the shaping leaves alone
/// and commands it rewrites (a `cd`, a URL, or both), in about equal shares.
#[test]
fn the_generator_exercises_both_outcomes() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let tree = Tree::new();
    let mut runner = TestRunner::deterministic();
    let strategy = command();
    let (mut identical, mut cd, mut urls) = (0, 0, 0);
    for _ in 0..600 {
        let command = strategy.new_tree(&mut runner).unwrap().current();
        let (text, cwd) = planned(&command, &tree);
        if cwd.is_some() {
            cd += 1;
        }
        if text.contains(&tree.root.join("local").display().to_string()) {
            urls += 1;
        }
        if text == command && cwd.is_none() {
            identical += 1;
        }
    }
    eprintln!(
        "of 600 generated commands: {identical} left byte-identical, {cd} with the cd rewritten, {urls} with URLs expanded"
    );
    assert!(
        identical >= 60 && cd >= 60 && urls >= 60,
        "{identical} {cd} {urls}"
    );
}
