//! Route A's `std::time`: [`Instant`] on the clock of the world bound to this thread.

pub use std::time::Duration;

use super::world::bound;

/// `std::time::Instant`: a reading of the world's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(Duration);

impl Instant {
    /// Now, on the world's clock. Panics when no world is bound to this thread (`std`'s `Instant::now` cannot fail,
    /// so neither can a caller written against it).
    pub fn now() -> Instant {
        use holdfast::env::Env as _;
        let fs = bound().unwrap_or_else(|error| panic!("Instant::now: {error}"));
        Instant(fs.env().now())
    }

    /// Time from `earlier` to this instant; zero if `earlier` is later.
    pub fn duration_since(&self, earlier: Instant) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// Time since this instant.
    pub fn elapsed(&self) -> Duration {
        Instant::now().duration_since(*self)
    }
}

#[cfg(test)]
mod tests {
    use holdfast::env::SimEnv;

    use super::*;
    use crate::sys::enter;

    #[test]
    fn instants_read_the_worlds_clock() {
        let world = SimEnv::new(9);
        let _entered = enter(&world);
        let start = Instant::now();
        world.advance_clock(Duration::from_millis(7));
        assert_eq!(start.elapsed(), Duration::from_millis(7));
        assert_eq!(start.duration_since(Instant::now()), Duration::ZERO, "an earlier end saturates at zero");
    }
}
