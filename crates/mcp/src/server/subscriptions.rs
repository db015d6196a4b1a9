//! `resources/subscribe` on `job://` resources: a watcher per session of
//! this connection turns the session's events into
//! `notifications/resources/updated`, at once on a state change (finished,
//! ready, a terminal's state) and at most every 500 ms for new output (the
//! flood guard: a job printing a million lines costs two notifications a
//! second).

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::time::Duration;

use dashmap::DashSet;
use rmcp::Peer;
use rmcp::RoleServer;
use rmcp::model::ResourceUpdatedNotificationParam;
use shellvisor::Session;
use shellvisor::SessionEvent;
use tokio::task::JoinHandle;

use crate::resources::ResourceUri;

/// How often new output of a subscribed job is told, at most.
const OUTPUT_NOTICE_EVERY: Duration = Duration::from_millis(500);

/// One connection's subscriptions.
#[derive(Debug, Default)]
pub(super) struct Subscriptions {
    /// The subscribed `job://` URIs.
    uris: Arc<DashSet<String>>,
    /// A watcher per session (by id), aborted with the connection.
    watchers: Mutex<HashMap<String, Watcher>>,
}

#[derive(Debug)]
struct Watcher(JoinHandle<()>);

impl Drop for Watcher {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Subscriptions {
    /// Subscribes to `uri`, a job of `session`, telling `peer` of its updates.
    pub(super) fn add(
        &self,
        uri: String,
        session_id: &str,
        session: &Session,
        peer: &Peer<RoleServer>,
    ) {
        self.uris.insert(uri);
        let mut watchers = self.watchers.lock().unwrap_or_else(PoisonError::into_inner);
        if watchers.contains_key(session_id) {
            return;
        }
        let task = tokio::spawn(watch(
            session_id.to_owned(),
            session.subscribe(),
            Arc::clone(&self.uris),
            peer.clone(),
        ));
        watchers.insert(session_id.to_owned(), Watcher(task));
    }

    /// Ends the subscription to `uri` (its session's watcher stays, idle).
    pub(super) fn remove(&self, uri: &str) {
        self.uris.remove(uri);
    }
}

async fn watch(
    session_id: String,
    mut events: shellvisor::Subscription,
    uris: Arc<DashSet<String>>,
    peer: Peer<RoleServer>,
) {
    let mut pending: HashSet<String> = HashSet::new();
    let mut ticker = tokio::time::interval(OUTPUT_NOTICE_EVERY);
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { return };
                let (job_id, state_change) = match &event {
                    SessionEvent::Output { job_id, .. }
                    | SessionEvent::OutputSuppressed { job_id, .. } => (job_id, false),
                    SessionEvent::JobFinished { job_id, .. }
                    | SessionEvent::JobReady { job_id, .. }
                    | SessionEvent::PtyState { job_id, .. } => (job_id, true),
                    SessionEvent::Lagged { .. } => {
                        // Events were dropped: tell every subscribed job of the session.
                        let prefix = ResourceUri::job(&session_id, "");
                        pending.extend(uris.iter().filter(|uri| uri.starts_with(&prefix)).map(|uri| uri.clone()));
                        continue;
                    }
                    _ => continue,
                };
                let uri = ResourceUri::job(&session_id, job_id.as_str());
                if !uris.contains(&uri) {
                    continue;
                }
                if state_change {
                    pending.remove(&uri);
                    if !tell(&peer, uri).await {
                        return;
                    }
                } else {
                    pending.insert(uri);
                }
            }
            _ = ticker.tick(), if !pending.is_empty() => {
                for uri in std::mem::take(&mut pending) {
                    if !tell(&peer, uri).await {
                        return;
                    }
                }
            }
        }
    }
}

/// Sends one update; `false` once the client is gone.
pub(super) async fn tell(peer: &Peer<RoleServer>, uri: String) -> bool {
    peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
        .await
        .is_ok()
}
