//! What the simulation observed, and how it is summarised.

pub mod fleet;
pub mod hist;
pub mod parts;
mod record;
pub mod stability;
pub mod stats;
mod summarize;
mod summary;
pub mod tally;

pub use hist::LogHistogram;
pub use parts::{Attr, NUM_PARTS, Part, Parts};
pub use record::{LiveRecords, RecordSample, RejectReason, RequestRecord, Status, slo_checks};
pub use summarize::{littles_law, slo_met, summarize};
pub use summary::{
    ClassMap, ClassSummary, CostSummary, KvSummary, LatencyMetric, LittlesLaw, LoraSummary, OffloadSummary,
    RequestMetrics, SloSummary, Summary, Utilisation, WorkloadSummary,
};
pub use tally::Tally;
