//! Who has had a finished job's result: offers and their receipts.
//!
//! A background job's result must reach the session's completion stream
//! exactly once, unless a wait took it first. Sending a result is not the
//! same as delivering it: the receiver may have left just as it was sent
//! (a wait whose timeout fired, a consumer that was dropped). So a result
//! is *offered* under a token inside an [`Offer`](crate::Offer), and the
//! offer settles exactly once: taking it confirms the delivery, dropping it
//! untaken (wherever that happens: in a mailbox, a reply channel nobody
//! reads, a consumer that vanished) gives it back. No timer decides; a slow
//! receiver is still a receiver.
//!
//! While any offer is unsettled the completion stream gets no new one, so a
//! wait that took the result is never followed by the stream delivering it
//! (waits themselves always get the result). A wait that comes while the
//! stream's offer is on its way withdraws that offer first, unless its
//! consumer took it already (one atomic step decides; see
//! [`StreamClaim`]): a consumer that stalls with the offer in hand cannot
//! take the result after the wait returned it.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::offer::StreamClaim;

/// The delivery state of one job's result.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    /// Offers sent and not settled yet.
    unsettled: BTreeSet<u64>,
    /// The stream's offer among them, which a wait may withdraw.
    stream: Option<(u64, Arc<StreamClaim>)>,
    /// A receiver took the result.
    delivered: bool,
    /// Tokens issued so far (the next one is `issued + 1`).
    issued: u64,
}

impl Delivery {
    /// A delivery whose tokens follow `issued` ones: a pooled actor's runs
    /// never share a token, so an offer of an earlier run settles nothing
    /// in a later one.
    pub(crate) fn after(issued: u64) -> Self {
        Self {
            issued,
            ..Self::default()
        }
    }

    /// How many tokens were issued (see [`Delivery::after`]).
    pub(crate) fn issued(&self) -> u64 {
        self.issued
    }

    /// An offer to the completion stream: a token and the claim its
    /// consumer settles, or `None` if the result was delivered already or
    /// an offer of it is unsettled.
    pub(crate) fn offer_to_stream(&mut self) -> Option<(u64, Arc<StreamClaim>)> {
        if self.delivered || !self.unsettled.is_empty() {
            return None;
        }
        let token = self.issue();
        let claim = Arc::new(StreamClaim::default());
        self.stream = Some((token, Arc::clone(&claim)));
        Some((token, claim))
    }

    /// An offer to a wait: waits always get the result. A stream offer on
    /// its way is withdrawn first; one its consumer took already counts as
    /// delivered now (its confirmation is still on its way).
    pub(crate) fn offer_to_wait(&mut self) -> u64 {
        if let Some((token, claim)) = self.stream.take() {
            self.unsettled.remove(&token);
            if !claim.withdraw() {
                self.delivered = true;
            }
        }
        self.issue()
    }

    /// The receiver of offer `token` took the result.
    pub(crate) fn confirm(&mut self, token: u64) {
        self.settle_stream(token);
        if self.unsettled.remove(&token) {
            self.delivered = true;
        }
    }

    /// Offer `token` was dropped untaken: returns whether the result now
    /// belongs on the completion stream (nobody took it and no other offer
    /// of it is unsettled). A token settled already changes nothing.
    pub(crate) fn give_back(&mut self, token: u64) -> bool {
        self.settle_stream(token);
        self.unsettled.remove(&token) && !self.delivered && self.unsettled.is_empty()
    }

    /// Whether a receiver took the result.
    pub(crate) fn is_delivered(&self) -> bool {
        self.delivered
    }

    fn settle_stream(&mut self, token: u64) {
        if self.stream.as_ref().is_some_and(|(t, _)| *t == token) {
            self.stream = None;
        }
    }

