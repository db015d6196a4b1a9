//! Environment rules: valid names, reserved names, and the non-interactive
//! environment every shell starts with.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::ffi::OsString;

use shellvisor_protocol::Error;
use shellvisor_protocol::Result;

/// Variables that make tools behave non-interactively: pagers print, editors
/// and credential prompts fail fast, package managers do not ask. Every shell
/// starts with these (as in the reference tool's `NON_INTERACTIVE_ENV`); a
/// caller's per-call `env` may override them for one call.
pub const NON_INTERACTIVE_ENV: &[(&str, &str)] = &[
    // Pagers.
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("SYSTEMD_PAGER", "cat"),
    ("BAT_PAGER", "cat"),
    ("DELTA_PAGER", "cat"),
    ("GH_PAGER", "cat"),
    ("GLAB_PAGER", "cat"),
    ("PSQL_PAGER", "cat"),
    ("MYSQL_PAGER", "cat"),
    ("HOMEBREW_PAGER", "cat"),
    ("AWS_PAGER", ""),
    ("LESS", "FRX"),
    // Terminal.
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PYTHONUNBUFFERED", "1"),
    // Editors and prompts.
    ("GIT_EDITOR", "true"),
    ("VISUAL", "true"),
    ("EDITOR", "true"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("SSH_ASKPASS", "/usr/bin/false"),
    ("GPG_TTY", "not a tty"),
    ("CI", "1"),
    // Package managers.
    ("npm_config_yes", "true"),
    ("npm_config_update_notifier", "false"),
    ("npm_config_fund", "false"),
    ("npm_config_audit", "false"),
    ("npm_config_progress", "false"),
    ("PNPM_DISABLE_SELF_UPDATE_CHECK", "true"),
    ("PNPM_UPDATE_NOTIFIER", "false"),
    ("YARN_ENABLE_TELEMETRY", "0"),
    ("YARN_ENABLE_PROGRESS_BARS", "0"),
    ("CARGO_TERM_PROGRESS_WHEN", "never"),
    // Other tools.
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("PIP_NO_INPUT", "1"),
    ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    ("TF_INPUT", "0"),
    ("TF_IN_AUTOMATION", "1"),
    ("GH_PROMPT_DISABLED", "1"),
    ("COMPOSER_NO_INTERACTION", "1"),
    ("CLOUDSDK_CORE_DISABLE_PROMPTS", "1"),
];

/// Names the runtime keeps for itself (the reference tool's guard keys): they
/// change how bash starts, parses or reports, so neither the inherited
/// environment nor a caller's `env` may set them.
const RESERVED_ENV_NAMES: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "HISTFILE",
    "HISTTIMEFORMAT",
    "HISTCMD",
    "PS0",
    "PS1",
    "PS2",
    "PS4",
    "PROMPT_COMMAND",
    "READLINE_LINE",
    "READLINE_POINT",
    "BASH",
    "BASHOPTS",
    "BASH_ALIASES",
    "BASH_ARGV0",
    "BASH_CMDS",
    "BASH_SOURCE",
    "BASH_SUBSHELL",
    "BASH_VERSINFO",
    "BASH_VERSION",
    "SHELLOPTS",
    "SHLVL",
    "COMP_WORDBREAKS",
    "DIRSTACK",
    "EPOCHREALTIME",
    "EPOCHSECONDS",
    "FUNCNAME",
    "GROUPS",
    "IFS",
    "LINENO",
    "MACHTYPE",
    "OSTYPE",
    "OPTERR",
    "OPTIND",
    "PIPESTATUS",
    "PPID",
    "PWD",
    "OLDPWD",
    "RANDOM",
    "SRANDOM",
    "SECONDS",
    "UID",
    "EUID",
    "HOSTTYPE",
    "MallocStackLogging",
    "MallocStackLoggingNoCompact",
];

/// Whether `name` matches `^[A-Za-z_][A-Za-z0-9_]*$`.
pub fn is_valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(first) if first.is_ascii_alphabetic() || first == b'_' => {
            bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        }
        _ => false,
    }
}

/// Prefix of the variables the runtime's command wrapper uses inside the shell.
const WRAPPER_VARIABLE_PREFIX: &str = "__shv_";

/// Whether `name` is reserved by the runtime (see the guard-key list), including
/// exported bash functions (`BASH_FUNC_*`) and the wrapper's own `__shv_*` variables.
pub fn is_reserved_env_name(name: &str) -> bool {
    name.starts_with("BASH_FUNC_")
        || name.starts_with(WRAPPER_VARIABLE_PREFIX)
        || RESERVED_ENV_NAMES.contains(&name)
}

/// Checks a caller's per-call `env`: every key a valid, unreserved name and no
/// value containing NUL.
///
/// # Errors
/// [`Error::InvalidEnvName`] (`Invalid bash env name: <key>`) for a malformed
/// key, [`Error::ReservedEnvName`] for a reserved one, and
/// [`Error::InvalidRequest`] for a value with a NUL byte.
pub fn validate_env(env: &BTreeMap<String, String>) -> Result<()> {
    for (name, value) in env {
        if !is_valid_env_name(name) {
            return Err(Error::InvalidEnvName { name: name.clone() });
        }
        if is_reserved_env_name(name) {
            return Err(Error::ReservedEnvName { name: name.clone() });
        }
        if value.contains('\0') {
            return Err(Error::InvalidRequest {
                message: format!("Invalid bash env value for {name}: values must not contain NUL"),
            });
        }
    }
    Ok(())
}

