//! A finished job's result on its way to one receiver, settled exactly once.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;

use ractor::ActorRef;
use shellvisor_protocol::RunResult;

use crate::messages::JobMsg;

/// A finished job's result, offered to one receiver. It settles exactly
/// once: [`Offer::take`] confirms the delivery to the job; dropping the offer
/// untaken (its receiver left, it sat in a channel nobody read) gives the
/// result back, and a background result nobody took goes to the completion
/// stream.
#[derive(Debug)]
pub struct Offer {
    /// Shared with the job, which keeps it for later waits.
    result: Arc<RunResult>,
    receipt: Receipt,
}

impl Offer {
    /// An offer of a result that needs no delivery (its caller had it):
    /// taking or dropping it settles nothing.
    pub(crate) fn settled(result: Arc<RunResult>) -> Self {
        Offer {
            result,
            receipt: Receipt {
                token: 0,
                job: None,
            },
        }
    }

    pub(crate) fn new(result: Arc<RunResult>, token: u64, job: ActorRef<JobMsg>) -> Self {
        Offer {
            result,
            receipt: Receipt {
                token,
                job: Some(job),
            },
        }
    }

    /// The result, to look at before taking it.
    pub fn result(&self) -> &RunResult {
        &self.result
    }

    /// Takes the result: the job counts it as delivered.
    pub fn take(self) -> RunResult {
        let Offer {
            result,
            mut receipt,
        } = self;
        receipt.settle(JobMsg::Confirm);
        Arc::unwrap_or_clone(result)
    }
}

/// A finished job's result offered to the completion stream. Unlike a
/// wait's [`Offer`], the job may withdraw it: a wait that comes while it is
/// on its way takes the result instead, unless the stream's consumer took
/// it first (one atomic step, shared with the job, decides which).
#[derive(Debug)]
pub struct StreamOffer {
    offer: Offer,
    claim: Arc<StreamClaim>,
}

impl StreamOffer {
    pub(crate) fn new(offer: Offer, claim: Arc<StreamClaim>) -> Self {
        StreamOffer { offer, claim }
    }

    /// Takes the result, or `None` if a wait has taken it meanwhile (the
    /// job withdrew this offer; ask for the next completion).
    pub fn take(self) -> Option<RunResult> {
        let StreamOffer { mut offer, claim } = self;
        if claim.take() {
            Some(offer.take())
        } else {
            // Withdrawn: the job settled it already, nothing to tell it.
            offer.receipt.job = None;
            None
        }
    }
}

/// Who settled a stream offer first: its consumer taking it, or its job
/// withdrawing it for a wait. The one atomic step both try decides it, so a
/// result the stream returns was taken before any wait was answered with it
/// (the job answers a wait only after it tried to withdraw).
#[derive(Debug, Default)]
pub(crate) struct StreamClaim(AtomicBool);

impl StreamClaim {
    /// The consumer takes the result: whether it was first.
    pub(crate) fn take(&self) -> bool {
        self.settle_first()
    }

    /// The job withdraws the offer: whether it was first (if not, the
    /// consumer has the result and its confirmation is on its way).
    pub(crate) fn withdraw(&self) -> bool {
        self.settle_first()
    }

    /// Settles the claim: whether nobody had.
    fn settle_first(&self) -> bool {
        !self.0.swap(true, Ordering::AcqRel)
    }
}

/// Settles an [`Offer`] with its job: a confirmation when taken, a give-back
/// when dropped untaken.
#[derive(Debug)]
struct Receipt {
    token: u64,
    /// `None` once settled.
    job: Option<ActorRef<JobMsg>>,
}

impl Receipt {
    fn settle(&mut self, message: fn(u64) -> JobMsg) {
        if let Some(job) = self.job.take() {
            // A job that has stopped has nobody left to tell.
            let _ = job.cast(message(self.token));
        }
    }
}

impl Drop for Receipt {
    fn drop(&mut self) {
        self.settle(JobMsg::GiveBack);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::time::Duration;

    use ractor::Actor;
    use ractor::ActorProcessingErr;
    use shellvisor_protocol::JobId;
    use tokio::sync::mpsc;

    use super::*;

    /// Stands in for the job: forwards how each offer settled.
    struct Recorder;

    impl Actor for Recorder {
        type Msg = JobMsg;
        type State = mpsc::UnboundedSender<String>;
        type Arguments = mpsc::UnboundedSender<String>;

        async fn pre_start(
            &self,
            _: ActorRef<JobMsg>,
            out: Self::Arguments,
        ) -> Result<Self::State, ActorProcessingErr> {
            Ok(out)
        }

        async fn handle(
            &self,
            _: ActorRef<JobMsg>,
            message: JobMsg,
            out: &mut Self::State,
        ) -> Result<(), ActorProcessingErr> {
            let seen = match message {
                JobMsg::Confirm(token) => format!("confirm {token}"),
                JobMsg::GiveBack(token) => format!("give back {token}"),
                other => format!("{other:?}"),
            };
            let _ = out.send(seen);
            Ok(())
        }
    }

    fn result() -> Arc<RunResult> {
        Arc::new(RunResult {
            job_id: JobId::random().expect("an id"),
            exit_code: Some(0),
            timed_out: false,
            timeout_reason: None,
            killed: false,
            cwd: None,
            wall_time_ms: 0,
            output: String::new(),
            truncation: Default::default(),
            notices: Vec::new(),
            timeout: Default::default(),
            shell_restarted: false,
            is_error: false,
            text: String::new(),
            screen: None,
            limits: None,
        })
    }

    async fn next(rx: &mut mpsc::UnboundedReceiver<String>) -> String {
        tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .expect("settled in time")
            .expect("recorder alive")
    }

    #[tokio::test]
    async fn an_offer_settles_once_taken_dropped_or_lost_in_a_channel() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (job, handle) = Actor::spawn(None, Recorder, tx).await.unwrap();

        // Taken, however late: a confirmation, and nothing when it goes.
        let offer = Offer::new(result(), 1, job.clone());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(offer.result().exit_code, Some(0));
        let _taken = offer.take();
        assert_eq!(next(&mut rx).await, "confirm 1");

        // Dropped untaken: given back.
        drop(Offer::new(result(), 2, job.clone()));
        assert_eq!(next(&mut rx).await, "give back 2");

        // Sent into a reply channel whose receiver is gone, or left unread
        // in one that is then dropped: given back either way.
        let (sender, receiver) = tokio::sync::oneshot::channel::<Offer>();
        drop(receiver);
        drop(sender.send(Offer::new(result(), 3, job.clone())));
        assert_eq!(next(&mut rx).await, "give back 3");
        let (sender, receiver) = tokio::sync::oneshot::channel::<Offer>();
        sender.send(Offer::new(result(), 4, job.clone())).unwrap();
        drop(receiver);
        assert_eq!(next(&mut rx).await, "give back 4");

        job.stop(None);
        handle.await.unwrap();
        assert!(rx.try_recv().is_err(), "each offer settled once");
        // A job that stopped is simply not told.
        drop(Offer::new(result(), 5, job));
    }
}
