//! What a model and a GPU are: an LLM's architecture and a GPU's rates,
//! memory, interconnect and efficiencies. Plain data read from
//! `models/llm/` and `models/gpu/` by the [`crate::catalog`], or inlined in
//! a scenario; they sit below both, so the catalogue may check engine
//! profiles against the scenario's types without an import cycle.

mod gpu;
mod llm;

pub use gpu::{AllReduceSpec, GENERIC_CUTLASS_MOE, GENERIC_FP4, GENERIC_MOE, GIB, GpuSpec, KernelSpec};
pub use llm::{AttnKind, FfnKind, LinearAttention, LlmSpec, Mla, SparseIndexer};
