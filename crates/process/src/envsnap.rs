//! Parsing `export -p` output back into an environment.
//!
//! bash prints each exported variable as `declare -x NAME="value"` (values with
//! `"`, `$`, `` ` `` or `\` escaped by a backslash), as `declare -x NAME=$'...'`
//! (ANSI-C quoting, used for values with control characters), as
//! `declare -x NAME` (exported but unset), or in POSIX mode as
//! `export NAME="value"`. Exported arrays (`declare -ax NAME=(...)`) are not
//! part of a child's environment and are skipped.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// Parses `export -p` output into `(name, value)` pairs, in order.
///
/// # Errors
/// When the text is not `export -p` output (an unterminated quote, or a line
/// that is neither `declare ...` nor `export ...`).
pub fn parse_exported_env(text: &[u8]) -> Result<Vec<(OsString, OsString)>, String> {
    let mut cursor = Cursor { text, pos: 0 };
    let mut vars = Vec::new();
    loop {
        cursor.skip_while(|b| b == b'\n' || b == b' ');
        if cursor.at_end() {
            return Ok(vars);
        }
        let mut is_array = false;
        if cursor.eat(b"declare ") {
            if cursor.peek() == Some(b'-') {
                let flags = cursor.take_while(|b| b != b' ');
                is_array = flags.contains(&b'a') || flags.contains(&b'A');
                cursor.skip_while(|b| b == b' ');
            }
        } else if !cursor.eat(b"export ") {
            return Err(format!("unexpected text at byte {}", cursor.pos));
        }
        let name = cursor
            .take_while(|b| b.is_ascii_alphanumeric() || b == b'_')
            .to_vec();
        if name.is_empty() {
            return Err(format!("missing variable name at byte {}", cursor.pos));
        }
        if !cursor.eat(b"=") {
            continue; // Exported but unset: nothing to pass on.
        }
        if is_array {
            cursor.skip_array()?;
            continue;
        }
        let value = cursor.value()?;
        vars.push((OsString::from_vec(name), OsString::from_vec(value)));
    }
}

