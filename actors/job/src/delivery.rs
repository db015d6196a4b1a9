//! Who has had a finished job's result: offers, confirmations, leases.
//!
//! A background job's result must reach the session's completion stream
//! exactly once, unless a wait took it first. Sending a result is not the
//! same as delivering it: the receiver may have left just as it was sent
//! (a wait whose timeout fired, a consumer that was dropped). So a result
//! is *offered* under a token, and counts as delivered only when the
//! receiver *confirms* that token. An offer that is withdrawn (the Session
//! could not hand it on) or not confirmed within its lease makes the result
//! undelivered again, and it goes back to the stream.

/// The delivery state of one job's result.
#[derive(Debug, Default)]
pub(crate) struct Delivery {
    state: State,
    /// Tokens issued so far (the next one is `issued + 1`).
    issued: u64,
}

#[derive(Debug, Default, PartialEq, Eq)]
enum State {
    /// Nobody has had it (or the job has not finished).
    #[default]
    Undelivered,
    /// Offered to the completion stream under this token, not confirmed yet.
    Offered(u64),
    /// A receiver confirmed it.
    Delivered,
}

impl Delivery {
    /// An offer to the completion stream: a token, or `None` if the result
    /// was delivered already or is on offer to the stream.
    pub(crate) fn offer_to_stream(&mut self) -> Option<u64> {
        if self.state != State::Undelivered {
            return None;
        }
        let token = self.issue();
        self.state = State::Offered(token);
        Some(token)
    }

    /// An offer to a wait: waits always get the result (a token to confirm
    /// with); a stream offer in flight stays in flight.
    pub(crate) fn offer_to_wait(&mut self) -> u64 {
        self.issue()
    }

    /// A receiver has the result.
    pub(crate) fn confirm(&mut self, token: u64) {
        if token >= 1 && token <= self.issued {
            self.state = State::Delivered;
        }
    }

    /// The offer `token` could not be handed on, or its lease ran out:
    /// returns whether the result is undelivered again (it belongs on the
    /// completion stream). Only the offer in flight can be withdrawn.
    pub(crate) fn withdraw(&mut self, token: u64) -> bool {
        if self.state == State::Offered(token) {
            self.state = State::Undelivered;
            true
        } else {
            false
        }
    }

    /// Whether a receiver confirmed the result.
    pub(crate) fn is_delivered(&self) -> bool {
        self.state == State::Delivered
    }

    fn issue(&mut self) -> u64 {
        self.issued += 1;
        self.issued
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// A wait arrives while a stream offer is in flight; the Session then
    /// finds its consumer gone and withdraws. The wait's confirmation must
    /// win: the stream may not deliver the result again.
    #[test]
    fn a_wait_during_a_withdrawn_stream_offer_keeps_the_result_delivered() {
        let mut delivery = Delivery::default();
        let stream = delivery.offer_to_stream().unwrap();
        let wait = delivery.offer_to_wait();
        delivery.confirm(wait);
        assert!(!delivery.withdraw(stream), "nothing to put back");
        assert!(delivery.is_delivered());
        assert_eq!(delivery.offer_to_stream(), None);
    }

    /// The same with the withdrawal first: the stream gets it back, and the
    /// wait's later confirmation makes it delivered.
    #[test]
    fn a_withdrawal_before_the_waits_confirmation_is_overridden_by_it() {
        let mut delivery = Delivery::default();
        let stream = delivery.offer_to_stream().unwrap();
        let wait = delivery.offer_to_wait();
        assert!(delivery.withdraw(stream));
        delivery.confirm(wait);
        assert_eq!(delivery.offer_to_stream(), None);
    }

    /// A wait whose timeout fires as the result is sent never confirms: the
    /// result is not lost, it goes to the stream when the lease runs out.
    #[test]
    fn a_wait_that_timed_out_as_the_result_was_sent_loses_nothing() {
        let mut delivery = Delivery::default();
        let _unconfirmed = delivery.offer_to_wait();
        assert!(!delivery.is_delivered());
        let stream = delivery.offer_to_stream().expect("still undelivered");
        delivery.confirm(stream);
        assert!(delivery.is_delivered());
    }

    /// A stream consumer dropped after the result was sent never confirms:
    /// the lease puts it back, and the next consumer gets it once.
    #[test]
    fn an_unconfirmed_stream_offer_expires_back_to_the_stream_once() {
        let mut delivery = Delivery::default();
        let first = delivery.offer_to_stream().unwrap();
        assert_eq!(delivery.offer_to_stream(), None, "one offer at a time");
        assert!(delivery.withdraw(first), "the lease ran out");
        assert!(!delivery.withdraw(first), "a second expiry is stale");
        let second = delivery.offer_to_stream().unwrap();
        delivery.confirm(second);
        delivery.confirm(first);
        assert!(delivery.is_delivered());
        assert_eq!(delivery.offer_to_stream(), None);
    }

    #[test]
    fn tokens_never_issued_confirm_nothing() {
        let mut delivery = Delivery::default();
        delivery.confirm(0);
        delivery.confirm(7);
        assert!(!delivery.is_delivered());
    }
}
