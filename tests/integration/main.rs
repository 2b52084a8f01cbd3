//! The integration tests, as one test binary (one link instead of one per
//! file: see README, "Tests"). Each module is one area; `common` holds the
//! helpers they share.

mod architecture;
mod attribution;
mod claims;
mod cli;
mod cluster;
mod common;
mod compare;
mod determinism;
mod docs_commands;
mod energy;
mod engines;
mod explain;
mod fast_path;
mod fleet;
mod hostile;
mod imports;
mod invariants;
mod kv_offload;
mod lora;
mod models;
mod parallelism;
mod plan;
mod playground;
mod policies;
mod pools;
mod preemption;
mod queueing;
mod report_browser;
mod schema;
mod speculative;
mod stability;
mod streaming;
mod sweep;
mod trace;
mod validation;
mod workload;