struct Cursor<'a> {
    text: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn at_end(&self) -> bool {
        self.pos >= self.text.len()
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    fn eat(&mut self, prefix: &[u8]) -> bool {
        if self.text[self.pos..].starts_with(prefix) {
            self.pos += prefix.len();
            true
        } else {
            false
        }
    }

    fn take_while(&mut self, keep: impl Fn(u8) -> bool) -> &[u8] {
        let start = self.pos;
        while self.peek().is_some_and(&keep) {
            self.pos += 1;
        }
        &self.text[start..self.pos]
    }

    fn skip_while(&mut self, skip: impl Fn(u8) -> bool) {
        self.take_while(skip);
    }

    fn value(&mut self) -> Result<Vec<u8>, String> {
        if self.eat(b"\"") {
            self.double_quoted()
        } else if self.eat(b"$'") {
            self.ansi_c_quoted()
        } else {
            Ok(self.take_while(|b| b != b'\n' && b != b' ').to_vec())
        }
    }

    fn double_quoted(&mut self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        loop {
            match self.next() {
                None => return Err("unterminated double-quoted value".to_owned()),
                Some(b'"') => return Ok(out),
                Some(b'\\') => match self.next() {
                    Some(c @ (b'$' | b'`' | b'"' | b'\\')) => out.push(c),
                    Some(b'\n') => {}
                    Some(other) => out.extend_from_slice(&[b'\\', other]),
                    None => return Err("unterminated double-quoted value".to_owned()),
                },
                Some(byte) => out.push(byte),
            }
        }
    }

    fn ansi_c_quoted(&mut self) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        loop {
            match self.next() {
                None => return Err("unterminated $'...' value".to_owned()),
                Some(b'\'') => return Ok(out),
                Some(b'\\') => self.ansi_c_escape(&mut out)?,
                Some(byte) => out.push(byte),
            }
        }
    }

    fn ansi_c_escape(&mut self, out: &mut Vec<u8>) -> Result<(), String> {
        let Some(c) = self.next() else {
            return Err("unterminated $'...' value".to_owned());
        };
        match c {
            b'a' => out.push(0x07),
            b'b' => out.push(0x08),
            b'e' | b'E' => out.push(0x1b),
            b'f' => out.push(0x0c),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(0x0b),
            b'\\' | b'\'' | b'"' | b'?' => out.push(c),
            b'0'..=b'7' => {
                let mut value = u32::from(c - b'0');
                for _ in 0..2 {
                    match self.peek() {
                        Some(d @ b'0'..=b'7') => {
                            value = value * 8 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                out.push((value & 0xff) as u8);
            }
            b'x' => match self.hex_digits(2) {
                Some(value) => out.push((value & 0xff) as u8),
                None => out.extend_from_slice(b"\\x"),
            },
            b'u' | b'U' => {
                let max = if c == b'u' { 4 } else { 8 };
                match self.hex_digits(max).and_then(char::from_u32) {
                    Some(ch) => out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes()),
                    None => out.extend_from_slice(&[b'\\', c]),
                }
            }
            b'c' => match self.next() {
                Some(b'?') => out.push(0x7f),
                Some(ctl) => out.push(ctl & 0x1f),
                None => return Err("unterminated $'...' value".to_owned()),
            },
            other => out.extend_from_slice(&[b'\\', other]),
        }
        Ok(())
    }

    fn hex_digits(&mut self, max: usize) -> Option<u32> {
        let mut value = 0u32;
        let mut count = 0;
        while count < max {
            let Some(digit) = self.peek().and_then(|b| char::from(b).to_digit(16)) else {
                break;
            };
            value = value * 16 + digit;
            self.pos += 1;
            count += 1;
        }
        (count > 0).then_some(value)
    }

    fn skip_array(&mut self) -> Result<(), String> {
        if !self.eat(b"(") {
            self.value()?;
            return Ok(());
        }
        loop {
            self.skip_while(|b| b == b' ');
            match self.peek() {
                None => return Err("unterminated array".to_owned()),
                Some(b')') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'[') => {
                    self.take_while(|b| b != b']');
                    self.pos += 1;
                    if self.eat(b"=") {
                        self.value()?;
                    }
                }
                Some(_) => {
                    self.value()?;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn pairs(vars: &[(OsString, OsString)]) -> Vec<(String, Vec<u8>)> {
        vars.iter()
            .map(|(k, v)| (k.to_string_lossy().into_owned(), v.clone().into_vec()))
            .collect()
    }

    #[test]
    fn parses_every_quoting_form() {
        let text = b"declare -x A=$'line1\\nline2'\n\
            declare -x B=\"q\\\"uo\\$te\\`\\\\\"\n\
            declare -x C=$'\\001ctl\\t'\n\
            declare -x E\n\
            declare -rx F=\"ro\"\n\
            declare -ax G=([0]=\"x\" [1]=$'y\\n')\n\
            export H=\"posix\"\n";
        let vars = parse_exported_env(text).unwrap();
        assert_eq!(
            pairs(&vars),
            vec![
                ("A".into(), b"line1\nline2".to_vec()),
                ("B".into(), b"q\"uo$te`\\".to_vec()),
                ("C".into(), b"\x01ctl\t".to_vec()),
                ("F".into(), b"ro".to_vec()),
                ("H".into(), b"posix".to_vec()),
            ]
        );
        assert!(parse_exported_env(b"garbage").is_err());
        assert!(parse_exported_env(b"declare -x A=\"open").is_err());
    }

    fn bash_roundtrip(values: &[String], locale: &str) -> Vec<(String, Vec<u8>)> {
        let mut script = Vec::new();
        for (index, value) in values.iter().enumerate() {
            script.extend_from_slice(format!("export V{index}=").as_bytes());
            crate::script::push_quoted(&mut script, value.as_bytes());
            script.push(b'\n');
        }
        script.extend_from_slice(b"export -p\n");
        let output = Command::new("bash")
            .args(["--noprofile", "--norc", "-c"])
            .arg(std::ffi::OsStr::from_bytes(&script))
            .env_clear()
            .env("LC_ALL", locale)
            .output()
            .unwrap();
        assert!(output.status.success());
        let parsed = parse_exported_env(&output.stdout).unwrap();
        pairs(&parsed)
            .into_iter()
            .filter(|(k, _)| k.starts_with('V'))
            .collect()
    }

    use std::os::unix::ffi::OsStrExt;

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        #[test]
        fn any_value_survives_export_p_in_real_bash(
            values in proptest::collection::vec("[^\u{0}]{0,40}", 1..6),
            utf8 in proptest::bool::ANY,
        ) {
            let locale = if utf8 { "C.UTF-8" } else { "C" };
            let got = bash_roundtrip(&values, locale);
            let mut want: Vec<(String, Vec<u8>)> = values
                .iter()
                .enumerate()
                .map(|(i, v)| (format!("V{i}"), v.as_bytes().to_vec()))
                .collect();
            want.sort();
            let mut got = got;
            got.sort();
            proptest::prop_assert_eq!(got, want);
        }
    }
}
