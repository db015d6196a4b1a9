//! The session's shells, each in exactly one place, and the state new
//! shells are seeded with.
//!
//! A shell is the **primary** (at most one: the session's persistent shell,
//! lent to at most one job at a time), the **standby** (at most one: ready
//! to become the primary), **lent** to exactly one job (an isolated shell,
//! or a former primary its job took to the background), or **retiring** (no
//! longer used, stopping, held by nobody). Where a shell is *is* its role,
//! and a held shell's holder is written once: in the primary's `holder`, or
//! as its key in `lent`. The pool decides; the Session carries out what it
//! returns (start, stop or release shells), so the pool is tested without
//! actors.

use std::collections::HashMap;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use ractor::ActorId;
use ractor::ActorRef;
use shellvisor_actor_job::ShellRelease;
use shellvisor_actor_shell::ShellMsg;
use shellvisor_process::EnvRecord;
use shellvisor_protocol::JobId;
use tokio::sync::watch;

/// How long seeding a shell waits for the primary's environment record of its
/// last run (the shell writes it right after the status; it only fails to come
/// if the shell died in between).
const ENV_RECORD_WAIT: Duration = Duration::from_millis(500);

/// What the pool needs of a shell handle: its actor's id.
pub(crate) trait PoolShell: Clone {
    /// The shell actor's id.
    fn key(&self) -> ActorId;
}

impl PoolShell for ActorRef<ShellMsg> {
    fn key(&self) -> ActorId {
        self.get_id()
    }
}

/// A session's shells and its last known state.
#[derive(Debug)]
pub(crate) struct ShellPool<S> {
    primary: Option<Primary<S>>,
    standby: Option<Spare<S>>,
    /// Held shells other than the primary, by their one holder.
    lent: HashMap<JobId, S>,
    /// Shells being stopped; nobody holds them.
    retiring: HashMap<ActorId, S>,
    /// The working directory after the primary's last completed run.
    cwd: PathBuf,
    /// `export -p` after the primary's last completed run that reported it
    /// (`None`: the base environment).
    env: Option<Bytes>,
    /// Where `env` is updated from: the environment records of the current
    /// primary, or of the last one until another takes its place (its last
    /// record may arrive after it is gone).
    env_source: Option<EnvSource>,
}

#[derive(Debug)]
struct Primary<S> {
    shell: S,
    holder: Option<JobId>,
}

#[derive(Debug)]
struct EnvSource {
    records: watch::Receiver<EnvRecord>,
    /// Nonce of the last completed run whose environment record follows.
    pending: Option<String>,
}

#[derive(Debug)]
struct Spare<S> {
    shell: S,
    records: watch::Receiver<EnvRecord>,
}

/// What the Session does with a shell a finished job gave back.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Returned<S> {
    /// The job held no shell (a terminal run, or a repeated notice).
    Nothing,
    /// The primary is idle again and the session's state follows its run; a
    /// standby started from the old state no longer matches: stop it.
    PrimaryKept { stale_standby: Option<S> },
    /// The primary ended or is in an unknown state: let it go (what earlier
    /// runs left running in it lives on) and start a replacement (not
    /// charged to the restart budget).
    PrimaryLost(S),
    /// A lent shell: let it go (it stops once the processes its commands
    /// left running, `server &`, are gone).
    Release(S),
}

/// What the pool knew of a shell whose actor stopped.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Stopped {
    /// The job that held it (it must learn its shell is gone).
    pub(crate) holder: Option<JobId>,
    /// It was the primary (the session needs a new one).
    pub(crate) was_primary: bool,
}

/// What a shell's bash ending means for the session.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BashEnded<S> {
    /// The standby died: stop its actor.
    Standby(S),
    /// The idle primary died on its own: stop its actor, charge the restart
    /// budget and start another.
    IdlePrimary(S),
    /// Nothing for the session to do (a run's Job reports it, or the shell
    /// was not in use).
    Nothing,
}

impl<S: PoolShell> ShellPool<S> {
    /// An empty pool whose first shell starts in `cwd`.
    pub(crate) fn new(cwd: PathBuf) -> Self {
        Self {
            primary: None,
            standby: None,
            lent: HashMap::new(),
            retiring: HashMap::new(),
            cwd,
            env: None,
            env_source: None,
        }
    }

    /// Shells the pool tracks: primary, standby, lent and retiring.
    pub(crate) fn len(&self) -> usize {
        usize::from(self.primary.is_some())
            + usize::from(self.standby.is_some())
            + self.lent.len()
            + self.retiring.len()
    }

    /// The session's last known working directory.
    pub(crate) fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// The session is now in `cwd` (a call that asked for it went to the
    /// background before reporting where it ended).
    pub(crate) fn moved_to(&mut self, cwd: PathBuf) {
        self.cwd = cwd;
    }

