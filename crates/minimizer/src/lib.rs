//! The output minimizer: what a model is shown of a program's output.
//!
//! A `cargo build` or an `npm install` prints hundreds of progress lines
//! around the few that matter. For a single simple command (never a pipe or
//! a compound command: the caller decides that), the text shown is filtered:
//! the program's filter, if one matches its command, leaves out its noise
//! (`drop` patterns) but never what it must keep (`keep` patterns), and the
//! generic rules, for every program, leave out text progress bars and
//! collapse runs of identical lines. Filters are data (`filters.toml`, plus
//! the user's in the configuration), not code per program. The raw output is
//! never changed: the runtime keeps it byte-exact in the run's artifact.
//!
//! ```
//! use shellvisor_minimizer::FilterSet;
//! use shellvisor_protocol::MinimizerConfig;
//!
//! let filters = FilterSet::new(&MinimizerConfig::default()).unwrap();
//! let words = ["cargo", "build"].map(String::from);
//! let filter = filters.select(&words).unwrap();
//! let shown = filter.apply("   Compiling foo v0.1.0\nerror[E0425]: x\n");
//! assert_eq!(shown.text, "error[E0425]: x\n");
//! assert_eq!(filter.name(), "cargo");
//! ```
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

use std::sync::Arc;

use regex::RegexSet;
use serde::Deserialize;
use shellvisor_protocol::FilterSpec;
use shellvisor_protocol::MinimizerConfig;

/// The built-in filters.
const BUILT_IN: &str = include_str!("filters.toml");

/// Identical lines in a run of at least this many are shown once, with a count.
const COLLAPSE_RUN: usize = 3;

/// Why the filters could not be built.
#[derive(Debug, thiserror::Error)]
pub enum MinimizerError {
    /// The built-in filter file does not parse (a bug caught by the tests).
    #[error("the built-in filters do not parse: {0}")]
    BuiltIn(String),
    /// A filter's pattern is not a valid regular expression.
    #[error("filter {filter}: invalid pattern: {message}")]
    Pattern {
        /// The filter's name.
        filter: String,
        /// What is wrong.
        message: String,
    },
}

impl MinimizerError {
    /// A stable machine-readable code.
    pub fn code(&self) -> &'static str {
        match self {
            MinimizerError::BuiltIn(_) => "minimizer_built_in_invalid",
            MinimizerError::Pattern { .. } => "minimizer_pattern_invalid",
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BuiltIn {
    generic: FilterSpec,
    filter: Vec<FilterSpec>,
}

/// Every filter, compiled once per runtime.
#[derive(Debug)]
pub struct FilterSet {
    filters: Vec<(Vec<Vec<String>>, Arc<Filter>)>,
    generic: Arc<Filter>,
    only: Vec<String>,
    except: Vec<String>,
}

/// One compiled filter, with the generic rules.
#[derive(Debug)]
pub struct Filter {
    name: String,
    drop: RegexSet,
    keep: RegexSet,
    generic_drop: RegexSet,
}

/// What a filter made of a run's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Minimized {
    /// The text to show.
    pub text: String,
    /// Whether it differs from the input.
    pub changed: bool,
    /// Lines in the input.
    pub input_lines: usize,
    /// Lines left out (dropped, or folded into a repeat count).
    pub removed_lines: usize,
}

impl FilterSet {
    /// The built-in filters, after the configuration's own.
    ///
    /// # Errors
    /// A pattern that is not a valid regular expression.
    pub fn new(config: &MinimizerConfig) -> Result<FilterSet, MinimizerError> {
        let built_in: BuiltIn =
            toml::from_str(BUILT_IN).map_err(|err| MinimizerError::BuiltIn(err.to_string()))?;
        let generic_drop = compile(&built_in.generic.name, &built_in.generic.drop)?;
        let generic = Arc::new(Filter {
            name: built_in.generic.name.clone(),
            drop: RegexSet::empty(),
            keep: RegexSet::empty(),
            generic_drop: generic_drop.clone(),
        });
        let mut filters = Vec::new();
        for spec in config.filters.iter().chain(&built_in.filter) {
            let commands = spec
                .commands
                .iter()
                .map(|command| command.split_whitespace().map(str::to_owned).collect())
                .filter(|words: &Vec<String>| !words.is_empty())
                .collect();
            let filter = Filter {
                name: spec.name.clone(),
                drop: compile(&spec.name, &spec.drop)?,
                keep: compile(&spec.name, &spec.keep)?,
                generic_drop: generic_drop.clone(),
            };
            filters.push((commands, Arc::new(filter)));
        }
        Ok(FilterSet {
            filters,
            generic,
            only: config.only.clone(),
            except: config.except.clone(),
        })
    }

