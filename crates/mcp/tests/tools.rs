//! The MCP tool list is part of the protocol: any change shows up as a
//! snapshot diff.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[test]
fn tool_list_snapshot() {
    let tools = shellvisor_mcp::tool_definitions();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "bash",
            "job_output",
            "job_wait",
            "job_kill",
            "job_list",
            "write_stdin",
            "pty_screen",
            "session_close"
        ]
    );
    insta::assert_json_snapshot!(tools);
}