    /// The session's last known `export -p` (`None`: the base environment).
    pub(crate) fn env(&self) -> Option<&Bytes> {
        self.env.as_ref()
    }

    /// Whether the session's last known environment exports `name`.
    pub(crate) fn exports(&self, name: &str) -> bool {
        let Some(env) = &self.env else {
            return std::env::var_os(name).is_some();
        };
        let declared = format!("declare -x {name}");
        env.split(|b| *b == b'\n').any(|line| {
            line.strip_prefix(declared.as_bytes())
                .is_some_and(|rest| rest.is_empty() || rest[0] == b'=')
        })
    }

    /// The primary shell, if there is one.
    pub(crate) fn primary(&self) -> Option<&S> {
        self.primary.as_ref().map(|primary| &primary.shell)
    }

    /// Whether shells no longer used are still stopping (a released shell
    /// stays while processes its commands left running are alive).
    pub(crate) fn has_retiring(&self) -> bool {
        !self.retiring.is_empty()
    }

    /// Whether there is a primary shell.
    pub(crate) fn has_primary(&self) -> bool {
        self.primary.is_some()
    }

    /// Whether `key` is the primary shell.
    pub(crate) fn is_primary(&self, key: &ActorId) -> bool {
        self.primary.as_ref().is_some_and(|p| p.shell.key() == *key)
    }

    /// Whether `job` holds the primary.
    pub(crate) fn primary_held_by(&self, job: &JobId) -> bool {
        self.primary
            .as_ref()
            .is_some_and(|p| p.holder.as_ref() == Some(job))
    }

    /// Lends the primary to `job` if it is idle.
    pub(crate) fn lend_primary(&mut self, job: &JobId) -> Option<S> {
        let primary = self.primary.as_mut().filter(|p| p.holder.is_none())?;
        primary.holder = Some(job.clone());
        Some(primary.shell.clone())
    }

    /// Records a fresh shell lent to `job`. A job holds at most one shell:
    /// one it held before is returned, to be stopped.
    pub(crate) fn lend(&mut self, job: &JobId, shell: S) -> Option<S> {
        let before = self.take_held(job);
        self.lent.insert(job.clone(), shell);
        before
    }

    /// Makes `shell` the primary. A primary already there is returned, to be
    /// stopped.
    pub(crate) fn install_primary(
        &mut self,
        shell: S,
        records: watch::Receiver<EnvRecord>,
    ) -> Option<S> {
        let before = self.primary.take().and_then(|old| match old.holder {
            // Its holder keeps it.
            Some(holder) => {
                self.lent.insert(holder, old.shell);
                None
            }
            None => Some(self.retire(old.shell)),
        });
        self.primary = Some(Primary {
            shell,
            holder: None,
        });
        self.env_source = Some(EnvSource {
            records,
            pending: None,
        });
        before
    }

    /// Whether a standby should be started for the run `job`: it still holds
    /// the primary and there is none.
    pub(crate) fn wants_standby_for(&self, job: &JobId) -> bool {
        self.standby.is_none() && self.primary_held_by(job)
    }

    /// Whether there is a standby.
    pub(crate) fn has_standby(&self) -> bool {
        self.standby.is_some()
    }

    /// Keeps `shell` as the standby. One already there is returned, to be stopped.
    pub(crate) fn set_standby(
        &mut self,
        shell: S,
        records: watch::Receiver<EnvRecord>,
    ) -> Option<S> {
        let before = self.retire_standby();
        self.standby = Some(Spare { shell, records });
        before
    }

    /// The standby no longer matches the session's state: it retires and is
    /// returned, to be stopped.
    pub(crate) fn retire_standby(&mut self) -> Option<S> {
        let standby = self.standby.take()?;
        Some(self.retire(standby.shell))
    }

    /// Makes the standby the primary (there must be no primary). `false`
    /// when there is no standby.
    pub(crate) fn promote_standby(&mut self) -> bool {
        if self.primary.is_some() {
            return false;
        }
        let Some(standby) = self.standby.take() else {
            return false;
        };
        self.primary = Some(Primary {
            shell: standby.shell,
            holder: None,
        });
        self.env_source = Some(EnvSource {
            records: standby.records,
            pending: None,
        });
        true
    }

    /// `job` took the primary it holds to the background: the shell stays
    /// lent to it and the session has no primary until a new one is
    /// installed. `false` when `job` does not hold the primary.
    pub(crate) fn detach_primary(&mut self, job: &JobId) -> bool {
        if !self.primary_held_by(job) {
            return false;
        }
        if let Some(primary) = self.primary.take() {
            self.lent.insert(job.clone(), primary.shell);
        }
        true
    }