    fn issue(&mut self) -> u64 {
        self.issued += 1;
        self.unsettled.insert(self.issued);
        self.issued
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// The stream's token, dropping the claim.
    fn stream(delivery: &mut Delivery) -> Option<u64> {
        delivery.offer_to_stream().map(|(token, _)| token)
    }

    /// A wait took the result but its confirmation is still on its way (a
    /// loaded machine, seconds late): the stream gets no offer meanwhile,
    /// nor after.
    #[test]
    fn a_wait_in_flight_keeps_the_stream_away_however_slow_it_is() {
        let mut delivery = Delivery::default();
        let wait = delivery.offer_to_wait();
        assert_eq!(stream(&mut delivery), None);
        delivery.confirm(wait);
        assert_eq!(stream(&mut delivery), None);
        assert!(delivery.is_delivered());
    }

    /// A wait arrives while a stream offer is in flight; the stream's
    /// consumer is gone and gives it back. The wait's confirmation must
    /// win: the stream may not deliver the result again.
    #[test]
    fn a_wait_during_a_returned_stream_offer_keeps_the_result_delivered() {
        let mut delivery = Delivery::default();
        let streamed = stream(&mut delivery).unwrap();
        let wait = delivery.offer_to_wait();
        assert!(!delivery.give_back(streamed), "the wait's offer is open");
        delivery.confirm(wait);
        assert!(delivery.is_delivered());
        assert_eq!(stream(&mut delivery), None);
    }

    /// A wait whose timeout fired as the result was sent gives it back: the
    /// result is not lost, it belongs on the stream, once.
    #[test]
    fn a_wait_that_timed_out_as_the_result_was_sent_loses_nothing() {
        let mut delivery = Delivery::default();
        let wait = delivery.offer_to_wait();
        assert!(delivery.give_back(wait));
        assert!(!delivery.give_back(wait), "settled once");
        let streamed = stream(&mut delivery).expect("still undelivered");
        delivery.confirm(streamed);
        assert!(delivery.is_delivered());
    }

    /// Two waits, one gives back and one takes: delivered, and nothing goes
    /// to the stream whichever settles first.
    #[test]
    fn one_of_two_waits_taking_it_is_enough() {
        for take_first in [true, false] {
            let mut delivery = Delivery::default();
            let kept = delivery.offer_to_wait();
            let dropped = delivery.offer_to_wait();
            if take_first {
                delivery.confirm(kept);
                assert!(!delivery.give_back(dropped));
            } else {
                assert!(!delivery.give_back(dropped));
                delivery.confirm(kept);
            }
            assert_eq!(stream(&mut delivery), None);
        }
    }

    /// One stream offer at a time; a given-back one is offered again, once.
    #[test]
    fn a_returned_stream_offer_goes_back_to_the_stream_once() {
        let mut delivery = Delivery::default();
        let first = stream(&mut delivery).unwrap();
        assert_eq!(stream(&mut delivery), None, "one offer at a time");
        assert!(delivery.give_back(first));
        let second = stream(&mut delivery).unwrap();
        delivery.confirm(first);
        assert!(!delivery.is_delivered(), "a settled token confirms nothing");
        delivery.confirm(second);
        assert!(delivery.is_delivered());
        assert_eq!(stream(&mut delivery), None);
    }

    /// A stream offer sits untaken with a stalled consumer when a wait
    /// comes: the wait withdraws it, so the consumer cannot take the result
    /// after the wait returned it, and its late give-back changes nothing.
    #[test]
    fn a_wait_withdraws_a_stream_offer_nobody_took_yet() {
        let mut delivery = Delivery::default();
        let (streamed, claim) = delivery.offer_to_stream().unwrap();
        let wait = delivery.offer_to_wait();
        assert!(!claim.take(), "withdrawn for the wait");
        assert!(!delivery.give_back(streamed), "settled by the withdrawal");
        assert!(!delivery.is_delivered(), "the wait has not taken it yet");
        // The wait's caller left: the result goes back to the stream, once.
        assert!(delivery.give_back(wait));
        let (again, claim) = delivery.offer_to_stream().expect("offered again");
        assert!(claim.take());
        delivery.confirm(again);
        assert!(delivery.is_delivered());
    }

    /// The consumer took the stream offer just before the wait came: the
    /// wait still gets the result, the result counts as delivered at once
    /// (the confirmation is still on its way), and nothing goes back to the
    /// stream whatever the wait does.
    #[test]
    fn a_stream_offer_taken_before_the_wait_stays_the_delivery() {
        let mut delivery = Delivery::default();
        let (streamed, claim) = delivery.offer_to_stream().unwrap();
        assert!(claim.take());
        let wait = delivery.offer_to_wait();
        assert!(delivery.is_delivered());
        assert!(!delivery.give_back(wait), "delivered by the stream");
        delivery.confirm(streamed);
        assert_eq!(stream(&mut delivery), None);
    }

    #[test]
    fn tokens_never_issued_settle_nothing() {
        let mut delivery = Delivery::default();
        delivery.confirm(0);
        delivery.confirm(7);
        assert!(!delivery.give_back(3));
        assert!(!delivery.is_delivered());
    }
}
