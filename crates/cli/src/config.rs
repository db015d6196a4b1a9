//! Loading the configuration file.

use std::path::Path;

use anyhow::Context;
use shellvisor::Config;

/// Reads `path` as TOML (every field optional), or the defaults without one.
/// `minimizer_on` is the default of `output.minimizer.enabled` (on for
/// `shellvisor mcp`, whose text goes to a model); a file that sets it wins.
pub(crate) fn load(path: Option<&Path>, minimizer_on: bool) -> anyhow::Result<Config> {
    let Some(path) = path else {
        let mut config = Config::default();
        config.output.minimizer.enabled = minimizer_on;
        return Ok(config);
    };
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut config: Config =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let value: toml::Table =
        toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let set_in_file = value
        .get("output")
        .and_then(|output| output.get("minimizer"))
        .and_then(|minimizer| minimizer.get("enabled"))
        .is_some();
    if !set_in_file {
        config.output.minimizer.enabled = minimizer_on;
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimizer_default_yields_to_the_file() -> anyhow::Result<()> {
        assert!(load(None, true)?.output.minimizer.enabled);
        assert!(!load(None, false)?.output.minimizer.enabled);
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "[output.minimizer]\nenabled = false\n")?;
        assert!(!load(Some(&path), true)?.output.minimizer.enabled);
        std::fs::write(&path, "[output]\ninline_bytes = 100\n")?;
        assert!(load(Some(&path), true)?.output.minimizer.enabled);
        Ok(())
    }
}
