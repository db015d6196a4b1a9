//! The placement bucket (JetStream KV): session -> node, with revisions, so
//! that two front doors placing one session agree on one node.

use std::time::Duration;

use async_nats::jetstream::kv;
use futures_util::StreamExt;
use shellvisor::Error;

use crate::options::unavailable;
use crate::wire::Names;
use crate::wire::Placement;

/// Deadline of one bucket operation.
const KV_DEADLINE: Duration = Duration::from_secs(5);

/// The placement bucket.
#[derive(Clone, Debug)]
pub(crate) struct Placements {
    store: kv::Store,
}

/// A placement and the revision it was read at.
pub(crate) type Read = Option<(Placement, u64)>;

/// Changes to the bucket from now on: a key and its placement (`None`: the
/// key was deleted).
pub(crate) struct PlacementWatch {
    watch: kv::Watch,
}

impl std::fmt::Debug for PlacementWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlacementWatch")
    }
}

impl PlacementWatch {
    pub(crate) async fn next(&mut self) -> Option<(String, Option<Placement>)> {
        loop {
            match self.watch.next().await? {
                Ok(entry) => {
                    let placement = match entry.operation {
                        kv::Operation::Put => match serde_json::from_slice(&entry.value) {
                            Ok(placement) => Some(placement),
                            Err(_) => continue,
                        },
                        kv::Operation::Delete | kv::Operation::Purge => None,
                    };
                    return Some((entry.key, placement));
                }
                Err(err) => {
                    tracing::warn!(%err, "placement watch error");
                    return None;
                }
            }
        }
    }
}

fn kv_error(what: &str, err: impl std::fmt::Display) -> Error {
    unavailable(format!("placement bucket: {what}: {err}"))
}

async fn deadline<T, E: std::fmt::Display>(
    what: &str,
    op: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, Error> {
    match tokio::time::timeout(KV_DEADLINE, op).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(kv_error(what, err)),
        Err(_) => Err(kv_error(what, "no answer within 5 s")),
    }
}

impl Placements {
    /// Opens the bucket, creating it if it does not exist.
    pub(crate) async fn open(client: &async_nats::Client, names: &Names) -> Result<Self, Error> {
        let jetstream = async_nats::jetstream::new(client.clone());
        let bucket = names.bucket();
        let store = match deadline("opening", jetstream.get_key_value(bucket.clone())).await {
            Ok(store) => store,
            Err(_) => {
                deadline(
                    "creating",
                    jetstream.create_key_value(kv::Config {
                        bucket,
                        description: "shellvisor: which node holds each session".to_owned(),
                        history: 1,
                        ..kv::Config::default()
                    }),
                )
                .await?
            }
        };
        Ok(Self { store })
    }

    /// The placement of `key` and its revision.
    pub(crate) async fn read(&self, key: &str) -> Result<Read, Error> {
        let entry = deadline("reading", self.store.entry(key)).await?;
        Ok(entry.and_then(|entry| match entry.operation {
            kv::Operation::Put => serde_json::from_slice(&entry.value)
                .ok()
                .map(|placement| (placement, entry.revision)),
            kv::Operation::Delete | kv::Operation::Purge => None,
        }))
    }

    /// Writes `placement` for `key` if the key holds what was read at
    /// `revision` (`None`: if it holds nothing). `false`: someone else wrote
    /// first (read again).
    pub(crate) async fn write(
        &self,
        key: &str,
        placement: &Placement,
        revision: Option<u64>,
    ) -> Result<bool, Error> {
        let value = serde_json::to_vec(placement)
            .map_err(|err| kv_error("encoding", err))?
            .into();
        match revision {
            None => match tokio::time::timeout(KV_DEADLINE, self.store.create(key, value)).await {
                Ok(Ok(_)) => Ok(true),
                Ok(Err(err)) if err.kind() == kv::CreateErrorKind::AlreadyExists => Ok(false),
                Ok(Err(err)) => Err(kv_error("creating", err)),
                Err(_) => Err(kv_error("creating", "no answer within 5 s")),
            },
            Some(revision) => {
                match tokio::time::timeout(KV_DEADLINE, self.store.update(key, value, revision))
                    .await
                {
                    Ok(Ok(_)) => Ok(true),
                    Ok(Err(err)) if err.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                        Ok(false)
                    }
                    Ok(Err(err)) => Err(kv_error("updating", err)),
                    Err(_) => Err(kv_error("updating", "no answer within 5 s")),
                }
            }
        }
    }

    /// Forgets `key`.
    pub(crate) async fn remove(&self, key: &str) -> Result<(), Error> {
        deadline("deleting", self.store.delete(key)).await
    }

    /// Every key.
    pub(crate) async fn keys(&self) -> Result<Vec<String>, Error> {
        let mut keys = deadline("listing", self.store.keys()).await?;
        let mut all = Vec::new();
        while let Some(key) = tokio::time::timeout(KV_DEADLINE, keys.next())
            .await
            .map_err(|_| kv_error("listing", "no answer within 5 s"))?
        {
            all.push(key.map_err(|err| kv_error("listing", err))?);
        }
        Ok(all)
    }

    /// Changes from now on.
    pub(crate) async fn watch(&self) -> Result<PlacementWatch, Error> {
        let watch = deadline("watching", self.store.watch_all()).await?;
        Ok(PlacementWatch { watch })
    }
}
