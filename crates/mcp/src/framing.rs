//! The connection's line framing, rmcp-free: rmcp's own stdio transport
//! drops a message over its size limit with only a log line, and ignores
//! one that is not JSON, so a client that sent either would wait forever.
//! Here every line is read with the limit first (the JSON-RPC crate's
//! [`shellvisor_jsonrpc::framing::LineReader`]); one over
//! it is answered with a JSON-RPC error (`-32600`, the limit in its message,
//! the request's `id` when its first or last bytes show it), as is a line
//! that is no MCP message ([`unreadable`]). Answers and rmcp's messages go
//! out through one [`shellvisor_jsonrpc::framing::LineWriter`], a whole
//! line at a time.
//!
//! The transport that puts these in front of rmcp is
//! `server::transport`: it reads and writes in rmcp's own tasks, with no
//! relay of its own between the connection and rmcp.

use serde_json::Value;
use serde_json::json;
use shellvisor_jsonrpc::framing::Oversized;

/// Largest request, in bytes (without its newline): rmcp's own default, so
/// what passes here passes there.
pub const MAX_REQUEST_BYTES: usize = 16 * 1024 * 1024;

/// `-32700`: the line is not JSON.
const PARSE_ERROR: i64 = -32700;
/// `-32600`: JSON, but not a request this server reads.
const INVALID_REQUEST: i64 = -32600;

/// The error answer to an oversized request, one line.
pub(crate) fn too_large(oversized: &Oversized) -> Vec<u8> {
    error_line(
        oversized.request_id(),
        INVALID_REQUEST,
        &format!(
            "request too large: {} bytes (limit {MAX_REQUEST_BYTES} bytes per message)",
            oversized.len
        ),
        Some(json!({ "limit_bytes": MAX_REQUEST_BYTES, "request_bytes": oversized.len })),
    )
}

/// The answer to a line rmcp could not read as an MCP message (`why`: its
/// parser's error), or `None` when none is due: a notification (it has no
/// `id`) is never answered, whatever is wrong with it. A line that is not
/// JSON gets `-32700`; a request of the wrong shape `-32600` with its `id`.
pub(crate) fn unreadable(line: &[u8], why: &serde_json::Error) -> Option<Vec<u8>> {
    let Ok(value) = serde_json::from_slice::<Value>(line) else {
        return Some(error_line(
            None,
            PARSE_ERROR,
            &format!("parse error: {why}"),
            None,
        ));
    };
    let id = value.get("id");
    if value.get("method").is_some() && id.is_none() {
        return None;
    }
    let id = id.filter(|id| id.is_number() || id.is_string()).cloned();
    Some(error_line(
        id,
        INVALID_REQUEST,
        &format!("invalid request: {why}"),
        None,
    ))
}

/// A JSON-RPC error answer, one line.
fn error_line(id: Option<Value>, code: i64, message: &str, data: Option<Value>) -> Vec<u8> {
    let mut error = json!({ "code": code, "message": message });
    if let Some(data) = data {
        error["data"] = data;
    }
    let answer = json!({ "jsonrpc": "2.0", "id": id, "error": error });
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn answer(line: &[u8]) -> Option<Value> {
        let why = serde_json::from_slice::<u8>(line).unwrap_err();
        unreadable(line, &why).map(|line| serde_json::from_slice(&line).unwrap())
    }

    #[test]
    fn unreadable_lines_are_answered_unless_they_are_notifications() {
        let not_json = answer(b"{oops").unwrap();
        assert_eq!(not_json["error"]["code"], -32700, "{not_json}");
        assert_eq!(not_json["id"], Value::Null);
        let request = answer(br#"{"jsonrpc":"2.0","id":"r-1","method":"tools/call","params":7}"#);
        let request = request.unwrap();
        assert_eq!(request["error"]["code"], -32600, "{request}");
        assert_eq!(request["id"], "r-1");
        let no_method = answer(br#"{"id":3}"#).unwrap();
        assert_eq!(no_method["id"], 3, "{no_method}");
        let odd_id = answer(br#"{"id":[1],"method":"m"}"#).unwrap();
        assert_eq!(odd_id["id"], Value::Null, "{odd_id}");
        assert_eq!(
            answer(br#"{"jsonrpc":"2.0","method":"notifications/x","params":1}"#),
            None
        );
    }
}
