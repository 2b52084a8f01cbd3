//! What the simulation observed, and how it is summarised.

pub mod hist;
mod record;
pub mod stability;
pub mod stats;
mod summary;

pub use hist::LogHistogram;
pub use record::{RejectReason, RequestRecord, Status};
pub use summary::{
    CostSummary, KvSummary, LatencyMetric, LittlesLaw, SloSummary, Summary, Utilisation, littles_law, slo_checks,
    summarize,
};