    /// Takes back whatever `job` holds, before it ran anything there (the
    /// shell refused the run): the shell retires and is returned, to be
    /// stopped. The session then has no primary if it was the primary.
    pub(crate) fn take_held(&mut self, job: &JobId) -> Option<S> {
        if self.primary_held_by(job) {
            let primary = self.primary.take()?;
            return Some(self.retire(primary.shell));
        }
        let shell = self.lent.remove(job)?;
        Some(self.retire(shell))
    }

    /// `job` finished and gives back the shell it held, in the state
    /// `release` says (`None`: unknown).
    pub(crate) fn give_back(&mut self, job: &JobId, release: Option<&ShellRelease>) -> Returned<S> {
        if self.primary_held_by(job) {
            if let Some(ShellRelease::Reusable {
                status,
                env_follows,
            }) = release
                && let Some(primary) = self.primary.as_mut()
            {
                primary.holder = None;
                if let Some(cwd) = &status.cwd {
                    self.cwd.clone_from(cwd);
                }
                if *env_follows && let Some(source) = self.env_source.as_mut() {
                    source.pending = Some(status.nonce.clone());
                }
                return Returned::PrimaryKept {
                    stale_standby: self.retire_standby(),
                };
            }
            // It ended during the run (exit, exec, timeout) or is in an
            // unknown state: the user's doing, not a crash.
            return match self.primary.take() {
                Some(primary) => Returned::PrimaryLost(self.retire(primary.shell)),
                None => Returned::Nothing,
            };
        }
        let Some(shell) = self.lent.remove(job) else {
            return Returned::Nothing;
        };
        Returned::Release(self.retire(shell))
    }

    /// A shell's bash ended (its actor goes on killing the group, then
    /// stops). `during_run`: a run was in progress, and its Job reports it.
    pub(crate) fn bash_ended(&mut self, key: &ActorId, during_run: bool) -> BashEnded<S> {
        if self.standby.as_ref().is_some_and(|s| s.shell.key() == *key) {
            return match self.retire_standby() {
                Some(shell) => BashEnded::Standby(shell),
                None => BashEnded::Nothing,
            };
        }
        if during_run || !self.is_primary(key) {
            return BashEnded::Nothing;
        }
        let Some(primary) = self.primary.take() else {
            return BashEnded::Nothing;
        };
        match primary.holder {
            // Lent, but its run had not started: the job still holds it and
            // learns it is gone when the run is refused or the actor stops.
            Some(holder) => {
                let shell = primary.shell.clone();
                self.lent.insert(holder, primary.shell);
                BashEnded::IdlePrimary(shell)
            }
            None => BashEnded::IdlePrimary(self.retire(primary.shell)),
        }
    }

    /// A shell's actor stopped: the pool forgets it and says who held it.
    /// `None` for a shell it did not know.
    pub(crate) fn forget(&mut self, key: &ActorId) -> Option<Stopped> {
        if self.is_primary(key) {
            let holder = self.primary.take().and_then(|p| p.holder);
            return Some(Stopped {
                holder,
                was_primary: true,
            });
        }
        if self.standby.as_ref().is_some_and(|s| s.shell.key() == *key) {
            self.standby = None;
            return Some(Stopped {
                holder: None,
                was_primary: false,
            });
        }
        if let Some(job) = self
            .lent
            .iter()
            .find_map(|(job, shell)| (shell.key() == *key).then(|| job.clone()))
        {
            self.lent.remove(&job);
            return Some(Stopped {
                holder: Some(job),
                was_primary: false,
            });
        }
        self.retiring.remove(key).map(|_| Stopped {
            holder: None,
            was_primary: false,
        })
    }

    /// Takes the (current or last) primary's environment record of its last
    /// completed run into the session's state, waiting briefly if it has not
    /// been read yet.
    pub(crate) async fn refresh_env(&mut self) {
        let Some(source) = self.env_source.as_mut() else {
            return;
        };
        if let Some(nonce) = source.pending.take() {
            let arrived = tokio::time::timeout(
                ENV_RECORD_WAIT,
                source.records.wait_for(|record| record.nonce == nonce),
            )
            .await;
            if !matches!(arrived, Ok(Ok(_))) {
                tracing::debug!(
                    "environment record of the last run missing; using the previous one"
                );
            }
        }
        let record = source.records.borrow();
        if !record.env.is_empty() {
            self.env = Some(record.env.clone());
        }
    }

    /// Moves a shell nobody holds to the retiring set and returns it (to be
    /// stopped).
    fn retire(&mut self, shell: S) -> S {
        self.retiring.insert(shell.key(), shell.clone());
        shell
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
