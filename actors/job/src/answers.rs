//! Handing a finished job's result out: to waits and to the completion
//! stream, each as an [`Offer`] that settles once (see [`crate::delivery`]).

use ractor::ActorRef;
use ractor::RpcReplyPort;
use shellvisor_protocol::Result;

use crate::actor::JobState;
use crate::messages::JobMsg;
use crate::messages::JobNotice;
use crate::offer::Offer;
use crate::offer::StreamOffer;

impl JobState {
    /// A wait for the result: answered at once if the run has finished,
    /// otherwise when it does. The result counts as delivered once the
    /// waiter takes the offer.
    pub(crate) fn wait(&mut self, myself: &ActorRef<JobMsg>, reply: RpcReplyPort<Result<Offer>>) {
        if self.answers.result.is_some() {
            self.answer_wait(myself, reply);
        } else {
            self.answers.waiters.push(reply);
        }
    }

    /// Sends the (finished) result to a waiter under a fresh token (an offer
    /// that cannot be sent is dropped, which gives it back).
    pub(crate) fn answer_wait(
        &mut self,
        myself: &ActorRef<JobMsg>,
        reply: RpcReplyPort<Result<Offer>>,
    ) {
        let Some(result) = self.answers.result.clone() else {
            return;
        };
        let token = self.answers.delivery.offer_to_wait();
        let _ = reply.send(Ok(Offer::new(result, token, myself.clone())));
    }

    /// The completion stream asks for the result: an offer if the run has
    /// finished, nobody took it and no offer of it is unsettled.
    pub(crate) fn claim(
        &mut self,
        myself: &ActorRef<JobMsg>,
        reply: RpcReplyPort<Option<StreamOffer>>,
    ) {
        let offer = match &self.answers.result {
            Some(result) => self
                .answers
                .delivery
                .offer_to_stream()
                .map(|(token, claim)| {
                    StreamOffer::new(Offer::new(result.clone(), token, myself.clone()), claim)
                }),
            None => None,
        };
        let _ = reply.send(offer);
    }

    /// The receiver of offer `token` took the result.
    pub(crate) fn confirm(&mut self, token: u64) {
        self.answers.delivery.confirm(token);
    }

    /// Offer `token` was dropped untaken: if nobody has the result and no
    /// other offer of it is open, the completion stream must have it.
    pub(crate) fn give_back(&mut self, token: u64) {
        if self.answers.delivery.give_back(token) {
            let _ = self.notify.send_message(JobNotice::Undelivered {
                job_id: self.job_id.clone(),
            });
        }
    }
}
