//! What every actor of one runtime shares.

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;

use shellvisor_actor_sink::ArtifactBudget;
use shellvisor_policy::Interceptor;
use shellvisor_policy::UrlResolver;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::Spawner;
use shellvisor_process::contain::Containment;
use shellvisor_process::pty::PtyBackend;
use shellvisor_protocol::Config;

/// The parts of a runtime that every actor reads and none changes (but for
/// the warnings they add to): the
/// configuration, the spawner thread, the process registry, containment,
/// and the host's extensions. One per runtime, shared as an `Arc` by the
/// supervisor, its Sessions, their Shells and Jobs, so no actor keeps a
/// copy of what another holds.
#[derive(Debug)]
pub struct RuntimeContext {
    /// The runtime configuration.
    pub config: Config,
    /// The thread every shell and terminal program is forked from.
    pub spawner: Arc<Spawner>,
    /// Every live process group and terminal session the runtime owns.
    pub registry: Arc<ProcessRegistry>,
    /// Session cgroups, the reaper, and the layer in effect.
    pub containment: Arc<Containment>,
    /// The environment a fresh shell starts with (before any session state).
    pub base_env: Vec<(OsString, OsString)>,
    /// The home directory, for `~` in `cwd`.
    pub home: Option<PathBuf>,
    /// The first working directory of every session.
    pub initial_cwd: PathBuf,
    /// The interceptor, when it is enabled.
    pub interceptor: Option<Interceptor>,
    /// The host's resolvers for internal URL schemes.
    pub resolvers: Vec<Arc<dyn UrlResolver>>,
    /// Where pseudo-terminals come from.
    pub pty_backend: Arc<dyn PtyBackend>,
    /// Artifact bytes on disk, all sessions together
    /// (`output.max_artifact_bytes`).
    pub artifacts: ArtifactBudget,
    /// The user's shell snapshot, sourced by every new shell (`None`: off,
    /// or it failed).
    pub snapshot: Option<PathBuf>,
    /// What went wrong without failing anything (`runtime.info`).
    pub warnings: crate::Warnings,
    /// Where pipe-mode runs go instead of the session's shell, when the
    /// embedder installed a client-terminal backend.
    pub client_terminals: Option<Arc<dyn crate::ClientTerminals>>,
    /// The output minimizer's filters, when `output.minimizer.enabled`.
    pub minimizer: Option<Arc<shellvisor_minimizer::FilterSet>>,
}
