//! Guards for the tasks and timers an actor owns.

use std::time::Duration;
use std::time::Instant;

use ractor::ActorRef;
use ractor::MessagingErr;
use tokio::task::JoinHandle;

/// Aborts a task (a helper task, or a ractor `send_after`/`send_interval`
/// timer) when dropped, so it never outlives the state that holds it, even
/// when the actor is killed and its state dropped without `post_stop`.
#[derive(Debug)]
pub struct AbortOnDrop<T>(pub JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A ractor timer (`send_after`) sending `M`, aborted when dropped.
pub type Timer<M> = AbortOnDrop<Result<(), MessagingErr<M>>>;

/// How early a [`LazyTimer`]'s want may be served and still count as on
/// time (a timer fires a little late, never early; a want within this of
/// now is due rather than worth another timer).
pub const TIMER_SLACK: Duration = Duration::from_millis(2);

/// Whether a want at `at` is due now (within [`TIMER_SLACK`]).
pub fn is_due(at: Instant) -> bool {
    at <= instant_after(TIMER_SLACK)
}

/// One ractor timer an actor keeps across many wants: it is armed again only
/// when it would fire too late for a want. Most wants are withdrawn long
/// before they are due (a run's deadline, a standby's start), so they cost
/// no timer task spawned and another aborted: the timer that is armed fires
/// for nothing, or early, and its owner arms it for what is still wanted.
/// The owner keeps its wants; the timer only promises a message by then.
#[derive(Debug)]
pub struct LazyTimer<M> {
    /// When the armed timer fires, and the timer.
    armed: Option<(Instant, Timer<M>)>,
}

impl<M> Default for LazyTimer<M> {
    fn default() -> Self {
        Self { armed: None }
    }
}

impl<M: ractor::Message> LazyTimer<M> {
    /// Makes sure `actor` gets `message` by `at`: the timer is armed for
    /// `at` unless it is armed to fire no later.
    pub fn fire_by(&mut self, actor: &ActorRef<M>, at: Instant, message: fn() -> M) {
        if self.armed.as_ref().is_some_and(|(fires, _)| *fires <= at) {
            return;
        }
        let after = at.saturating_duration_since(Instant::now());
        self.armed = Some((at, AbortOnDrop(actor.send_after(after, message))));
    }

    /// Its message arrived: the timer is not armed any more.
    pub fn fired(&mut self) {
        self.armed = None;
    }
}

/// The instant `after` from now. A duration too long to add (a setting of
/// `u64::MAX` seconds means "as long as it takes") gives an instant about
/// 136 years away, which no timer reaches.
pub fn instant_after(after: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(after).unwrap_or_else(|| now + NEVER)
}

/// Further than any timer goes, and still an instant on every platform.
const NEVER: Duration = Duration::from_secs(1 << 32);

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use ractor::Actor;
    use ractor::ActorProcessingErr;
    use tokio::sync::mpsc;

    use super::*;

    /// Forwards each message it gets, with when it came.
    struct Echo;

    impl Actor for Echo {
        type Msg = u8;
        type State = mpsc::UnboundedSender<(u8, Instant)>;
        type Arguments = mpsc::UnboundedSender<(u8, Instant)>;

        async fn pre_start(
            &self,
            _: ActorRef<u8>,
            out: Self::Arguments,
        ) -> Result<Self::State, ActorProcessingErr> {
            Ok(out)
        }

        async fn handle(
            &self,
            _: ActorRef<u8>,
            message: u8,
            out: &mut Self::State,
        ) -> Result<(), ActorProcessingErr> {
            let _ = out.send((message, Instant::now()));
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_lazy_timer_is_armed_again_only_for_an_earlier_want() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (echo, _) = Actor::spawn(None, Echo, tx).await.unwrap();
        let mut timer = LazyTimer::default();
        let start = Instant::now();
        // A later want keeps the earlier timer (it fires with its message).
        timer.fire_by(&echo, start + Duration::from_millis(100), || 1);
        timer.fire_by(&echo, start + Duration::from_secs(60), || 2);
        // An earlier want replaces it.
        timer.fire_by(&echo, start + Duration::from_millis(30), || 3);
        let (message, at) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(message, 3);
        assert!(at >= start + Duration::from_millis(30));
        timer.fired();
        // The replaced timer was aborted: nothing else comes.
        let more = tokio::time::timeout(Duration::from_millis(300), rx.recv()).await;
        assert!(more.is_err(), "{more:?}");
        // Once fired, any want arms it again.
        timer.fire_by(&echo, Instant::now() + Duration::from_millis(10), || 4);
        let (message, _) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(message, 4);
        // Dropped, an armed timer sends nothing.
        timer.fire_by(&echo, Instant::now() + Duration::from_millis(10), || 5);
        drop(timer);
        let more = tokio::time::timeout(Duration::from_millis(200), rx.recv()).await;
        assert!(more.is_err(), "{more:?}");
        assert!(is_due(Instant::now() + Duration::from_millis(1)));
        assert!(!is_due(Instant::now() + Duration::from_millis(50)));
        echo.stop(None);
    }

    #[test]
    fn the_longest_duration_is_far_not_a_panic() {
        let far = instant_after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600));
        let soon = instant_after(Duration::from_secs(1));
        assert!(soon < Instant::now() + Duration::from_secs(2));
    }
}
