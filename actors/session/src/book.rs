//! The session's jobs: which exist, in what order they started and
//! finished, and whose results still wait for the completion stream.
//!
//! The book is the one owner of these facts; the Session asks it what to
//! do (which jobs to evict, which result to hand to which waiter) and
//! carries it out, so the book is tested without actors.

use std::collections::HashMap;
use std::collections::VecDeque;

use ractor::ActorId;
use ractor::RpcReplyPort;
use shellvisor_actor_job::JobRef;
use shellvisor_actor_job::StreamOffer;
use shellvisor_protocol::JobId;

/// What the book needs of a job handle: its actor's id, while it has one.
pub(crate) trait BookJob: Clone {
    /// The job actor's id (`None` for a finished run's record).
    fn key(&self) -> Option<ActorId>;
}

impl BookJob for JobRef {
    fn key(&self) -> Option<ActorId> {
        self.actor().map(|actor| actor.get_id())
    }
}

/// A page of the book's jobs (see [`JobBook::page`]).
#[derive(Debug, PartialEq)]
pub(crate) struct BookPage<J> {
    pub(crate) jobs: Vec<J>,
    pub(crate) retained: usize,
    pub(crate) next_cursor: Option<u64>,
}

/// A consumer of the completion stream, waiting for the next result.
pub(crate) type CompletionWaiter = RpcReplyPort<StreamOffer>;

/// A session's retained jobs.
#[derive(Debug)]
pub(crate) struct JobBook<J> {
    jobs: HashMap<JobId, Booked<J>>,
    /// Job ids by actor id (supervision events name actors); a record has
    /// none.
    by_actor: HashMap<ActorId, JobId>,
    /// Every retained job with its start number, oldest start first (for
    /// listing; the numbers are the cursors of pages).
    started: VecDeque<(u64, JobId)>,
    /// The start number of the next job.
    next_start: u64,
    /// Finished jobs, oldest finish first (for eviction).
    finished: VecDeque<JobId>,
    /// Finished background jobs whose result nobody has taken yet.
    undelivered: VecDeque<JobId>,
    /// Consumers waiting for the next completion.
    waiters: VecDeque<CompletionWaiter>,
}

#[derive(Debug)]
struct Booked<J> {
    job: J,
    /// Its start number (its place in `started`).
    start: u64,
    /// A terminal run that has not finished (counts against the PTY cap).
    terminal_running: bool,
    finished: bool,
    /// Finished and not yet chosen for eviction: its id is in `finished`.
    awaiting_eviction: bool,
    /// Its id was queued on the completion stream.
    queued: bool,
}

impl<J: BookJob> Default for JobBook<J> {
    fn default() -> Self {
        Self {
            jobs: HashMap::new(),
            by_actor: HashMap::new(),
            started: VecDeque::new(),
            next_start: 1,
            finished: VecDeque::new(),
            undelivered: VecDeque::new(),
            waiters: VecDeque::new(),
        }
    }
}

impl<J: BookJob> JobBook<J> {
    /// Records a started job.
    pub(crate) fn add(&mut self, id: JobId, job: J, on_terminal: bool) {
        if let Some(key) = job.key() {
            self.by_actor.insert(key, id.clone());
        }
        self.started.push_back((self.next_start, id.clone()));
        self.next_start += 1;
        self.jobs.insert(
            id,
            Booked {
                job,
                start: self.next_start - 1,
                terminal_running: on_terminal,
                finished: false,
                awaiting_eviction: false,
                queued: false,
            },
        );
    }

    /// The job `id`, if this session retains it.
    pub(crate) fn get(&self, id: &JobId) -> Option<&J> {
        self.jobs.get(id).map(|booked| &booked.job)
    }

    /// Whether any job has not finished.
    pub(crate) fn any_running(&self) -> bool {
        self.jobs.values().any(|booked| !booked.finished)
    }

    /// Terminal runs that have not finished.
    pub(crate) fn running_terminals(&self) -> usize {
        self.jobs.values().filter(|b| b.terminal_running).count()
    }

