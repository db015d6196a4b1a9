//! Named keys to the bytes a terminal sends for them.

use shellvisor_protocol::Error;
use shellvisor_protocol::Result;

/// The bytes a terminal sends for the key `name`.
///
/// Names: `Enter`, `Tab`, `Esc`, `Backspace`, `Space`, `Delete`, `Insert`,
/// `Home`, `End`, `PageUp`, `PageDown`, `Up`, `Down`, `Left`, `Right`, `F1`
/// to `F12`, `C-<x>` (control: `C-c`, `C-d`, `C-z`, `C-[`...), `M-<x>` (meta:
/// Esc then the key). Case does not matter for the names; `C-`/`M-` may be
/// combined (`M-C-x`). In application cursor mode (set by full-screen
/// programs) arrows, Home and End use the `ESC O` forms.
///
/// ```
/// use shellvisor_actor_pty::key_bytes;
///
/// assert_eq!(key_bytes("C-c", false).unwrap(), b"\x03");
/// assert_eq!(key_bytes("Up", false).unwrap(), b"\x1b[A");
/// assert_eq!(key_bytes("Up", true).unwrap(), b"\x1bOA");
/// assert!(key_bytes("C-", false).is_err());
/// ```
///
/// # Errors
/// [`Error::InvalidRequest`] naming the key when it is unknown or longer
/// than [`MAX_KEY_NAME_BYTES`].
pub fn key_bytes(name: &str, application_cursor: bool) -> Result<Vec<u8>> {
    if name.len() > MAX_KEY_NAME_BYTES {
        return Err(Error::InvalidRequest {
            message: format!(
                "Key name too long: {} bytes (at most {MAX_KEY_NAME_BYTES}): {}",
                name.len(),
                shown(name)
            ),
        });
    }
    // `M-` prefixes, each an Esc before the key: a loop, never recursion,
    // whatever the caller sends.
    let mut bytes = Vec::new();
    let mut key = name;
    while let Some(rest) = strip_prefix_ci(key, "M-") {
        bytes.push(0x1b);
        key = rest;
    }
    bytes.extend(plain_key(key, application_cursor).ok_or_else(|| unknown(name))?);
    Ok(bytes)
}

/// The longest key name accepted (`M-C-PageDown` is 12 bytes).
pub const MAX_KEY_NAME_BYTES: usize = 64;

/// A key without `M-` prefixes; `None` when it has no name.
fn plain_key(name: &str, application_cursor: bool) -> Option<Vec<u8>> {
    if let Some(rest) = strip_prefix_ci(name, "C-") {
        return control(rest).map(|b| vec![b]);
    }
    let cursor = |letter: u8| {
        if application_cursor {
            vec![0x1b, b'O', letter]
        } else {
            vec![0x1b, b'[', letter]
        }
    };
    let bytes = match name.to_ascii_lowercase().as_str() {
        "enter" | "return" => b"\r".to_vec(),
        "tab" => b"\t".to_vec(),
        "esc" | "escape" => b"\x1b".to_vec(),
        "backspace" | "bs" => b"\x7f".to_vec(),
        "space" => b" ".to_vec(),
        "delete" | "del" => b"\x1b[3~".to_vec(),
        "insert" => b"\x1b[2~".to_vec(),
        "pageup" | "pgup" => b"\x1b[5~".to_vec(),
        "pagedown" | "pgdn" => b"\x1b[6~".to_vec(),
        "up" => cursor(b'A'),
        "down" => cursor(b'B'),
        "right" => cursor(b'C'),
        "left" => cursor(b'D'),
        "home" => cursor(b'H'),
        "end" => cursor(b'F'),
        "f1" => b"\x1bOP".to_vec(),
        "f2" => b"\x1bOQ".to_vec(),
        "f3" => b"\x1bOR".to_vec(),
        "f4" => b"\x1bOS".to_vec(),
        "f5" => b"\x1b[15~".to_vec(),
        "f6" => b"\x1b[17~".to_vec(),
        "f7" => b"\x1b[18~".to_vec(),
        "f8" => b"\x1b[19~".to_vec(),
        "f9" => b"\x1b[20~".to_vec(),
        "f10" => b"\x1b[21~".to_vec(),
        "f11" => b"\x1b[23~".to_vec(),
        "f12" => b"\x1b[24~".to_vec(),
        _ => {
            // A single character is typed as itself (`M-x` is Esc then x).
            let mut chars = name.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => c.to_string().into_bytes(),
                _ => return None,
            }
        }
    };
    Some(bytes)
}

