//! Unit tests of the shell pool (no actors).

use shellvisor_process::StatusRecord;

use super::*;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Fake(u64);

impl PoolShell for Fake {
    fn key(&self) -> ActorId {
        ActorId::Local(self.0)
    }
}

fn job(name: &str) -> JobId {
    JobId::new(name)
}

fn records() -> (watch::Sender<EnvRecord>, watch::Receiver<EnvRecord>) {
    watch::channel(EnvRecord::default())
}

fn pool_with_primary() -> ShellPool<Fake> {
    let mut pool = ShellPool::new(PathBuf::from("/start"));
    assert_eq!(pool.install_primary(Fake(1), records().1), None);
    pool
}

fn completed(cwd: &str, nonce: &str, env_follows: bool) -> ShellRelease {
    ShellRelease::Reusable {
        status: StatusRecord {
            nonce: nonce.to_owned(),
            exit_code: Some(0),
            cwd: Some(PathBuf::from(cwd)),
        },
        env_follows,
    }
}

#[test]
fn the_primary_is_lent_to_one_job_at_a_time() {
    let mut pool = pool_with_primary();
    assert_eq!(pool.lend_primary(&job("a")), Some(Fake(1)));
    assert!(pool.primary_held_by(&job("a")));
    assert_eq!(pool.lend_primary(&job("b")), None, "b needs its own shell");
    assert_eq!(pool.lend(&job("b"), Fake(2)), None);
    assert_eq!(pool.forget(&Fake(2).key()).unwrap().holder, Some(job("b")));
}

#[test]
fn a_completed_run_keeps_the_primary_and_moves_the_session_state() {
    let mut pool = pool_with_primary();
    pool.lend_primary(&job("a"));
    assert!(pool.wants_standby_for(&job("a")));
    assert_eq!(pool.set_standby(Fake(9), records().1), None);
    assert!(!pool.wants_standby_for(&job("a")));
    let returned = pool.give_back(&job("a"), Some(&completed("/tmp", "n1", false)));
    assert_eq!(
        returned,
        Returned::PrimaryKept {
            stale_standby: Some(Fake(9))
        }
    );
    assert_eq!(pool.cwd(), Path::new("/tmp"));
    assert!(!pool.has_standby());
    assert_eq!(pool.lend_primary(&job("b")), Some(Fake(1)), "idle again");
    assert_eq!(
        pool.give_back(&job("a"), None),
        Returned::Nothing,
        "a repeated notice changes nothing"
    );
}

#[test]
fn a_primary_that_ended_during_its_run_is_replaced_without_its_state() {
    let mut pool = pool_with_primary();
    pool.lend_primary(&job("a"));
    assert_eq!(
        pool.give_back(&job("a"), Some(&ShellRelease::Ended)),
        Returned::PrimaryLost(Fake(1))
    );
    assert!(!pool.has_primary());
    assert_eq!(pool.cwd(), Path::new("/start"));
    // Its actor stops later: known, held by nobody, not the primary.
    assert_eq!(
        pool.forget(&Fake(1).key()),
        Some(Stopped {
            holder: None,
            was_primary: false
        })
    );
}

#[test]
fn a_backgrounded_job_keeps_its_shell_and_the_standby_takes_over() {
    let mut pool = pool_with_primary();
    pool.lend_primary(&job("a"));
    pool.set_standby(Fake(2), records().1);
    assert!(pool.detach_primary(&job("a")));
    assert!(!pool.detach_primary(&job("a")), "once");
    assert!(pool.promote_standby());
    assert!(pool.is_primary(&Fake(2).key()));
    assert_eq!(
        pool.give_back(&job("a"), Some(&completed("/x", "n", true))),
        Returned::Release(Fake(1))
    );
    assert_eq!(
        pool.cwd(),
        Path::new("/start"),
        "a lent run's cwd is its own"
    );
    let mut pool = pool_with_primary();
    pool.lend(&job("b"), Fake(3));
    assert_eq!(pool.give_back(&job("b"), None), Returned::Release(Fake(3)));
}

