//! Handing a finished job's result out: to waits and to the completion
//! stream, each offer confirmed by its receiver (see [`crate::delivery`]).

use std::time::Duration;

use ractor::ActorRef;
use ractor::RpcReplyPort;
use shellvisor_protocol::Result;
use shellvisor_run::AbortOnDrop;

use crate::actor::JobState;
use crate::messages::JobMsg;
use crate::messages::JobNotice;
use crate::messages::Offer;

/// How long a receiver may take to confirm an offer before the result goes
/// back to the completion stream.
const OFFER_LEASE: Duration = Duration::from_secs(2);

impl JobState {
    /// A wait for the result: answered at once if the run has finished,
    /// otherwise when it does. The result counts as delivered once the
    /// waiter confirms it.
    pub(crate) fn wait(&mut self, myself: &ActorRef<JobMsg>, reply: RpcReplyPort<Result<Offer>>) {
        if self.answers.result.is_some() {
            self.answer_wait(myself, reply);
        } else {
            self.answers.waiters.push(reply);
        }
    }

    /// Sends the (finished) result to a waiter under a fresh token.
    pub(crate) fn answer_wait(
        &mut self,
        myself: &ActorRef<JobMsg>,
        reply: RpcReplyPort<Result<Offer>>,
    ) {
        let Some(result) = self.answers.result.clone() else {
            return;
        };
        let token = self.answers.delivery.offer_to_wait();
        if reply.send(Ok(Offer { result, token })).is_ok() {
            self.lease(myself, token);
        } else {
            self.offer_expired(token);
        }
    }

    /// The completion stream asks for the result: an offer if the run has
    /// finished and nobody has had it (nor has it on offer).
    pub(crate) fn claim(&mut self, myself: &ActorRef<JobMsg>, reply: RpcReplyPort<Option<Offer>>) {
        let offer = match &self.answers.result {
            Some(result) => self.answers.delivery.offer_to_stream().map(|token| Offer {
                result: result.clone(),
                token,
            }),
            None => None,
        };
        let token = offer.as_ref().map(|offer| offer.token);
        match (reply.send(offer), token) {
            (Ok(()), Some(token)) => self.lease(myself, token),
            (Err(_), Some(token)) => {
                self.withdraw(token);
            }
            (_, None) => {}
        }
    }

    /// The receiver of offer `token` has the result.
    pub(crate) fn confirm(&mut self, token: u64) {
        self.answers.leases.remove(&token);
        self.answers.delivery.confirm(token);
    }

    /// The stream offer `token` could not be handed on: it is undelivered
    /// again (the Session puts it back at the head of its queue).
    pub(crate) fn withdraw(&mut self, token: u64) {
        self.answers.leases.remove(&token);
        self.answers.delivery.withdraw(token);
    }

    /// Nobody confirmed offer `token` in time: if the result is still
    /// undelivered, the completion stream must have it.
    pub(crate) fn offer_expired(&mut self, token: u64) {
        self.answers.leases.remove(&token);
        let withdrawn = self.answers.delivery.withdraw(token);
        if withdrawn || !self.answers.delivery.is_delivered() {
            let _ = self.notify.send_message(JobNotice::Undelivered {
                job_id: self.job_id.clone(),
            });
        }
    }

    fn lease(&mut self, myself: &ActorRef<JobMsg>, token: u64) {
        self.answers.leases.insert(
            token,
            AbortOnDrop(myself.send_after(OFFER_LEASE, move || JobMsg::OfferExpired(token))),
        );
    }
}
