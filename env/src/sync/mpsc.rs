//! A multi-producer, single-consumer channel shaped like `std::sync::mpsc`'s unbounded `channel`, built on
//! [`super::Mutex`] and [`super::Condvar`], so that on a simulated world sending and receiving are yield points and a
//! blocked `recv` is a blocking point a deadlock report names.

use std::collections::VecDeque;
use std::fmt;
use std::panic::Location;
use std::sync::{Arc, PoisonError};

pub use std::sync::mpsc::{RecvError, SendError, TryRecvError};

use super::{Condvar, Mutex};

/// The most messages a channel may hold: more is a producer that outruns its consumer without bound (a bug).
pub const CHANNEL_MESSAGES_MAX: usize = 1 << 20;

struct Queue<T> {
    messages: VecDeque<T>,
    senders: usize,
    receiver_alive: bool,
}

struct Shared<T> {
    queue: Mutex<Queue<T>>,
    ready: Condvar,
}

/// The sending half; clone it for more producers.
pub struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The receiving half.
pub struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

/// A new channel: its sender and receiver.
pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let queue = Queue { messages: VecDeque::new(), senders: 1, receiver_alive: true };
    let shared = Arc::new(Shared { queue: Mutex::new(queue), ready: Condvar::new() });
    (Sender { shared: Arc::clone(&shared) }, Receiver { shared })
}

impl<T> Shared<T> {
    fn lock(&self, operation: &'static str, location: &'static Location<'static>) -> super::MutexGuard<'_, Queue<T>> {
        self.queue.lock_at(operation, location).unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> Sender<T> {
    /// Queue `value` for the receiver; gives it back if the receiver is gone.
    #[track_caller]
    pub fn send(&self, value: T) -> Result<(), SendError<T>> {
        let mut queue = self.shared.lock("Sender::send", Location::caller());
        if !queue.receiver_alive {
            return Err(SendError(value));
        }
        assert!(queue.messages.len() < CHANNEL_MESSAGES_MAX, "channel holds {CHANNEL_MESSAGES_MAX} messages");
        queue.messages.push_back(value);
        drop(queue);
        self.shared.ready.notify_one();
        Ok(())
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.shared.lock("Sender::clone", Location::caller()).senders += 1;
        Self { shared: Arc::clone(&self.shared) }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut queue = self.shared.lock("Sender::drop", Location::caller());
        queue.senders -= 1;
        let last = queue.senders == 0;
        drop(queue);
        if last {
            self.shared.ready.notify_all();
        }
    }
}

impl<T> Receiver<T> {
    /// The next message, blocking until one comes; an error once it is empty and every sender is gone.
    #[track_caller]
    pub fn recv(&self) -> Result<T, RecvError> {
        let location = Location::caller();
        let mut queue = self.shared.lock("Receiver::recv", location);
        loop {
            if let Some(value) = queue.messages.pop_front() {
                return Ok(value);
            }
            if queue.senders == 0 {
                return Err(RecvError);
            }
            queue =
                self.shared.ready.wait_at(queue, "Receiver::recv", location).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The next message if one is queued now.
    #[track_caller]
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let mut queue = self.shared.lock("Receiver::try_recv", Location::caller());
        match queue.messages.pop_front() {
            Some(value) => Ok(value),
            None if queue.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    /// Every message until the channel is empty and every sender is gone.
    pub fn iter(&self) -> impl Iterator<Item = T> + '_ {
        std::iter::from_fn(move || self.recv().ok())
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        self.shared.lock("Receiver::drop", Location::caller()).receiver_alive = false;
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender").finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver").finish_non_exhaustive()
    }
}
