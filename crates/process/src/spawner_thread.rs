//! A dedicated thread that forks every child process of a runtime.

use std::io;
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio::sync::oneshot;

type Task = Box<dyn FnOnce() + Send>;

/// Runs spawn closures on one long-lived thread.
///
/// Linux delivers `PR_SET_PDEATHSIG` when the *thread* that forked a child
/// exits, not the process. Forking from tokio worker or blocking-pool threads
/// (which are retired when idle) would kill shells at random; forking from this
/// thread ties every child's death signal to the runtime: when the spawner
/// shuts down (the runtime is dropped), every direct child gets SIGKILL.
#[derive(Debug)]
pub struct Spawner {
    sender: Mutex<Option<mpsc::Sender<Task>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Spawner {
    /// Starts the thread.
    ///
    /// # Errors
    /// When the thread cannot be created.
    pub fn start(name: &str) -> io::Result<Self> {
        let (sender, receiver) = mpsc::channel::<Task>();
        let thread = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                while let Ok(task) = receiver.recv() {
                    task();
                }
            })?;
        Ok(Self {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Runs `task` on the spawner thread and returns its result.
    ///
    /// # Errors
    /// `None` when the spawner has shut down.
    pub async fn run<T, F>(&self, task: F) -> Option<T>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let (reply, result) = oneshot::channel();
        let task: Task = Box::new(move || {
            let _ = reply.send(task());
        });
        {
            let guard = self.sender.lock().ok()?;
            guard.as_ref()?.send(task).ok()?;
        }
        result.await.ok()
    }

    /// Stops the thread (after the task in progress, if any). Children forked
    /// by it receive their death signal. Idempotent.
    pub fn shutdown(&self) {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(thread) = thread
            && thread.thread().id() != std::thread::current().id()
        {
            let _ = thread.join();
        }
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_tasks_on_one_named_thread_until_shutdown() {
        let spawner = Spawner::start("test-spawner").unwrap();
        let a = spawner
            .run(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        let b = spawner.run(|| std::thread::current().id()).await.unwrap();
        let c = spawner.run(|| std::thread::current().id()).await.unwrap();
        assert_eq!(a.as_deref(), Some("test-spawner"));
        assert_eq!(b, c);
        spawner.shutdown();
        assert!(spawner.run(|| 1).await.is_none());
    }
}