/// `C-x`: the key's code with the top three bits cleared (`C-?` is DEL).
fn control(key: &str) -> Option<u8> {
    if key.eq_ignore_ascii_case("space") {
        return Some(0);
    }
    let [byte] = key.as_bytes() else {
        return None;
    };
    match byte {
        b'?' => Some(0x7f),
        b'a'..=b'z' => Some(byte - b'a' + 1),
        b'@'..=b'_' => Some(byte & 0x1f),
        b' ' => Some(0),
        _ => None,
    }
}

fn strip_prefix_ci<'a>(name: &'a str, prefix: &str) -> Option<&'a str> {
    let head = name.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &name[prefix.len()..])
}

/// At most the first 32 characters of `name`, marked when cut.
fn shown(name: &str) -> String {
    let mut chars = name.chars();
    let head: String = chars.by_ref().take(32).collect();
    if chars.next().is_some() {
        format!("{head}...")
    } else {
        head
    }
}

fn unknown(name: &str) -> Error {
    let name = shown(name);
    Error::InvalidRequest {
        message: format!(
            "Unknown key: {name} (use Enter, Tab, Esc, Backspace, arrows, Home, End, PageUp, PageDown, Delete, F1-F12, C-<x> or M-<x>)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_keys_are_the_ascii_control_codes() {
        assert_eq!(key_bytes("C-c", false).unwrap(), [0x03]);
        assert_eq!(key_bytes("C-d", false).unwrap(), [0x04]);
        assert_eq!(key_bytes("C-z", false).unwrap(), [0x1a]);
        assert_eq!(key_bytes("c-C", false).unwrap(), [0x03]);
        assert_eq!(key_bytes("C-[", false).unwrap(), [0x1b]);
        assert_eq!(key_bytes("C-?", false).unwrap(), [0x7f]);
        assert_eq!(key_bytes("M-x", false).unwrap(), b"\x1bx");
        assert_eq!(key_bytes("M-C-x", false).unwrap(), [0x1b, 0x18]);
    }

    #[test]
    fn named_keys() {
        assert_eq!(key_bytes("Enter", false).unwrap(), b"\r");
        assert_eq!(key_bytes("tab", false).unwrap(), b"\t");
        assert_eq!(key_bytes("Esc", false).unwrap(), b"\x1b");
        assert_eq!(key_bytes("Left", false).unwrap(), b"\x1b[D");
        assert_eq!(key_bytes("Left", true).unwrap(), b"\x1bOD");
        assert_eq!(key_bytes("F5", false).unwrap(), b"\x1b[15~");
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        assert_eq!(key_bytes("q", false).unwrap(), b"q");
        assert_eq!(key_bytes("M-M-x", false).unwrap(), b"\x1b\x1bx");
        for name in ["", "C-", "C-ab", "C-é", "Hyper", "M-", "M-M-"] {
            let err = key_bytes(name, false).unwrap_err();
            assert!(
                err.to_string().starts_with("Unknown key: "),
                "{name}: {err}"
            );
        }
    }

    #[test]
    fn a_huge_key_name_is_refused_without_recursion() {
        // 50,000 `M-` prefixes overflowed the stack when each was a call.
        let name = "M-".repeat(50_000);
        let err = key_bytes(&name, false).unwrap_err().to_string();
        assert!(err.starts_with("Key name too long: 100000 bytes"), "{err}");
        assert!(err.len() < 200, "the error does not echo the name: {err}");
        let longest = format!("{}x", "M-".repeat(31));
        assert_eq!(key_bytes(&longest, false).unwrap().len(), 32);
        let err = key_bytes(&"Hyper".repeat(12), false).unwrap_err();
        assert!(err.to_string().ends_with("M-<x>)"), "{err}");
        assert!(err.to_string().contains("..."), "{err}");
    }
}
