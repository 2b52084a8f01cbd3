//! Request streams: arrival processes, lengths, classes, closed-loop users,
//! multi-turn sessions and trace replay.
//!
//! [`plan::build`] resolves the scenario's `[workload]` once (reading any
//! trace or length file it names); [`Source`] then produces requests lazily,
//! in arrival order, as the simulation consumes them — nothing is
//! materialised up front, so memory does not grow with the request count.
//! Each random quantity has its own PCG-64 stream (see [`source`]), so
//! changing the length distribution does not shift the arrival times and vice
//! versa (common random numbers across configurations).

mod dist;
pub mod plan;
pub mod process;
pub mod source;
pub mod trace;

pub use crate::rng::stream_seed;
pub use dist::{LengthSampler, TimeSampler, UnitGap, exp1, weibull_shape};
pub use plan::{ClassPlan, WorkloadPlan};
pub use source::{NO_SESSION, RequestSpec, Source};
