//! The front door's view of the nodes, from their heartbeats: who is live,
//! how loaded, and who was lost.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use std::time::Instant;

use tokio::sync::watch;

use crate::wire::Heartbeat;

/// One node as last heard of.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub(crate) beat: Heartbeat,
    pub(crate) last_seen: Instant,
    /// Its heartbeats stopped for the grace period (until the next one).
    pub(crate) lost: bool,
    /// How often it was lost (a call started before a loss ends with it).
    pub(crate) losses: u64,
    /// Sessions this front door placed on it since its last heartbeat
    /// (which did not count them yet).
    pub(crate) placed_since_beat: usize,
}

impl Member {
    /// What placement weighs: its sessions and jobs, and what was placed
    /// on it since it last told.
    pub(crate) fn load(&self) -> usize {
        self.beat.sessions + self.beat.running_jobs + self.placed_since_beat
    }

    /// Whether it can take one more session.
    pub(crate) fn has_room(&self) -> bool {
        !self.lost
            && !self.beat.draining
            && (self.beat.max_sessions == 0
                || self.beat.sessions + self.placed_since_beat < self.beat.max_sessions)
    }
}

/// The table of nodes, shared by the front door's tasks.
#[derive(Clone, Debug)]
pub(crate) struct Members {
    table: Arc<Mutex<HashMap<String, Member>>>,
    /// Bumped at every loss: calls in flight wait on it.
    losses: watch::Sender<u64>,
    grace: Duration,
}

impl Members {
    pub(crate) fn new(grace: Duration) -> Self {
        Self {
            table: Arc::new(Mutex::new(HashMap::new())),
            losses: watch::channel(0).0,
            grace,
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<String, Member>> {
        // A panic while holding the lock leaves a consistent table (every
        // update is a single insert or field write).
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A heartbeat arrived.
    pub(crate) fn saw(&self, beat: Heartbeat) {
        let mut table = self.table();
        let now = Instant::now();
        match table.get_mut(&beat.node) {
            Some(member) if member.beat.incarnation == beat.incarnation => {
                member.beat = beat;
                member.last_seen = now;
                member.lost = false;
                member.placed_since_beat = 0;
            }
            Some(member) => {
                // Restarted: the old incarnation's sessions are gone.
                let losses = member.losses + 1;
                *member = Member {
                    beat,
                    last_seen: now,
                    lost: false,
                    losses,
                    placed_since_beat: 0,
                };
                drop(table);
                self.losses.send_modify(|n| *n += 1);
            }
            None => {
                table.insert(
                    beat.node.clone(),
                    Member {
                        beat,
                        last_seen: now,
                        lost: false,
                        losses: 0,
                        placed_since_beat: 0,
                    },
                );
            }
        }
    }

    /// Marks as lost every node not heard from within the grace period;
    /// returns the names newly lost.
    pub(crate) fn expire(&self) -> Vec<String> {
        let now = Instant::now();
        let mut lost = Vec::new();
        {
            let mut table = self.table();
            for (name, member) in table.iter_mut() {
                if !member.lost && now.duration_since(member.last_seen) > self.grace {
                    member.lost = true;
                    member.losses += 1;
                    lost.push(name.clone());
                }
            }
        }
        if !lost.is_empty() {
            self.losses.send_modify(|n| *n += 1);
        }
        lost
    }

    /// Counts every node as heard from now (the front door's own connection
    /// just came back: their silence was its own).
    pub(crate) fn heard_all_now(&self) {
        let now = Instant::now();
        for member in self.table().values_mut() {
            member.last_seen = now;
        }
    }

    /// Whether `node`'s incarnation `incarnation` is live now.
    pub(crate) fn is_live(&self, node: &str, incarnation: &str) -> bool {
        self.table()
            .get(node)
            .is_some_and(|m| !m.lost && m.beat.incarnation == incarnation)
    }

    /// How often `node` was lost so far (`None`: never heard of).
    pub(crate) fn losses_of(&self, node: &str) -> Option<u64> {
        self.table().get(node).map(|m| m.losses)
    }

    /// Resolves once `node` has been lost more than `losses` times.
    pub(crate) async fn lost_after(&self, node: &str, losses: u64) {
        let mut changes = self.losses.subscribe();
        loop {
            if self.table().get(node).is_none_or(|m| m.losses > losses) {
                return;
            }
            if changes.changed().await.is_err() {
                // The table is gone with the front door: never resolves.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The least-loaded live node with room, counted as placed on.
    pub(crate) fn place(&self) -> Option<(String, String)> {
        let mut table = self.table();
        let (name, member) = table
            .iter_mut()
            .filter(|(_, m)| m.has_room())
            .min_by_key(|(name, m)| (m.load(), (*name).clone()))?;
        member.placed_since_beat += 1;
        Some((name.clone(), member.beat.incarnation.clone()))
    }

    /// Every node as last heard of, by name.
    pub(crate) fn snapshot(&self) -> Vec<Member> {
        let mut members: Vec<Member> = self.table().values().cloned().collect();
        members.sort_by(|a, b| a.beat.node.cmp(&b.beat.node));
        members
    }

    /// The longest heartbeat interval a node told.
    pub(crate) fn longest_interval(&self) -> Duration {
        Duration::from_millis(
            self.table()
                .values()
                .map(|m| m.beat.every_ms)
                .max()
                .unwrap_or(0),
        )
    }

    /// Whether any node is live.
    pub(crate) fn any_live(&self) -> bool {
        self.table().values().any(|m| !m.lost)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn beat(node: &str, incarnation: &str, sessions: usize) -> Heartbeat {
        Heartbeat {
            node: node.to_owned(),
            incarnation: incarnation.to_owned(),
            sessions,
            running_jobs: 0,
            max_sessions: 2,
            draining: false,
            every_ms: 500,
        }
    }

    #[test]
    fn placement_spreads_by_load_and_honours_the_cap() {
        let members = Members::new(Duration::from_secs(3));
        members.saw(beat("a", "1", 0));
        members.saw(beat("b", "1", 1));
        let placed: Vec<String> = (0..3)
            .filter_map(|_| members.place())
            .map(|p| p.0)
            .collect();
        assert_eq!(
            placed,
            vec!["a", "a", "b"],
            "a twice (0, 1), then b; all full"
        );
        assert_eq!(members.place(), None);
    }

    #[tokio::test]
    async fn a_silent_node_is_lost_and_wakes_its_calls() {
        let members = Members::new(Duration::from_millis(10));
        members.saw(beat("a", "1", 0));
        let before = members.losses_of("a").unwrap();
        let waiting = tokio::spawn({
            let members = members.clone();
            async move { members.lost_after("a", before).await }
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(members.expire(), vec!["a".to_owned()]);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the call was not told")
            .unwrap();
        assert!(!members.is_live("a", "1"));
        // Heard again: live, but a new incarnation is another node.
        members.saw(beat("a", "1", 0));
        assert!(members.is_live("a", "1"));
        members.saw(beat("a", "2", 0));
        assert!(!members.is_live("a", "1"));
        assert!(members.losses_of("a").unwrap() > before + 1);
    }
}
