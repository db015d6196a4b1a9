//! The runtime handle.

use std::path::Path;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::time::Duration;

use ractor::Actor;
use ractor::ActorRef;
use ractor::rpc::CallResult;
use shellvisor_actor_supervisor::SessionEntry;
use shellvisor_actor_supervisor::Supervisor;
use shellvisor_actor_supervisor::SupervisorArgs;
use shellvisor_actor_supervisor::SupervisorMsg;
use shellvisor_minimizer::FilterSet;
use shellvisor_policy::Interceptor;
use shellvisor_policy::UrlResolver;
use shellvisor_policy::base_env;
use shellvisor_policy::default_intercept_rules;
use shellvisor_process::PrivateDir;
use shellvisor_process::ProcessRegistry;
use shellvisor_process::Spawner;
use shellvisor_process::contain::Containment;
use shellvisor_process::contain::ContainmentOptions;
use shellvisor_process::find_program;
use shellvisor_process::pty::PortablePty;
use shellvisor_process::pty::PtyBackend;
use shellvisor_protocol::Config;
use shellvisor_protocol::ContainmentReport;
use shellvisor_protocol::Error;
use shellvisor_protocol::Result;
use shellvisor_protocol::SessionId;
use shellvisor_protocol::SessionOptions;
use shellvisor_run::ArtifactBudget;
use shellvisor_run::ClientTerminals;
use shellvisor_run::RuntimeContext;
use shellvisor_run::Warnings;

use crate::remote::RemoteSessions;
use crate::session::Session;

/// How long shutdown waits for sessions to close before killing what is left.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// A running shellvisor runtime. Cheap to clone; every clone is the same
/// runtime. Dropping the last clone (and every [`Session`] handle) kills all
/// of its processes; [`Runtime::shutdown`] does it gracefully.
#[derive(Clone, Debug)]
pub struct Runtime {
    pub(crate) inner: Arc<RuntimeInner>,
}

#[derive(Debug)]
pub(crate) struct RuntimeInner {
    /// The root supervisor; replaced if it dies (see [`RuntimeInner::revive`]).
    root: std::sync::RwLock<ActorRef<SupervisorMsg>>,
    /// What a replacement root supervisor starts with (taken at shutdown,
    /// so the runtime's directories go with the last supervisor).
    supervisor_args: std::sync::Mutex<Option<SupervisorArgs>>,
    /// One revival at a time.
    reviving: tokio::sync::Mutex<()>,
    ctx: Arc<RuntimeContext>,
    running_jobs: Arc<AtomicUsize>,
    shut_down: AtomicBool,
    /// Where artifacts go (the directory itself is the supervisor's).
    artifacts_dir: PathBuf,
    /// Where the sessions live when they are not in this process.
    remote: Option<Arc<dyn RemoteSessions>>,
}

/// Builds a [`Runtime`] with host extensions, such as resolvers for internal
/// URL schemes (`skill://`, `plan://`, ...).
#[derive(Debug)]
pub struct RuntimeBuilder {
    config: Config,
    resolvers: Vec<Arc<dyn UrlResolver>>,
    pty_backend: Arc<dyn PtyBackend>,
    client_terminals: Option<Arc<dyn ClientTerminals>>,
    remote: Option<Arc<dyn RemoteSessions>>,
}

/// Name prefix of a runtime's private directory (scripts, FIFOs, sessions).
const RUNTIME_DIR_PREFIX: &str = "shellvisor-";
/// Name prefix of a runtime's artifacts directory on a disk.
const ARTIFACTS_DIR_PREFIX: &str = "shellvisor-artifacts-";

impl RuntimeBuilder {
    /// Resolves `<scheme>://` URLs in commands, env values and cwds with
    /// `resolver` (a later resolver for the same scheme wins).
    #[must_use]
    pub fn url_resolver(mut self, resolver: impl UrlResolver + 'static) -> Self {
        self.resolvers
            .retain(|existing| existing.scheme() != resolver.scheme());
        self.resolvers.push(Arc::new(resolver));
        self
    }