    /// At most `limit` retained jobs that started after the one numbered
    /// `cursor` (from the oldest without one), oldest first, with how many
    /// are retained and the cursor of the next page if any follow.
    pub(crate) fn page(&self, cursor: Option<u64>, limit: usize) -> BookPage<J> {
        let from = cursor.map_or(0, |cursor| {
            self.started
                .partition_point(|(number, _)| *number <= cursor)
        });
        let mut jobs = Vec::with_capacity(limit.min(self.started.len() - from));
        let mut last = None;
        for (number, id) in self.started.iter().skip(from).take(limit) {
            if let Some(job) = self.get(id) {
                jobs.push(job.clone());
            }
            last = Some(*number);
        }
        let more = from + limit < self.started.len();
        BookPage {
            jobs,
            retained: self.started.len(),
            next_cursor: last.filter(|_| more),
        }
    }

    /// `id` finished. Returns the jobs to evict now that one more finished
    /// job is retained (beyond `max_retained`, oldest first), or `None` when
    /// `id` is unknown or already finished (a repeated notice).
    pub(crate) fn finish(&mut self, id: &JobId, max_retained: usize) -> Option<Vec<J>> {
        let booked = self.jobs.get_mut(id).filter(|b| !b.finished)?;
        booked.finished = true;
        booked.terminal_running = false;
        booked.awaiting_eviction = true;
        self.finished.push_back(id.clone());
        let mut evicted = Vec::new();
        while self.finished.len() > max_retained {
            if let Some(old) = self.finished.pop_front()
                && let Some(booked) = self.jobs.get_mut(&old)
            {
                booked.awaiting_eviction = false;
                evicted.push(booked.job.clone());
            }
        }
        Some(evicted)
    }

    /// The finished job `id` is now `record`: its actor no longer answers
    /// for it (it may serve another job).
    pub(crate) fn record(&mut self, id: &JobId, record: J) {
        let Some(booked) = self.jobs.get_mut(id) else {
            return;
        };
        if let Some(key) = booked.job.key()
            && self.by_actor.get(&key) == Some(id)
        {
            self.by_actor.remove(&key);
        }
        if let Some(key) = record.key() {
            self.by_actor.insert(key, id.clone());
        }
        booked.job = record;
    }

    /// A job's actor stopped: the job is forgotten. Returns its id.
    pub(crate) fn forget(&mut self, actor: &ActorId) -> Option<JobId> {
        let id = self.by_actor.remove(actor)?;
        self.remove(&id).map(|_| id)
    }

    /// Forgets the job `id` (a record let go), returning its handle.
    pub(crate) fn forget_job(&mut self, id: &JobId) -> Option<J> {
        if let Some(key) = self.jobs.get(id).and_then(|booked| booked.job.key())
            && self.by_actor.get(&key) == Some(id)
        {
            self.by_actor.remove(&key);
        }
        self.remove(id)
    }

    /// Cheap for the usual case, an evicted job (the oldest): its place in
    /// `started` is found by its start number, and it is in neither of the
    /// other queues; they are searched only when they can hold it.
    fn remove(&mut self, id: &JobId) -> Option<J> {
        let booked = self.jobs.remove(id)?;
        let at = self
            .started
            .partition_point(|(number, _)| *number < booked.start);
        if self
            .started
            .get(at)
            .is_some_and(|(number, _)| *number == booked.start)
        {
            self.started.remove(at);
        }
        if booked.awaiting_eviction {
            self.finished.retain(|j| j != id);
        }
        if booked.queued {
            self.undelivered.retain(|j| j != id);
        }
        Some(booked.job)
    }

    /// `id`'s result belongs on the completion stream.
    pub(crate) fn queue_completion(&mut self, id: JobId) {
        if let Some(booked) = self.jobs.get_mut(&id) {
            booked.queued = true;
        }
        self.undelivered.push_back(id);
    }

    /// A consumer waits for the next completion.
    pub(crate) fn add_waiter(&mut self, waiter: CompletionWaiter) {
        self.waiters.push_back(waiter);
    }

