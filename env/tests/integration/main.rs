//! Integration tests of `env`: properties of the simulated disk on random workloads, plain unit tests of its
//! promises, the simulated scheduler, BUGGIFY and probes, `RealEnv` on the real file system, and the `env::fs`
//! facade on both.

mod cost;
mod dir_faults;
mod fs_crash;
mod fs_facade;
mod fs_std_oracle;
mod model;
mod persistence;
mod power;
mod probes;
mod properties;
mod real_env;
mod scheduler;
mod sim_units;
mod threads;
mod tidy;
