//! Loading the configuration file.

use std::path::Path;

use anyhow::Context;
use shellvisor::Config;

/// Reads `path` as TOML (every field optional), or the defaults without one.
pub(crate) fn load(path: Option<&Path>) -> anyhow::Result<Config> {
    let Some(path) = path else {
        return Ok(Config::default());
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}
