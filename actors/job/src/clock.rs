//! The Job's clock: its run's deadline, its move to the background, and the
//! end of its retention, served by one timer that the actor keeps from run
//! to run.
//!
//! Most runs end long before their deadline and their auto-background time,
//! so a timer per want would be spawned and aborted for nothing on every
//! run. The clock keeps the wants; its one timer is armed again only when it
//! would fire too late for one. A want withdrawn (the run ended) leaves the
//! timer armed: it fires for nothing, or for a later want of the next run,
//! which it then arms the timer for.

use std::time::Instant;

use ractor::ActorRef;
use shellvisor_run::LazyTimer;
use shellvisor_run::is_due;

use crate::messages::JobMsg;

/// What the Job wants to happen, and when.
#[derive(Debug, Default)]
pub(crate) struct JobClock {
    timer: LazyTimer<JobMsg>,
    /// The run is killed (as timed out) at this instant.
    deadline: Option<Instant>,
    /// The run's caller is answered with a background job at this instant.
    auto_background: Option<Instant>,
    /// The finished job is let go at this instant (its retention ends).
    evict: Option<Instant>,
}

/// The wants that are due when the timer fires (each is withdrawn).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) deadline: bool,
    pub(crate) auto_background: bool,
    pub(crate) evict: bool,
}

impl JobClock {
    /// A new run starts with these wants (none of the last run's is left).
    pub(crate) fn start_run(
        &mut self,
        myself: &ActorRef<JobMsg>,
        deadline: Option<Instant>,
        auto_background: Option<Instant>,
    ) {
        self.deadline = deadline;
        self.auto_background = auto_background;
        self.evict = None;
        self.arm(myself);
    }

    /// The run is over: neither its deadline nor its move to the
    /// background can come any more.
    pub(crate) fn run_over(&mut self) {
        self.deadline = None;
        self.auto_background = None;
    }

    /// Nothing is wanted (the run is a record; the actor waits for the next).
    pub(crate) fn clear(&mut self) {
        *self = Self {
            timer: std::mem::take(&mut self.timer),
            ..Self::default()
        };
    }

    /// The finished job is let go at `at`.
    pub(crate) fn evict_at(&mut self, myself: &ActorRef<JobMsg>, at: Instant) {
        self.evict = Some(at);
        self.arm(myself);
    }

    /// The timer fired: the wants that are due (withdrawn), and the timer
    /// armed again for the soonest of the others.
    pub(crate) fn fired(&mut self, myself: &ActorRef<JobMsg>) -> Due {
        self.timer.fired();
        let take = |want: &mut Option<Instant>| want.take_if(|at| is_due(*at)).is_some();
        let due = Due {
            deadline: take(&mut self.deadline),
            auto_background: take(&mut self.auto_background),
            evict: take(&mut self.evict),
        };
        self.arm(myself);
        due
    }

    /// Makes sure the timer fires by the soonest want.
    fn arm(&mut self, myself: &ActorRef<JobMsg>) {
        let soonest = [self.deadline, self.auto_background, self.evict]
            .into_iter()
            .flatten()
            .min();
        if let Some(at) = soonest {
            self.timer.fire_by(myself, at, || JobMsg::ClockFired);
        }
    }
}
