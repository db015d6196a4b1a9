//! The JSON-RPC 2.0 envelope: parsing requests, shaping responses and errors.

use serde_json::Value;
use serde_json::json;

/// `-32700`: the line is not valid JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// `-32600`: valid JSON, but not a valid request.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// `-32601`: no such method.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// `-32602`: the params do not fit the method.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// `-32603`: the server failed.
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// `-32000`: the runtime refused or failed the call; `data.code` says how.
pub(crate) const RUNTIME_ERROR: i64 = -32000;

/// An error to send back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl From<shellvisor::Error> for RpcError {
    fn from(err: shellvisor::Error) -> Self {
        Self {
            code: RUNTIME_ERROR,
            message: err.to_string(),
            data: Some(json!({ "code": err.code().as_str() })),
        }
    }
}

/// A parsed request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Request {
    /// `None` for a notification (no `id` member): it gets no response.
    pub(crate) id: Option<Value>,
    pub(crate) method: String,
    pub(crate) params: Value,
}

/// Checks one message against JSON-RPC 2.0. On failure, the error and the id
/// to answer with (`null` when the id itself is unusable).
pub(crate) fn parse_request(message: Value) -> Result<Request, Box<(Value, RpcError)>> {
    let Value::Object(mut object) = message else {
        return Err(Box::new((
            Value::Null,
            RpcError::new(INVALID_REQUEST, "a request must be a JSON object"),
        )));
    };
    let id = match object.remove("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Null)) => Some(id),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Value::Number(n)),
        Some(_) => {
            return Err(Box::new((
                Value::Null,
                RpcError::new(INVALID_REQUEST, "id must be a string, an integer or null"),
            )));
        }
    };
    let answer_id = id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Box::new((
            answer_id,
            RpcError::new(INVALID_REQUEST, "jsonrpc must be \"2.0\""),
        )));
    }
    let method = match object.remove("method") {
        Some(Value::String(method)) => method,
        _ => {
            return Err(Box::new((
                answer_id,
                RpcError::new(INVALID_REQUEST, "method must be a string"),
            )));
        }
    };
    let params = match object.remove("params") {
        None | Some(Value::Null) => Value::Object(serde_json::Map::new()),
        Some(params @ Value::Object(_)) => params,
        Some(Value::Array(_)) => {
            return Err(Box::new((
                answer_id,
                RpcError::new(INVALID_PARAMS, "params must be an object (by name)"),
            )));
        }
        Some(_) => {
            return Err(Box::new((
                answer_id,
                RpcError::new(INVALID_REQUEST, "params must be an object"),
            )));
        }
    };
    if let Some(extra) = object.keys().find(|k| *k != "jsonrpc") {
        return Err(Box::new((
            answer_id,
            RpcError::new(INVALID_REQUEST, format!("unknown member: {extra}")),
        )));
    }
    Ok(Request { id, method, params })
}

/// A success response.
pub(crate) fn response(id: Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// An error response.
pub(crate) fn error_response(id: Value, error: RpcError) -> Value {
    let mut body = json!({ "code": error.code, "message": error.message });
    if let Some(data) = error.data {
        body["data"] = data;
    }
    json!({ "jsonrpc": "2.0", "id": id, "error": body })
}

/// A server-to-client notification.
pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({ "jsonrpc": "2.0", "method": method, "params": params })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(message: Value) -> (Value, i64) {
        let (id, err) = *parse_request(message).unwrap_err();
        (id, err.code)
    }

    #[test]
    fn well_formed_requests_and_notifications() {
        let request =
            parse_request(json!({"jsonrpc": "2.0", "id": 7, "method": "run", "params": {"a": 1}}))
                .unwrap();
        assert_eq!(request.id, Some(json!(7)));
        assert_eq!(request.method, "run");
        let note = parse_request(json!({"jsonrpc": "2.0", "method": "x"})).unwrap();
        assert_eq!(note.id, None);
        assert_eq!(note.params, json!({}));
    }

    #[test]
    fn malformed_requests_get_the_right_code() {
        assert_eq!(code(json!([1])), (Value::Null, INVALID_REQUEST));
        assert_eq!(
            code(json!({"jsonrpc": "1.0", "id": 1, "method": "x"})),
            (json!(1), INVALID_REQUEST)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": {}, "method": "x"})),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 1.5, "method": "x"})),
            (Value::Null, INVALID_REQUEST)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": "a", "method": 3})),
            (json!("a"), INVALID_REQUEST)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 2, "method": "x", "params": [1]})),
            (json!(2), INVALID_PARAMS)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 2, "method": "x", "params": 3})),
            (json!(2), INVALID_REQUEST)
        );
        assert_eq!(
            code(json!({"jsonrpc": "2.0", "id": 2, "method": "x", "extra": 1})),
            (json!(2), INVALID_REQUEST)
        );
    }
}