    /// Opens pseudo-terminals for `pty` runs with `backend` instead of the
    /// default ([`PortablePty`](crate::pty::PortablePty)). The runtime still
    /// starts the programs itself, with its containment.
    #[must_use]
    pub fn pty_backend(mut self, backend: impl PtyBackend + 'static) -> Self {
        self.pty_backend = Arc::new(backend);
        self
    }

    /// Runs every foreground pipe-mode command (`pty` false, not async) in
    /// a terminal `backend` owns instead of a session shell: for example the
    /// editor's terminal through ACP (`shellvisor::acp`, feature `acp`). Such a
    /// run is `bash -c <command>` in the session's directory (the request's
    /// `cwd`, else the session's first one), with the non-interactive
    /// variables, `shell.env` and the call's `env`; it keeps no shell state
    /// (`cd`, variables) and has no artifact, readiness, idle timeout or
    /// limits. A timeout kills the command before its output is read, a
    /// signal exit reads 137, and the terminal is always released.
    /// Terminal and async runs still use the session's own processes.
    #[must_use]
    pub fn client_terminals(mut self, backend: impl ClientTerminals + 'static) -> Self {
        self.client_terminals = Some(Arc::new(backend));
        self
    }

    /// Serves every session from `sessions` (another process: a cluster's
    /// nodes) instead of this runtime's own actors. [`Runtime::session`]
    /// then opens or finds the session there and returns the same
    /// [`Session`] handle, whose calls all go there; what runs, and under
    /// which limits, is the other process's. This runtime itself starts no
    /// shell; [`Runtime::shutdown`] closes the remote sessions it opened.
    #[must_use]
    pub fn remote_sessions(mut self, sessions: impl RemoteSessions) -> Self {
        self.remote = Some(Arc::new(sessions));
        self
    }

    /// Starts the runtime (see [`Runtime::start`]).
    ///
    /// # Errors
    /// See [`Runtime::start`].
    pub async fn start(self) -> Result<Runtime> {
        Runtime::start_with(
            self.config,
            self.resolvers,
            self.pty_backend,
            self.client_terminals,
            self.remote,
        )
        .await
    }
}

impl Runtime {
    /// Starts a runtime: its private directory, its spawner thread and its
    /// supervisor. Must be called inside a tokio runtime (multi-threaded or not).
    ///
    /// # Errors
    /// `invalid_request` for a `shell.nice` out of 0..=19; otherwise when the
    /// runtime directory, the spawner thread or the supervisor cannot be
    /// created.
    pub async fn start(config: Config) -> Result<Runtime> {
        Self::builder(config).start().await
    }

    /// A builder for a runtime with host extensions.
    pub fn builder(config: Config) -> RuntimeBuilder {
        RuntimeBuilder {
            config,
            resolvers: Vec::new(),
            pty_backend: Arc::new(PortablePty),
            client_terminals: None,
            remote: None,
        }
    }

