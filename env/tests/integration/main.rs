//! Integration tests of `env`: properties of the simulated disk on random workloads, plain unit tests of its
//! promises, the simulated scheduler and BUGGIFY, and `RealEnv` on the real file system.

mod model;
mod properties;
mod real_env;
mod scheduler;
mod sim_units;
mod tidy;
