//! The build switch (DECISIONS.md ADR-0003): what the store's `fs`, `thread`, `sync` and `time` names mean.
//!
//! The store ([`crate::store`], [`crate::writer`]) is written against `std` and imports these four names from here,
//! nothing else. This module is the only place that differs between the two routes to the simulated world:
//!
//! * **`interposed`** (route B): they *are* `std::fs`, `std::thread`, `std::sync` and `std::time`. The store makes
//!   the real system calls' C library entry points, and the `interpose` crate answers those below `std` (holdfast
//!   issue 38, TARGETS.md "Unmodified systems: std calls intercepted below std").
//! * **`env-fs`** (route A): they are holdfast's `std`-shaped facades ([`holdfast::env::fs`], holdfast's ADR-0047;
//!   [`holdfast::env::thread`] and [`holdfast::env::sync`], ADR-0104; the env's clock), with the free functions and
//!   constructors `std` has. `std::fs` has free functions where a simulated world is a value, so the world is bound
//!   to the calling OS thread by [`enter`] (as `interpose::enter` binds it on route B), and the threads the store
//!   starts inherit it.
//!
//! Exactly one route is built: both or neither is a compile error naming the fix.

#[cfg(all(feature = "env-fs", feature = "interposed"))]
compile_error!("std-kv: choose one route: the default (`interposed`) or `--no-default-features --features env-fs`");
#[cfg(not(any(feature = "env-fs", feature = "interposed")))]
compile_error!(
    "std-kv: no route to the simulated world: build with `--features env-fs` or `--features interposed` (a store \
     built with neither would write to the host's disk)"
);

#[cfg(feature = "env-fs")]
pub mod fs;
#[cfg(feature = "env-fs")]
pub mod thread;
#[cfg(feature = "env-fs")]
pub mod time;
#[cfg(feature = "env-fs")]
mod world;
#[cfg(feature = "env-fs")]
pub use world::{Entered, enter};

/// `std::sync`'s blocking primitives, or the facade's: same types, same signatures.
#[cfg(feature = "env-fs")]
pub mod sync {
    pub use holdfast::env::sync::{Condvar, Mutex, mpsc};
}

#[cfg(all(feature = "interposed", not(feature = "env-fs")))]
pub use std::{fs, thread, time};

/// `std::sync`'s blocking primitives, or the facade's: same types, same signatures.
#[cfg(all(feature = "interposed", not(feature = "env-fs")))]
pub mod sync {
    #![expect(
        clippy::disallowed_types,
        reason = "holdfast issue 38: on the interposed route the store blocks on std's own Condvar; the interpose \
                  crate schedules it below std (DECISIONS.md ADR-0003)"
    )]
    pub use std::sync::{Condvar, Mutex, mpsc};
}
