//! How many artifact bytes a session and the runtime may hold on disk.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering;

/// A shared count of artifact bytes against a limit: one for the runtime,
/// one per session under it. Sinks charge it as they write and give the
/// bytes back when their artifact is deleted.
#[derive(Clone, Debug)]
pub struct ArtifactBudget {
    runtime: Arc<Counter>,
    session: Option<Arc<Counter>>,
}

#[derive(Debug)]
struct Counter {
    used: AtomicU64,
    limit: u64,
    /// What the limit is called in the configuration, for the notice.
    name: &'static str,
    scope: &'static str,
}

impl Counter {
    fn charge(&self, bytes: u64) -> Result<(), String> {
        let before = self.used.fetch_add(bytes, Ordering::AcqRel);
        if before.saturating_add(bytes) > self.limit {
            self.used.fetch_sub(bytes, Ordering::AcqRel);
            return Err(format!(
                "{} artifacts would pass {} bytes, `{}`",
                self.scope, self.limit, self.name
            ));
        }
        Ok(())
    }

    fn release(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

impl ArtifactBudget {
    /// The runtime's budget: `limit` bytes for every session together.
    pub fn runtime(limit: u64) -> Self {
        Self {
            runtime: Arc::new(Counter {
                used: AtomicU64::new(0),
                limit,
                name: "output.max_artifact_bytes",
                scope: "the runtime's",
            }),
            session: None,
        }
    }

    /// A session's budget of `limit` bytes, inside the runtime's.
    pub fn for_session(&self, limit: u64) -> Self {
        Self {
            runtime: Arc::clone(&self.runtime),
            session: Some(Arc::new(Counter {
                used: AtomicU64::new(0),
                limit,
                name: "output.max_artifact_bytes_per_session",
                scope: "the session's",
            })),
        }
    }

    /// Bytes charged now (the session's when this is a session budget).
    pub fn used(&self) -> u64 {
        self.session
            .as_ref()
            .unwrap_or(&self.runtime)
            .used
            .load(Ordering::Acquire)
    }

    /// Charges `bytes` to the session and the runtime, or neither; the
    /// error names the limit that refused them.
    pub(crate) fn charge(&self, bytes: u64) -> Result<(), String> {
        if let Some(session) = &self.session {
            session.charge(bytes)?;
        }
        if let Err(refused) = self.runtime.charge(bytes) {
            if let Some(session) = &self.session {
                session.release(bytes);
            }
            return Err(refused);
        }
        Ok(())
    }

    /// Gives back `bytes` charged before.
    pub(crate) fn release(&self, bytes: u64) {
        if let Some(session) = &self.session {
            session.release(bytes);
        }
        self.runtime.release(bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_over_either_limit_takes_nothing() {
        let runtime = ArtifactBudget::runtime(100);
        let first = runtime.for_session(60);
        let second = runtime.for_session(60);
        assert_eq!(first.charge(50), Ok(()));
        let refused = first.charge(20).unwrap_err();
        assert!(
            refused.contains("max_artifact_bytes_per_session"),
            "{refused}"
        );
        assert_eq!(first.used(), 50);
        assert_eq!(second.charge(40), Ok(()));
        let refused = second.charge(20).unwrap_err();
        assert!(refused.contains("`output.max_artifact_bytes`"), "{refused}");
        assert_eq!(second.used(), 40, "the session's charge was rolled back");
        first.release(50);
        assert_eq!(second.charge(20), Ok(()));
        assert_eq!(runtime.used(), 60);
    }
}
