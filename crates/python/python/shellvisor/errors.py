"""Errors: one exception type carrying the protocol's stable codes."""

from __future__ import annotations

from typing import Any, Optional


class ShellvisorError(Exception):
    """An error answered by shellvisor.

    `code` is the stable machine-readable code (`invalid_env_name`,
    `invalid_cwd`, `job_not_found`, `pty_busy`, `job_limit_reached`, ...) for
    runtime errors, or `invalid_params`, `invalid_request`, `method_not_found`,
    `parse_error` for protocol errors; `rpc_code` the JSON-RPC error code."""

    def __init__(self, message: str, code: str, rpc_code: int, data: Optional[Any] = None):
        super().__init__(message)
        self.code = code
        self.rpc_code = rpc_code
        self.data = data


class ConnectionClosed(ShellvisorError):
    """The server went away (its process exited or the socket closed)."""

    def __init__(self, message: str = "the shellvisor server closed the connection"):
        super().__init__(message, "connection_closed", 0)


_PROTOCOL_CODES = {
    -32700: "parse_error",
    -32600: "invalid_request",
    -32601: "method_not_found",
    -32602: "invalid_params",
    -32603: "internal_error",
}


def from_rpc(error: dict[str, Any]) -> ShellvisorError:
    rpc_code = int(error.get("code", 0))
    data = error.get("data")
    code = data.get("code") if isinstance(data, dict) and "code" in data else _PROTOCOL_CODES.get(rpc_code, "error")
    return ShellvisorError(str(error.get("message", "error")), str(code), rpc_code, data)
