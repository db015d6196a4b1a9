//! Where a warm `true` round trip spends its time: the library emits
//! `trace!` events (target `shellvisor::stage`) at each stage of a run; this
//! bench records them and prints the median time between consecutive stages
//! and how often a stage ran on another thread than the one before it (a
//! wake-up of a parked worker, the costly part on a small VM).
//!
//! `cargo bench -p shellvisor-benches --bench stages`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Instant;
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::prelude::*;

static EVENTS: Mutex<Vec<(Instant, String, std::thread::ThreadId)>> = Mutex::new(Vec::new());
struct Rec;
impl<S: Subscriber> tracing_subscriber::Layer<S> for Rec {
    fn on_event(&self, e: &tracing::Event<'_>, _c: Context<'_, S>) {
        if e.metadata().target() != "shellvisor::stage" {
            return;
        }
        struct V(String);
        impl tracing::field::Visit for V {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut v = V(String::new());
        e.record(&mut v);
        EVENTS
            .lock()
            .unwrap()
            .push((Instant::now(), v.0, std::thread::current().id()));
    }
}
fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    tracing_subscriber::registry()
        .with(
            Rec.with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target("shellvisor::stage", tracing::Level::TRACE),
            ),
        )
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::spawn(async {
            let runtime = shellvisor::Runtime::start(shellvisor::Config::default())
                .await
                .unwrap();
            let s = runtime.session("p").await.unwrap();
            for _ in 0..200 {
                s.run(shellvisor::RunRequest::new("true")).await.unwrap();
            }
            EVENTS.lock().unwrap().clear();
            let mut sums: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            let mut moved: BTreeMap<String, usize> = BTreeMap::new();
            for _ in 0..2000 {
                // The caller's thread when it calls (the task may move while it waits).
                let caller = std::thread::current().id();
                let t0 = Instant::now();
                s.run(shellvisor::RunRequest::new("true")).await.unwrap();
                let t_end = Instant::now();
                let ev: Vec<_> = EVENTS.lock().unwrap().drain(..).collect();
                let mut prev = ("caller: call".to_string(), t0, caller);
                for (t, name, thread) in ev {
                    let key = format!("{} -> {}", prev.0, name);
                    if thread != prev.2 {
                        *moved.entry(key.clone()).or_default() += 1;
                    }
                    sums.entry(key)
                        .or_default()
                        .push((t - prev.1).as_secs_f64() * 1e6);
                    prev = (name, t, thread);
                }
                let key = format!("{} -> caller woke", prev.0);
                if std::thread::current().id() != prev.2 {
                    *moved.entry(key.clone()).or_default() += 1;
                }
                sums.entry(key)
                    .or_default()
                    .push((t_end - prev.1).as_secs_f64() * 1e6);
            }
            let mut rows: Vec<_> = sums
                .into_iter()
                .map(|(k, mut v)| {
                    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                    let m = moved.get(&k).copied().unwrap_or(0);
                    (v[v.len() / 2], k, v.len(), m)
                })
                .collect();
            rows.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
            for (p50, k, n, m) in rows {
                println!(
                    "{p50:8.1} µs  {k}  (n={n}, another thread {:.0}%)",
                    100.0 * m as f64 / n as f64
                );
            }
            runtime.shutdown().await;
        })
        .await
        .unwrap()
    });
}
