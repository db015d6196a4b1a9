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
//! (waits themselves always get the result).

use std::collections::BTreeSet;

/// The delivery state of one job's result.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    /// Offers sent and not settled yet.
    unsettled: BTreeSet<u64>,
    /// A receiver took the result.
    delivered: bool,
    /// Tokens issued so far (the next one is `issued + 1`).
    issued: u64,
}

impl Delivery {
    /// An offer to the completion stream: a token, or `None` if the result
    /// was delivered already or an offer of it is unsettled.
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

    pub(crate) fn offer_to_stream(&mut self) -> Option<u64> {
        if self.delivered || !self.unsettled.is_empty() {
            return None;
        }
        Some(self.issue())
    }

    /// An offer to a wait: waits always get the result.
    pub(crate) fn offer_to_wait(&mut self) -> u64 {
        self.issue()
    }

    /// The receiver of offer `token` took the result.
    pub(crate) fn confirm(&mut self, token: u64) {
        if self.unsettled.remove(&token) {
            self.delivered = true;
        }
    }

    /// Offer `token` was dropped untaken: returns whether the result now
    /// belongs on the completion stream (nobody took it and no other offer
    /// of it is unsettled). A token settled already changes nothing.
    pub(crate) fn give_back(&mut self, token: u64) -> bool {
        self.unsettled.remove(&token) && !self.delivered && self.unsettled.is_empty()
    }

    /// Whether a receiver took the result.
    pub(crate) fn is_delivered(&self) -> bool {
        self.delivered
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

    /// A wait took the result but its confirmation is still on its way (a
    /// loaded machine, seconds late): the stream gets no offer meanwhile,
    /// nor after.
    #[test]
    fn a_wait_in_flight_keeps_the_stream_away_however_slow_it_is() {
        let mut delivery = Delivery::default();
        let wait = delivery.offer_to_wait();
        assert_eq!(delivery.offer_to_stream(), None);
        delivery.confirm(wait);
        assert_eq!(delivery.offer_to_stream(), None);
        assert!(delivery.is_delivered());
    }

    /// A wait arrives while a stream offer is in flight; the stream's
    /// consumer is gone and gives it back. The wait's confirmation must
    /// win: the stream may not deliver the result again.
    #[test]
    fn a_wait_during_a_returned_stream_offer_keeps_the_result_delivered() {
        let mut delivery = Delivery::default();
        let stream = delivery.offer_to_stream().unwrap();
        let wait = delivery.offer_to_wait();
        assert!(!delivery.give_back(stream), "the wait's offer is open");
        delivery.confirm(wait);
        assert!(delivery.is_delivered());
        assert_eq!(delivery.offer_to_stream(), None);
    }

    /// A wait whose timeout fired as the result was sent gives it back: the
    /// result is not lost, it belongs on the stream, once.
    #[test]
    fn a_wait_that_timed_out_as_the_result_was_sent_loses_nothing() {
        let mut delivery = Delivery::default();
        let wait = delivery.offer_to_wait();
        assert!(delivery.give_back(wait));
        assert!(!delivery.give_back(wait), "settled once");
        let stream = delivery.offer_to_stream().expect("still undelivered");
        delivery.confirm(stream);
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
            assert_eq!(delivery.offer_to_stream(), None);
        }
    }

    /// One stream offer at a time; a given-back one is offered again, once.
    #[test]
    fn a_returned_stream_offer_goes_back_to_the_stream_once() {
        let mut delivery = Delivery::default();
        let first = delivery.offer_to_stream().unwrap();
        assert_eq!(delivery.offer_to_stream(), None, "one offer at a time");
        assert!(delivery.give_back(first));
        let second = delivery.offer_to_stream().unwrap();
        delivery.confirm(first);
        assert!(!delivery.is_delivered(), "a settled token confirms nothing");
        delivery.confirm(second);
        assert!(delivery.is_delivered());
        assert_eq!(delivery.offer_to_stream(), None);
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