    /// The next undelivered job to claim a result from, when someone waits
    /// for one (consumers that left are dropped first).
    pub(crate) fn next_to_deliver(&mut self) -> Option<(JobId, J)> {
        self.waiters.retain(|waiter| !waiter.is_closed());
        if self.waiters.is_empty() {
            return None;
        }
        while let Some(id) = self.undelivered.pop_front() {
            if let Some(job) = self.get(&id).cloned() {
                return Some((id, job));
            }
        }
        None
    }

    /// The oldest waiting consumer.
    pub(crate) fn next_waiter(&mut self) -> Option<CompletionWaiter> {
        self.waiters.pop_front()
    }

    /// A result was given back undelivered: it is next in line again.
    pub(crate) fn requeue_first(&mut self, id: JobId) {
        self.undelivered.push_front(id);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[derive(Clone, Debug, PartialEq, Eq)]
    struct Fake(u64);

    impl BookJob for Fake {
        fn key(&self) -> Option<ActorId> {
            (self.0 < 100).then_some(ActorId::Local(self.0))
        }
    }

    fn id(n: u64) -> JobId {
        JobId::new(format!("job-{n}"))
    }

    fn key(fake: Fake) -> ActorId {
        fake.key().expect("a live job")
    }

    fn book(n: u64) -> JobBook<Fake> {
        let mut book = JobBook::default();
        for i in 1..=n {
            book.add(id(i), Fake(i), false);
        }
        book
    }

    fn waiter() -> (
        CompletionWaiter,
        tokio::sync::oneshot::Receiver<StreamOffer>,
    ) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (RpcReplyPort::from(tx), rx)
    }

    fn all(book: &JobBook<Fake>) -> Vec<Fake> {
        book.page(None, usize::MAX).jobs
    }

    #[test]
    fn jobs_list_in_start_order_and_are_forgotten_when_their_actor_stops() {
        let mut book = book(3);
        assert_eq!(all(&book), vec![Fake(1), Fake(2), Fake(3)]);
        assert_eq!(book.forget(&key(Fake(2))), Some(id(2)));
        assert_eq!(book.get(&id(2)), None);
        assert_eq!(all(&book), vec![Fake(1), Fake(3)]);
        assert_eq!(book.forget(&key(Fake(2))), None);
    }

    #[test]
    fn pages_follow_their_cursor_even_when_jobs_before_it_are_gone() {
        let mut book = book(5);
        let first = book.page(None, 2);
        assert_eq!(first.jobs, vec![Fake(1), Fake(2)]);
        assert_eq!((first.retained, first.next_cursor), (5, Some(2)));
        // The page's last job and one before it are evicted meanwhile.
        book.forget(&key(Fake(1)));
        book.forget(&key(Fake(2)));
        let second = book.page(first.next_cursor, 2);
        assert_eq!(second.jobs, vec![Fake(3), Fake(4)]);
        assert_eq!((second.retained, second.next_cursor), (3, Some(4)));
        let last = book.page(second.next_cursor, 2);
        assert_eq!(last.jobs, vec![Fake(5)]);
        assert_eq!(last.next_cursor, None);
        // Exactly full: no further page is announced.
        assert_eq!(book.page(Some(3), 2).next_cursor, None);
        assert_eq!(book.page(Some(99), 2).jobs, vec![]);
        assert_eq!(
            book.page(None, 0).next_cursor,
            None,
            "an empty page has no cursor"
        );
    }

    #[test]
    fn finishing_evicts_the_oldest_finished_beyond_the_limit_once() {
        let mut book = book(4);
        assert_eq!(book.finish(&id(3), 2), Some(vec![]));
        assert_eq!(book.finish(&id(1), 2), Some(vec![]));
        assert_eq!(book.finish(&id(1), 2), None, "a repeated notice");
        assert_eq!(book.finish(&id(9), 2), None, "unknown");
        assert_eq!(book.finish(&id(4), 2), Some(vec![Fake(3)]));
        // Still retained until its actor stops.
        assert_eq!(book.get(&id(3)), Some(&Fake(3)));
        assert_eq!(book.forget(&key(Fake(3))), Some(id(3)));
        assert_eq!(book.finish(&id(2), 2), Some(vec![Fake(1)]));
    }