    async fn start_with(
        mut config: Config,
        resolvers: Vec<Arc<dyn UrlResolver>>,
        pty_backend: Arc<dyn PtyBackend>,
        client_terminals: Option<Arc<dyn ClientTerminals>>,
        remote: Option<Arc<dyn RemoteSessions>>,
    ) -> Result<Runtime> {
        if !(0..=19).contains(&config.shell.nice) {
            return Err(Error::InvalidRequest {
                message: format!(
                    "shell.nice must be between 0 and 19, got {}",
                    config.shell.nice
                ),
            });
        }
        let base_env = base_env(
            std::env::vars_os(),
            config.shell.inherit_env,
            &config.shell.env,
        );
        // Once, on the runtime's PATH: a session's `export PATH=...` must not
        // decide where its next shell comes from.
        let path_var = base_env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v);
        config.shell.program =
            find_program(&config.shell.program, path_var).map_err(|err| Error::Spawn {
                what: "the shell".to_owned(),
                message: err.to_string(),
            })?;
        // The directories of runtimes that were killed before they could
        // remove them go first (nothing holds their lock any more).
        let runtime_parent = config
            .runtime_dir
            .clone()
            .unwrap_or_else(PrivateDir::default_parent);
        if config.runtime_dir.is_some() {
            std::fs::create_dir_all(&runtime_parent)
                .map_err(|err| Error::io("creating the runtime directory", &err))?;
        }
        let swept = PrivateDir::sweep_dead(&runtime_parent, RUNTIME_DIR_PREFIX);
        let runtime_dir = PrivateDir::create_owned(&runtime_parent, RUNTIME_DIR_PREFIX)
            .map_err(|err| Error::io("creating the runtime directory", &err))?;
        let artifacts_dir = match &config.artifacts_dir {
            Some(dir) => {
                let name = format!(
                    "shellvisor-{}",
                    shellvisor_protocol::random_token(8)
                        .map_err(|err| Error::io("generating a name", &err))?
                );
                PrivateDir::existing(dir.join(name))
            }
            // Artifacts can be large: on a disk, not in RAM, where there is one.
            None => match PrivateDir::disk_parent() {
                Some(parent) => {
                    let swept_artifacts = PrivateDir::sweep_dead(&parent, ARTIFACTS_DIR_PREFIX);
                    tracing::debug!(
                        swept = swept + swept_artifacts,
                        "dead runtimes' directories removed"
                    );
                    PrivateDir::create_owned(&parent, ARTIFACTS_DIR_PREFIX)
                }
                None => runtime_dir
                    .subdir("artifacts")
                    .and_then(PrivateDir::existing),
            },
        }
        .map_err(|err| Error::io("creating the artifacts directory", &err))?;
        let spawner = Arc::new(
            Spawner::start("shellvisor-spawner")
                .map_err(|err| Error::io("starting the spawner thread", &err))?,
        );
        let registry = ProcessRegistry::new();
        let options = ContainmentOptions {
            cgroups: config.containment.cgroups,
            pid_namespace: config.containment.pid_namespace,
            reaper: config.containment.reaper,
            pids_max_per_session: Some(config.containment.pids_max_per_session)
                .filter(|max| *max > 0),
            shell: config.shell.program.clone(),
        };
        let registry_for_containment = Arc::clone(&registry);
        let containment = Arc::new(
            tokio::task::spawn_blocking(move || {
                Containment::establish(&options, &registry_for_containment)
            })
            .await
            .map_err(|err| Error::Spawn {
                what: "containment".to_owned(),
                message: err.to_string(),
            })?,
        );
        tracing::debug!(
            layer = containment.layer().as_str(),
            "containment in effect"
        );
        let initial_cwd = config
            .shell
            .cwd
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        let running_jobs = Arc::new(AtomicUsize::new(0));
        let interceptor_config = &config.policy.interceptor;
        let interceptor = interceptor_config.enabled.then(|| {
            let rules = interceptor_config
                .rules
                .clone()
                .unwrap_or_else(default_intercept_rules);
            Interceptor::new(&rules)
        });
        let artifacts = ArtifactBudget::runtime(config.output.max_artifact_bytes);
        let minimizer = match config.output.minimizer.enabled {
            true => Some(Arc::new(FilterSet::new(&config.output.minimizer).map_err(
                |err| Error::InvalidRequest {
                    message: format!("output.minimizer: {err}"),
                },
            )?)),
            false => None,
        };
        let warnings = Warnings::default();
        let snapshot = crate::snapshot::take(
            &config,
            &base_env,
            runtime_dir.path(),
            &initial_cwd,
            &registry,
            &warnings,
        )
        .await;
        let ctx = Arc::new(RuntimeContext {
            config,
            spawner: Arc::clone(&spawner),
            registry: Arc::clone(&registry),
            containment: Arc::clone(&containment),
            base_env,
            home: std::env::var_os("HOME").map(PathBuf::from),
            initial_cwd,
            interceptor,
            resolvers,
            pty_backend,
            artifacts,
            snapshot,
            warnings,
            minimizer,
            client_terminals,
        });
        let artifacts_path = artifacts_dir.path().to_path_buf();
        let args = SupervisorArgs {
            ctx: Arc::clone(&ctx),
            runtime_dir: Arc::new(runtime_dir),
            artifacts_dir: Arc::new(artifacts_dir),
            running_jobs: Arc::clone(&running_jobs),
        };
        let (root, _) = Actor::spawn(None, Supervisor, args.clone())
            .await
            .map_err(|err| Error::Spawn {
                what: "supervisor".to_owned(),
                message: err.to_string(),
            })?;
        Ok(Runtime {
            inner: Arc::new(RuntimeInner {
                root: std::sync::RwLock::new(root),
                supervisor_args: std::sync::Mutex::new(Some(args)),
                reviving: tokio::sync::Mutex::new(()),
                ctx,
                running_jobs,
                shut_down: AtomicBool::new(false),
                artifacts_dir: artifacts_path,
                remote,
            }),
        })
    }

    /// Opens the session `id`, or returns the one already open. Its shell
    /// starts at once, so the first command finds it ready.
    ///
    /// # Errors
    /// [`Error::ShuttingDown`] after [`Runtime::shutdown`]; I/O errors creating
    /// the session's directories.
    pub async fn session(&self, id: impl Into<SessionId>) -> Result<Session> {
        self.session_with(id, SessionOptions::default()).await
    }

    /// Opens the session `id` set up by `options` (its init) if this creates
    /// it, or returns the one already open as it is.
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use shellvisor::{Config, RunRequest, Runtime, SessionOptions};
    ///
    /// let runtime = Runtime::start(Config::default()).await?;
    /// let session = runtime
    ///     .session_with("venv", SessionOptions::init("export GREETING=hello"))
    ///     .await?;
    /// let result = session.run(RunRequest::new("echo $GREETING")).await?.completed();
    /// assert_eq!(result.map(|r| r.output), Some("hello\n".to_owned()));
    /// runtime.shutdown().await;
    /// # Ok::<(), shellvisor::Error>(())
    /// # }).unwrap();
    /// ```
    ///
    /// # Errors
    /// As [`Runtime::session`], and `invalid_request` for an init with a NUL byte.
    pub async fn session_with(
        &self,
        id: impl Into<SessionId>,
        options: SessionOptions,
    ) -> Result<Session> {
        if let Some(init) = &options.init {
            shellvisor_policy::validate_command(init)?;
        }
        let id = id.into();
        if let Some(remote) = &self.inner.remote {
            self.inner.check_running()?;
            let session = remote.open(id.clone(), options).await?;
            return Ok(Session::remote(id, Arc::clone(&self.inner), session));
        }
        let entry = self.inner.open(&id, options.clone()).await?;
        Ok(Session::new(id, Arc::clone(&self.inner), entry, options))
    }

    /// Closes a session: kills its shells and processes, forgets its jobs.
    /// Closing an unknown session does nothing.
    pub async fn close_session(&self, id: impl Into<SessionId>) {
        let id = id.into();
        if let Some(remote) = &self.inner.remote {
            if let Err(err) = remote.close(id).await {
                tracing::warn!(%err, "could not close a remote session");
            }
            return;
        }
        let _ = self
            .inner
            .root()
            .call(
                |reply| SupervisorMsg::CloseSession { id, reply },
                Some(SHUTDOWN_TIMEOUT),
            )
            .await;
    }

    /// What went wrong without failing anything, oldest first: a shell
    /// snapshot that was skipped, a session's init that failed (the first
    /// failure of each session).
    pub fn warnings(&self) -> Vec<String> {
        self.inner.ctx.warnings.list()
    }

    /// The configuration in effect.
    pub fn config(&self) -> &Config {
        &self.inner.ctx.config
    }

    /// Background jobs running in the whole runtime (the runtime-wide cap,
    /// `jobs.max_running`, counts against this).
    pub fn running_jobs(&self) -> usize {
        if let Some(remote) = &self.inner.remote {
            return remote.running_jobs();
        }
        self.inner.running_jobs.load(Ordering::Acquire)
    }

    /// Number of process groups the runtime currently owns (shells and their jobs).
    pub fn live_process_groups(&self) -> usize {
        self.inner.ctx.registry.len()
    }

    /// Closes every session (their processes get SIGTERM, then SIGKILL after
    /// the grace period), stops the actors and the spawner thread. Afterwards
    /// nothing the runtime started is running. Idempotent.
    pub async fn shutdown(&self) {
        if self.inner.shut_down.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(remote) = &self.inner.remote
            && let Err(err) = remote.close_all().await
        {
            tracing::warn!(%err, "could not close every remote session");
        }
        let _ = self
            .inner
            .root()
            .call(SupervisorMsg::Shutdown, Some(SHUTDOWN_TIMEOUT))
            .await;
        let _ = self
            .inner
            .root()
            .stop_and_wait(Some("runtime shutdown".to_owned()), Some(SHUTDOWN_TIMEOUT))
            .await;
        // No revival after this; the directories go with the supervisor.
        self.inner
            .supervisor_args
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        self.inner.ctx.registry.kill_all();
        self.inner.ctx.spawner.shutdown();
        let containment = Arc::clone(&self.inner.ctx.containment);
        let _ = tokio::task::spawn_blocking(move || containment.close()).await;
    }

    /// How the runtime contains the processes it starts: a cgroup per session
    /// with a reaper (`cgroup`), the reaper alone (`reaper`), or process
    /// groups only (`process_groups`).
    pub fn containment(&self) -> ContainmentReport {
        self.inner.ctx.containment.report()
    }

    /// Where output artifacts are written (`output.artifacts_dir`, else a
    /// private directory on a disk, removed at shutdown).
    pub fn artifacts_dir(&self) -> &Path {
        &self.inner.artifacts_dir
    }

    /// Whether the artifacts directory is memory-backed (tmpfs or ramfs):
    /// only when no temporary directory on a disk was writable, or the
    /// configured one is.
    pub fn artifacts_in_memory(&self) -> bool {
        shellvisor_process::is_memory_backed(self.artifacts_dir())
    }
}

