//! The JSON-RPC protocol's schemas are part of the protocol: any change shows
//! up as a snapshot diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn schema_snapshot() {
    let schema = shellvisor_jsonrpc::schema();
    let methods: Vec<&String> = schema["methods"].as_object().unwrap().keys().collect();
    assert!(methods.len() >= 16, "{methods:?}");
    insta::assert_json_snapshot!(schema);
}