    #[test]
    fn a_finished_job_whose_actor_stopped_early_leaves_the_eviction_count() {
        // Job 1 finished, then its actor died (not evicted): it must not
        // count towards the limit, or a live job would go early.
        let mut book = book(3);
        assert_eq!(book.finish(&id(1), 2), Some(vec![]));
        assert_eq!(book.forget(&key(Fake(1))), Some(id(1)));
        assert_eq!(book.finish(&id(2), 2), Some(vec![]));
        assert_eq!(
            book.finish(&id(3), 2),
            Some(vec![]),
            "two finished, limit two"
        );
        assert_eq!(all(&book), vec![Fake(2), Fake(3)]);
        // The evicted oldest goes from the listing when its actor stops.
        book.add(id(4), Fake(4), false);
        assert_eq!(book.finish(&id(4), 2), Some(vec![Fake(2)]));
        assert_eq!(book.forget(&key(Fake(2))), Some(id(2)));
        assert_eq!(all(&book), vec![Fake(3), Fake(4)]);
        assert_eq!(book.page(None, 10).retained, 2);
    }

    #[test]
    fn terminal_runs_count_until_they_finish() {
        let mut book = book(1);
        book.add(id(2), Fake(2), true);
        book.add(id(3), Fake(3), true);
        assert_eq!(book.running_terminals(), 2);
        book.finish(&id(2), 10);
        assert_eq!(book.running_terminals(), 1);
        book.forget(&key(Fake(3)));
        assert_eq!(book.running_terminals(), 0);
    }

    #[test]
    fn completions_wait_for_a_live_consumer_and_keep_their_order() {
        let mut book = book(3);
        book.queue_completion(id(1));
        book.queue_completion(id(2));
        assert_eq!(book.next_to_deliver(), None, "nobody waits");
        let (gone, rx) = waiter();
        drop(rx);
        book.add_waiter(gone);
        assert_eq!(book.next_to_deliver(), None, "a consumer that left");
        let (live, _rx) = waiter();
        book.add_waiter(live);
        assert_eq!(book.next_to_deliver(), Some((id(1), Fake(1))));
        book.requeue_first(id(1));
        assert_eq!(book.next_to_deliver(), Some((id(1), Fake(1))));
        assert!(book.next_waiter().is_some());
        assert_eq!(book.next_to_deliver(), None);
        // A forgotten job's completion is skipped.
        let (live, _rx2) = waiter();
        book.add_waiter(live);
        book.forget(&key(Fake(2)));
        book.queue_completion(id(3));
        assert_eq!(book.next_to_deliver(), Some((id(3), Fake(3))));
    }

    #[test]
    fn a_recorded_job_stays_listed_while_its_actor_serves_the_next() {
        // Job 1 ran on actor 1, which went on to serve job 2: job 1 is the
        // record Fake(101) (no actor) and actor 1 now answers for job 2.
        let mut book = book(1);
        assert_eq!(book.finish(&id(1), 10), Some(vec![]));
        book.record(&id(1), Fake(101));
        book.add(id(2), Fake(1), false);
        assert_eq!(all(&book), vec![Fake(101), Fake(1)]);
        assert_eq!(
            book.forget(&key(Fake(1))),
            Some(id(2)),
            "the actor's end is job 2's"
        );
        assert_eq!(book.get(&id(1)), Some(&Fake(101)));
        // A record beyond the limit is evicted like any job, then let go.
        book.add(id(3), Fake(3), false);
        assert_eq!(book.finish(&id(3), 1), Some(vec![Fake(101)]));
        assert_eq!(book.forget_job(&id(1)), Some(Fake(101)));
        assert_eq!(book.forget_job(&id(1)), None);
        assert_eq!(all(&book), vec![Fake(3)]);
        assert_eq!(book.page(None, 10).retained, 1);
    }
}