impl RuntimeInner {
    /// The root supervisor's cell (for fault injection).
    #[cfg(feature = "chaos")]
    pub(crate) fn root_cell(&self) -> ractor::ActorCell {
        self.root().get_cell()
    }

    /// The root supervisor now.
    fn root(&self) -> ActorRef<SupervisorMsg> {
        self.root
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The root supervisor `dead` stopped without a shutdown (a bug, a
    /// panic): its sessions go (their processes are killed with them) and a
    /// new root takes calls, so the runtime keeps serving instead of
    /// answering `shutting_down` forever. Sessions opened before start
    /// afresh; a handle to one of them gets `actor_gone`.
    async fn revive(&self, dead: &ActorRef<SupervisorMsg>) -> Result<()> {
        let _one = self.reviving.lock().await;
        if self.root().get_id() != dead.get_id() {
            return Ok(());
        }
        if matches!(
            dead.get_status(),
            ractor::ActorStatus::Running
                | ractor::ActorStatus::Starting
                | ractor::ActorStatus::Upgrading
        ) {
            return Ok(());
        }
        tracing::error!("the root supervisor died; starting another (open sessions are lost)");
        for session in dead.get_children() {
            session.stop(Some("the root supervisor died".to_owned()));
        }
        let args = self
            .supervisor_args
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or(Error::ShuttingDown)?;
        let (root, _) = Actor::spawn(None, Supervisor, args)
            .await
            .map_err(|err| Error::Spawn {
                what: "supervisor".to_owned(),
                message: err.to_string(),
            })?;
        *self
            .root
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = root;
        Ok(())
    }

    /// The configuration in effect.
    pub(crate) fn config(&self) -> &Config {
        &self.ctx.config
    }

    pub(crate) fn check_running(&self) -> Result<()> {
        if self.shut_down.load(Ordering::SeqCst) {
            Err(Error::ShuttingDown)
        } else {
            Ok(())
        }
    }

    pub(crate) async fn open(
        &self,
        id: &SessionId,
        options: SessionOptions,
    ) -> Result<SessionEntry> {
        for first in [true, false] {
            self.check_running()?;
            let root = self.root();
            let id = id.clone();
            let options = options.clone();
            match root
                .call(
                    |reply| SupervisorMsg::OpenSession { id, options, reply },
                    None,
                )
                .await
            {
                Ok(CallResult::Success(entry)) => return entry,
                Ok(_) | Err(_) if first => self.revive(&root).await?,
                Ok(_) | Err(_) => {}
            }
        }
        self.check_running()?;
        Err(Error::actor_gone("the root supervisor"))
    }
}

impl Drop for RuntimeInner {
    fn drop(&mut self) {
        // Not shut down gracefully: kill everything now, synchronously.
        self.ctx.registry.kill_all();
        self.root().kill();
        self.ctx.spawner.shutdown();
        self.ctx.containment.close();
    }
}
