//! What the simulation observed: request records, latency parts, the running
//! tally, percentiles and the `Summary` types (filled in by [`crate::summarize`]).

pub mod fleet;
pub mod hist;
pub mod parts;
mod record;
pub mod stability;
pub mod stats;
pub mod summary;
pub mod tally;

pub use hist::LogHistogram;
pub use parts::{Attr, NUM_PARTS, Part, Parts};
pub use record::{LiveRecords, RecordSample, RejectReason, RequestRecord, Status, slo_checks, slo_met};
pub use summary::{
    ClassMap, ClassSummary, CostSummary, KvSummary, LatencyMetric, LittlesLaw, LoraSummary, OffloadSummary,
    RequestMetrics, SloSummary, Summary, Utilisation, WorkloadSummary,
};
pub use tally::Tally;
