//! The interface layers in process, over an in-memory pipe: each server's
//! cheapest call (MCP `ping`, JSON-RPC `runtime.info`) next to a warm `true`
//! through it and the first page of a session's job list with 1,000 jobs
//! retained. The gap between the floor and `true` is the interface's share
//! plus the library's warm run; `shellvisor bench` measures the same from
//! outside, over stdio.
//!
//! `cargo bench -p shellvisor-benches --bench interfaces`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;
use std::time::Instant;

use criterion::Criterion;
use criterion::criterion_group;
use criterion::criterion_main;
use serde_json::Value;
use serde_json::json;
use shellvisor::Config;
use shellvisor::Runtime;
use tokio::io::AsyncBufReadExt;
use tokio::io::AsyncWriteExt;
use tokio::io::BufReader;
use tokio::io::DuplexStream;
use tokio::io::ReadHalf;
use tokio::io::WriteHalf;

/// Finished jobs retained in the listed session.
const RETAINED: usize = 1000;

/// The client end of a line-delimited JSON-RPC server on an in-memory pipe.
struct Client {
    reader: BufReader<ReadHalf<DuplexStream>>,
    writer: WriteHalf<DuplexStream>,
    line: String,
    next_id: u64,
}

impl Client {
    fn new(stream: DuplexStream) -> Self {
        let (read, writer) = tokio::io::split(stream);
        Self {
            reader: BufReader::new(read),
            writer,
            line: String::new(),
            next_id: 1,
        }
    }

    async fn send(&mut self, message: &Value) {
        let mut bytes = serde_json::to_vec(message).unwrap();
        bytes.push(b'\n');
        self.writer.write_all(&bytes).await.unwrap();
        self.writer.flush().await.unwrap();
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            self.line.clear();
            assert!(self.reader.read_line(&mut self.line).await.unwrap() > 0);
            let mut message: Value = serde_json::from_str(&self.line).unwrap();
            if message.get("id").and_then(Value::as_u64) == Some(id) {
                assert!(message.get("error").is_none(), "{method}: {message}");
                return message["result"].take();
            }
        }
    }

    async fn tool(&mut self, name: &str, arguments: Value) -> Value {
        let result = self
            .call("tools/call", json!({"name": name, "arguments": arguments}))
            .await;
        assert_ne!(result["isError"], json!(true), "{name}: {result}");
        result
    }
}

fn config() -> Config {
    let mut config = Config::default();
    config.jobs.max_retained_per_session = RETAINED;
    config.jobs.retention_secs = 3600;
    config
}

fn time<F: AsyncFnMut(&mut Client)>(
    rt: &tokio::runtime::Runtime,
    client: &mut Client,
    iters: u64,
    mut call: F,
) -> Duration {
    rt.block_on(async {
        let started = Instant::now();
        for _ in 0..iters {
            call(client).await;
        }
        started.elapsed()
    })
}

fn mcp(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut client = rt.block_on(async {
        let runtime = Runtime::start(config()).await.unwrap();
        let (client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        tokio::spawn(shellvisor_mcp::serve(
            runtime,
            "bench".into(),
            (read, write),
        ));
        let mut client = Client::new(client);
        client
            .call(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}}),
            )
            .await;
        client
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        for _ in 0..RETAINED {
            client
                .tool("bash", json!({"command": "true", "session_id": "list"}))
                .await;
        }
        client
    });
    let mut group = c.benchmark_group("mcp");
    group.bench_function("ping", |b| {
        b.iter_custom(|iters| {
            time(&rt, &mut client, iters, async |c| {
                c.call("ping", json!({})).await;
            })
        })
    });
    group.bench_function("bash true", |b| {
        b.iter_custom(|iters| {
            time(&rt, &mut client, iters, async |c| {
                c.tool("bash", json!({"command": "true"})).await;
            })
        })
    });
    group.bench_function("job_list first page of 1000", |b| {
        b.iter_custom(|iters| {
            time(&rt, &mut client, iters, async |c| {
                c.tool("job_list", json!({"session_id": "list"})).await;
            })
        })
    });
    group.finish();
}

fn json_rpc(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut client = rt.block_on(async {
        let runtime = Runtime::start(config()).await.unwrap();
        let (client, server) = tokio::io::duplex(1 << 16);
        let (read, write) = tokio::io::split(server);
        tokio::spawn(shellvisor_jsonrpc::serve(
            runtime,
            read,
            write,
            shellvisor_jsonrpc::ServeOptions::default(),
        ));
        let mut client = Client::new(client);
        for session in ["bench", "list"] {
            client
                .call("session.open", json!({"session_id": session}))
                .await;
        }
        for _ in 0..RETAINED {
            client
                .call(
                    "run",
                    json!({"session_id": "list", "request": {"command": "true"}}),
                )
                .await;
        }
        client
    });
    let mut group = c.benchmark_group("json-rpc");
    group.bench_function("runtime.info", |b| {
        b.iter_custom(|iters| {
            time(&rt, &mut client, iters, async |c| {
                c.call("runtime.info", json!({})).await;
            })
        })
    });
    group.bench_function("run true", |b| {
        b.iter_custom(|iters| {
            time(&rt, &mut client, iters, async |c| {
                c.call(
                    "run",
                    json!({"session_id": "bench", "request": {"command": "true"}}),
                )
                .await;
            })
        })
    });
    group.bench_function("job.list first page of 1000", |b| {
        b.iter_custom(|iters| {
            time(&rt, &mut client, iters, async |c| {
                c.call("job.list", json!({"session_id": "list"})).await;
            })
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = mcp, json_rpc
}
criterion_main!(benches);