    /// The filter for a command of these words (a single simple command's,
    /// variable assignments left out): its program's, or the generic rules;
    /// `None` when the configuration leaves the program out.
    pub fn select(&self, words: &[String]) -> Option<Arc<Filter>> {
        let program = words.first()?;
        let program = program.rsplit('/').next().unwrap_or(program);
        if self.except.iter().any(|name| name == program)
            || (!self.only.is_empty() && !self.only.iter().any(|name| name == program))
        {
            return None;
        }
        let matches = |prefix: &Vec<String>| {
            prefix.len() <= words.len()
                && prefix
                    .iter()
                    .zip(words)
                    .enumerate()
                    .all(|(index, (want, word))| {
                        if index == 0 {
                            want == program
                        } else {
                            want == word
                        }
                    })
        };
        let chosen = self
            .filters
            .iter()
            .find(|(commands, _)| commands.iter().any(matches))
            .map_or(&self.generic, |(_, filter)| filter);
        Some(Arc::clone(chosen))
    }
}

impl Filter {
    /// The filter's name (`generic` for the generic rules alone).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Filters `text` (sanitized output: no escapes, `\r` overwrites
    /// resolved): the lines its `drop` or the generic rules match are left
    /// out unless `keep` matches them, then runs of identical lines are
    /// shown once with a count, and runs of blank lines once.
    pub fn apply(&self, text: &str) -> Minimized {
        let mut kept: Vec<&str> = Vec::new();
        let mut input_lines = 0;
        for line in text.split_inclusive('\n') {
            input_lines += 1;
            let bare = line.strip_suffix('\n').unwrap_or(line);
            let dropped = (self.drop.is_match(bare) || self.generic_drop.is_match(bare))
                && !self.keep.is_match(bare);
            if !dropped {
                kept.push(line);
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut shown_lines = 0;
        let mut index = 0;
        while index < kept.len() {
            let line = kept[index];
            let run = kept[index..]
                .iter()
                .take_while(|next| **next == line)
                .count();
            let blank = line.trim().is_empty();
            out.push_str(line);
            shown_lines += 1;
            if !line.ends_with('\n') {
                // Only the last line can be unterminated.
            } else if run >= COLLAPSE_RUN && !blank {
                out.push_str(&format!(
                    "[the line above repeated {} more times]\n",
                    run - 1
                ));
                shown_lines += 1;
            } else if !blank {
                for _ in 1..run {
                    out.push_str(line);
                    shown_lines += 1;
                }
            }
            index += run;
        }
        let changed = out != text;
        Minimized {
            text: out,
            changed,
            input_lines,
            removed_lines: input_lines.saturating_sub(shown_lines),
        }
    }
}

fn compile(filter: &str, patterns: &[String]) -> Result<RegexSet, MinimizerError> {
    RegexSet::new(patterns).map_err(|err| MinimizerError::Pattern {
        filter: filter.to_owned(),
        message: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn words(command: &str) -> Vec<String> {
        command.split_whitespace().map(str::to_owned).collect()
    }

    fn set() -> FilterSet {
        FilterSet::new(&MinimizerConfig::default()).unwrap()
    }

    #[test]
    fn commands_pick_their_filter_by_word_prefix() {
        let set = set();
        let name = |command: &str| set.select(&words(command)).map(|f| f.name().to_owned());
        assert_eq!(name("cargo build --release").as_deref(), Some("cargo"));
        assert_eq!(name("/usr/bin/git status").as_deref(), Some("git"));
        assert_eq!(name("python3 -m pytest -q").as_deref(), Some("pytest"));
        assert_eq!(name("cargo fmt").as_deref(), Some("generic"));
        assert_eq!(name("ls -l").as_deref(), Some("generic"));
        assert_eq!(name("").as_deref(), None);
    }

    #[test]
    fn only_except_and_user_filters_come_first() {
        let config = MinimizerConfig {
            only: vec!["cargo".to_owned(), "mytool".to_owned()],
            except: vec!["mytool".to_owned()],
            filters: vec![FilterSpec {
                name: "mine".to_owned(),
                commands: vec!["cargo build".to_owned()],
                drop: vec!["^noise".to_owned()],
                keep: Vec::new(),
            }],
            ..MinimizerConfig::default()
        };
        let set = FilterSet::new(&config).unwrap();
        assert_eq!(set.select(&words("cargo build")).unwrap().name(), "mine");
        assert!(set.select(&words("git status")).is_none(), "not in only");
        assert!(set.select(&words("mytool x")).is_none(), "in except");
        let bad = MinimizerConfig {
            filters: vec![FilterSpec {
                name: "bad".to_owned(),
                drop: vec!["(".to_owned()],
                ..FilterSpec::default()
            }],
            ..MinimizerConfig::default()
        };
        let err = FilterSet::new(&bad).unwrap_err();
        assert_eq!(err.code(), "minimizer_pattern_invalid");
    }

    #[test]
    fn repeats_collapse_with_a_count_and_keep_wins_over_drop() {
        let set = set();
        let generic = set.select(&words("ls")).unwrap();
        let shown = generic.apply("a\nsame\nsame\nsame\nsame\n\n\n\nb\nb\nend");
        assert_eq!(
            shown.text,
            "a\nsame\n[the line above repeated 3 more times]\n\nb\nb\nend"
        );
        assert_eq!(shown.input_lines, 11);
        assert_eq!(shown.removed_lines, 11 - 7);
        let unchanged = generic.apply("one\ntwo\n");
        assert!(!unchanged.changed);
        let cargo = set.select(&words("cargo build")).unwrap();
        let shown = cargo.apply("warning: Compiling is mentioned\n   Compiling x v1\n");
        assert_eq!(shown.text, "warning: Compiling is mentioned\n");
    }

    #[test]
    fn progress_bars_are_left_out_for_every_program() {
        let set = set();
        let generic = set.select(&words("./download.sh")).unwrap();
        let shown = generic.apply(
            "start\n[=====>      ] 45%\n 73% |██████████      | 7.3M\n   ━━━━━━━━━━━━━━━━ 100% done\nend\n",
        );
        assert_eq!(shown.text, "start\nend\n");
    }
}