#[test]
fn a_refused_run_gives_its_shell_back_before_anything_ran() {
    let mut pool = pool_with_primary();
    pool.lend_primary(&job("a"));
    assert_eq!(pool.take_held(&job("a")), Some(Fake(1)));
    assert!(!pool.has_primary());
    assert_eq!(pool.take_held(&job("a")), None);
    pool.lend(&job("a"), Fake(2));
    assert_eq!(
        pool.lend(&job("a"), Fake(3)),
        Some(Fake(2)),
        "one shell per job"
    );
}

#[test]
fn bash_ending_matters_only_for_the_idle_primary_and_the_standby() {
    let mut pool = pool_with_primary();
    pool.set_standby(Fake(2), records().1);
    assert_eq!(
        pool.bash_ended(&Fake(2).key(), false),
        BashEnded::Standby(Fake(2))
    );
    assert!(!pool.has_standby());
    pool.lend_primary(&job("a"));
    assert_eq!(pool.bash_ended(&Fake(1).key(), true), BashEnded::Nothing);
    assert!(pool.has_primary(), "its Job reports the run");
    // Lent but not yet running: the job keeps holding it.
    assert_eq!(
        pool.bash_ended(&Fake(1).key(), false),
        BashEnded::IdlePrimary(Fake(1))
    );
    assert!(!pool.has_primary());
    assert_eq!(pool.forget(&Fake(1).key()).unwrap().holder, Some(job("a")));
    let mut pool = pool_with_primary();
    assert_eq!(
        pool.bash_ended(&Fake(1).key(), false),
        BashEnded::IdlePrimary(Fake(1))
    );
    assert_eq!(pool.bash_ended(&Fake(7).key(), false), BashEnded::Nothing);
}

#[test]
fn a_stopped_primary_actor_is_reported_with_its_holder() {
    let mut pool = pool_with_primary();
    pool.lend_primary(&job("a"));
    assert_eq!(
        pool.forget(&Fake(1).key()),
        Some(Stopped {
            holder: Some(job("a")),
            was_primary: true
        })
    );
    assert!(!pool.has_primary());
    assert_eq!(pool.forget(&Fake(1).key()), None);
}

#[tokio::test]
async fn the_last_record_of_a_lost_primary_still_seeds_its_replacement() {
    let mut pool = ShellPool::new(PathBuf::from("/"));
    let (tx, rx) = records();
    pool.install_primary(Fake(1), rx);
    pool.lend_primary(&job("a"));
    pool.give_back(&job("a"), Some(&completed("/", "n1", true)));
    pool.lend_primary(&job("b"));
    assert_eq!(
        pool.give_back(&job("b"), Some(&ShellRelease::Ended)),
        Returned::PrimaryLost(Fake(1))
    );
    tx.send_replace(EnvRecord {
        nonce: "n1".to_owned(),
        env: Bytes::from_static(b"declare -x KEEP=\"yes\"\n"),
        ..EnvRecord::default()
    });
    drop(tx);
    pool.refresh_env().await;
    assert_eq!(
        pool.env().map(|b| b.as_ref()),
        Some(&b"declare -x KEEP=\"yes\"\n"[..])
    );
}

#[tokio::test]
async fn new_shells_are_seeded_from_the_last_completed_runs_record() {
    let mut pool = ShellPool::new(PathBuf::from("/"));
    let (tx, rx) = records();
    pool.install_primary(Fake(1), rx);
    pool.lend_primary(&job("a"));
    pool.give_back(&job("a"), Some(&completed("/", "n1", true)));
    let sender = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        tx.send_replace(EnvRecord {
            nonce: "n1".to_owned(),
            env: Bytes::from_static(b"declare -x A=\"1\"\n"),
            ..EnvRecord::default()
        });
        tx
    });
    pool.refresh_env().await;
    assert_eq!(
        pool.env().map(|b| b.as_ref()),
        Some(&b"declare -x A=\"1\"\n"[..])
    );
    drop(sender.await.unwrap());
}