/// Checks the command text: bash cannot carry NUL bytes in a script.
///
/// # Errors
/// [`Error::InvalidRequest`] when the command contains a NUL byte.
pub fn validate_command(command: &str) -> Result<()> {
    if command.contains('\0') {
        return Err(Error::InvalidRequest {
            message: "Command must not contain NUL bytes".to_owned(),
        });
    }
    Ok(())
}

/// The environment a new shell starts with: the host environment (when
/// `inherit`) minus reserved and malformed names, then [`NON_INTERACTIVE_ENV`],
/// then `extra`. Without `inherit`, only `PATH` and `HOME` are taken from the host.
pub fn base_env<I, K, V>(
    host: I,
    inherit: bool,
    extra: &BTreeMap<String, String>,
) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let mut env: BTreeMap<OsString, OsString> = BTreeMap::new();
    for (key, value) in host {
        let (key, value) = (key.as_ref(), value.as_ref());
        let Some(name) = key.to_str() else { continue };
        let wanted = inherit || name == "PATH" || name == "HOME";
        if wanted && is_valid_env_name(name) && !is_reserved_env_name(name) {
            env.insert(key.to_owned(), value.to_owned());
        }
    }
    for (key, value) in NON_INTERACTIVE_ENV {
        env.insert(OsString::from(key), OsString::from(value));
    }
    for (key, value) in extra {
        if is_valid_env_name(key) && !is_reserved_env_name(key) {
            env.insert(OsString::from(key), OsString::from(value));
        }
    }
    env.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn regex_equivalent(name: &str) -> bool {
        // ^[A-Za-z_][A-Za-z0-9_]*$ spelled out over chars, independent of the implementation.
        let chars: Vec<char> = name.chars().collect();
        !chars.is_empty()
            && (chars[0] == '_' || chars[0].is_ascii_alphabetic())
            && chars[1..]
                .iter()
                .all(|c| *c == '_' || c.is_ascii_alphanumeric())
    }

    proptest! {
        #[test]
        fn env_name_acceptance_matches_the_regex(name in "\\PC{0,12}|[A-Za-z0-9_$.= -]{0,12}") {
            prop_assert_eq!(is_valid_env_name(&name), regex_equivalent(&name));
        }
    }

    #[test]
    fn invalid_and_reserved_names_are_refused_with_clear_errors() {
        let env = BTreeMap::from([("1BAD".to_owned(), "x".to_owned())]);
        assert_eq!(
            validate_env(&env).unwrap_err().to_string(),
            "Invalid bash env name: 1BAD"
        );
        let env = BTreeMap::from([("BASH_ENV".to_owned(), "/tmp/x".to_owned())]);
        assert_eq!(
            validate_env(&env).unwrap_err(),
            Error::ReservedEnvName {
                name: "BASH_ENV".into()
            }
        );
        let env = BTreeMap::from([("BASH_FUNC_ls%%".to_owned(), "() { :; }".to_owned())]);
        assert!(validate_env(&env).is_err());
        let env = BTreeMap::from([("__shv_rc".to_owned(), "0".to_owned())]);
        assert!(matches!(
            validate_env(&env),
            Err(Error::ReservedEnvName { .. })
        ));
        let env = BTreeMap::from([("OK".to_owned(), "a\0b".to_owned())]);
        assert!(matches!(
            validate_env(&env),
            Err(Error::InvalidRequest { .. })
        ));
        let env = BTreeMap::from([("PAGER".to_owned(), "less".to_owned())]);
        assert!(validate_env(&env).is_ok());
    }

    #[test]
    fn base_env_drops_reserved_names_and_adds_the_non_interactive_set() {
        let host = vec![
            ("PATH", "/usr/bin"),
            ("BASH_ENV", "/evil"),
            ("PS1", "$ "),
            ("HOME", "/root"),
            ("PAGER", "less"),
            ("bad name", "x"),
            ("KEEP_ME", "yes"),
        ];
        let extra = BTreeMap::from([("EXTRA".to_owned(), "1".to_owned())]);
        let env: BTreeMap<_, _> = base_env(host.clone(), true, &extra).into_iter().collect();
        assert_eq!(env.get(OsStr::new("PATH")).unwrap(), "/usr/bin");
        assert!(!env.contains_key(OsStr::new("BASH_ENV")));
        assert!(!env.contains_key(OsStr::new("PS1")));
        assert!(!env.contains_key(OsStr::new("bad name")));
        assert_eq!(env.get(OsStr::new("PAGER")).unwrap(), "cat");
        assert_eq!(env.get(OsStr::new("KEEP_ME")).unwrap(), "yes");
        assert_eq!(env.get(OsStr::new("EXTRA")).unwrap(), "1");
        let env: BTreeMap<_, _> = base_env(host, false, &BTreeMap::new())
            .into_iter()
            .collect();
        assert!(!env.contains_key(OsStr::new("KEEP_ME")));
        assert_eq!(env.get(OsStr::new("HOME")).unwrap(), "/root");
    }
}
