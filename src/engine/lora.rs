//! LoRA adapters on one replica: which adapter each request names, the
//! adapters held in GPU memory (`max_loras` slots, vLLM's `--max-loras`) and
//! in host memory (`max_cpu_loras`), their loading, and what a batch that
//! mixes adapters costs.
//!
//! A request's adapter is a pure function of its id and the run's seed
//! (drawn from the popularity law through its own hash), so it needs no
//! storage and every replica agrees on it.

use crate::cost::StepBatch;
use std::collections::VecDeque;

/// The adapters of a run, shared by the replicas.
#[derive(Debug, Clone)]
pub struct LoraPlan {
    /// Cumulative popularity of adapters 0..n (the last is 1).
    pub cdf: Vec<f64>,
    /// Seed of the adapter draws.
    pub seed: u64,
    /// Bytes of one adapter.
    pub bytes: f64,
    /// Slots in GPU memory per replica.
    pub max_loras: u32,
    /// Adapters kept in host memory per replica.
    pub max_cpu_loras: u32,
    /// Time to copy one adapter host → GPU, s.
    pub host_load_s: f64,
    /// Time to read one adapter from storage into host memory, s.
    pub storage_load_s: f64,
    /// Extra FLOPs per token of a LoRA request (shrink and expand of every adapted layer).
    pub flops_per_token: f64,
    /// Time per adapter in a step (its weights read from HBM), s.
    pub per_adapter_s: f64,
    /// Time per LoRA FLOP (at the multi-LoRA kernels' efficiency), s.
    pub per_flop_s: f64,
    /// A single adapter, merged into the base weights: nothing to load or pay.
    pub merged: bool,
}

impl LoraPlan {
    /// The adapter request `req` names.
    #[inline]
    pub fn adapter_of(&self, req: u32) -> u32 {
        if self.cdf.len() <= 1 {
            return 0;
        }
        let u = ((crate::workload::stream_seed(self.seed, req as u64) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u32
    }
}

/// Adapter activity of one replica (whole run).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoraStats {
    /// Admissions whose adapter was already in GPU memory.
    pub gpu_hits: u64,
    /// Admissions that loaded their adapter from host memory.
    pub host_loads: u64,
    /// Admissions that loaded their adapter from storage.
    pub storage_loads: u64,
    /// Time the loads added to steps, s.
    pub load_time: f64,
    /// Time the LoRA computation added to steps, s.
    pub compute_time: f64,
    /// ∫ distinct adapters in the batch over steps (step count weighted).
    pub adapter_steps: u64,
    /// Times the head of the queue waited because every slot held an adapter in use.
    pub slot_waits: u64,
}

/// One replica's adapters.
#[derive(Debug, Clone)]
pub(super) struct Loras {
    plan: std::sync::Arc<LoraPlan>,
    /// Adapters in GPU memory, least recently used first, with their running requests.
    gpu: VecDeque<(u32, u32)>,
    /// Adapters in host memory, least recently used first.
    host: VecDeque<u32>,
    /// Load time of the step being planned, s.
    step: f64,
    pub(super) stats: LoraStats,
}

impl Loras {
    pub(super) fn new(plan: std::sync::Arc<LoraPlan>) -> Self {
        let mut l = Loras { plan, gpu: VecDeque::new(), host: VecDeque::new(), step: 0.0, stats: LoraStats::default() };
        if l.plan.merged {
            l.gpu.push_back((0, 0));
        }
        l
    }

    /// No adapter in GPU or host memory any more (a failed replica's); the
    /// statistics are kept.
    pub(super) fn empty(&mut self) {
        *self = Loras { stats: self.stats, ..Loras::new(self.plan.clone()) };
    }

    /// The plan.
    pub(super) fn plan(&self) -> &LoraPlan {
        &self.plan
    }

    /// Whether adapter `a` is in GPU memory.
    pub(super) fn holds(&self, a: u32) -> bool {
        self.gpu.iter().any(|x| x.0 == a)
    }

    /// Whether request `req` can start now: its adapter is in GPU memory, or
    /// a slot is free or holds an adapter no running request uses.
    pub(super) fn can_start(&mut self, req: u32) -> bool {
        let a = self.plan.adapter_of(req);
        let ok = self.holds(a) || self.gpu.len() < self.plan.max_loras as usize || self.gpu.iter().any(|x| x.1 == 0);
        if !ok {
            self.stats.slot_waits += 1;
        }
        ok
    }

    /// Request `req` starts (after [`Loras::can_start`]): its adapter is
    /// loaded if need be (the time goes to the step being planned) and counts one more user.
    pub(super) fn enter(&mut self, req: u32) {
        let a = self.plan.adapter_of(req);
        if let Some(k) = self.gpu.iter().position(|x| x.0 == a) {
            let mut e = self.gpu.remove(k).expect("present");
            e.1 += 1;
            self.gpu.push_back(e);
            self.stats.gpu_hits += 1;
            return;
        }
        if self.gpu.len() >= self.plan.max_loras as usize {
            let k = self.gpu.iter().position(|x| x.1 == 0).expect("can_start found an idle slot");
            self.gpu.remove(k);
        }
        let mut t = self.plan.host_load_s;
        match self.host.iter().position(|&x| x == a) {
            Some(k) => {
                self.host.remove(k);
                self.stats.host_loads += 1;
            }
            None => {
                t += self.plan.storage_load_s;
                self.stats.storage_loads += 1;
            }
        }
        self.host.push_back(a);
        if self.host.len() > self.plan.max_cpu_loras.max(1) as usize {
            self.host.pop_front();
        }
        self.gpu.push_back((a, 1));
        self.step += t;
    }

    /// Request `req` leaves the running set.
    pub(super) fn leave(&mut self, req: u32) {
        let a = self.plan.adapter_of(req);
        if let Some(e) = self.gpu.iter_mut().find(|x| x.0 == a) {
            e.1 -= 1;
        }
    }

    /// Extra time of a step computing `batch`: the loads planned for it, the
    /// adapters' weights read once each, and the adapter FLOPs of its tokens.
    pub(super) fn step_time(&mut self, batch: &StepBatch) -> f64 {
        let load = std::mem::take(&mut self.step);
        self.stats.load_time += load;
        if self.plan.merged {
            return load;
        }
        let distinct = self.gpu.iter().filter(|x| x.1 > 0).count() as u64;
        self.stats.adapter_steps += distinct;
        let tokens = batch.tokens() as f64;
        let compute =
            distinct as f64 * self.plan.per_adapter_s + tokens * self.plan.flops_per_token * self.plan.per_flop_s;
        self.stats.compute_time += compute;
        load + compute
    }
}

/// Weights of one adapter of rank `rank`: A and B of rank × (d_in + d_out)
/// for every adapted linear layer (stored in BF16: 2 bytes each). The
/// attention projections (q, k, v, o) of every layer are adapted, and the
/// dense MLPs (gate, up, down): every layer's in a dense model; in an MoE
/// model only the leading dense layers' and the shared experts', because
/// vLLM 0.11 applies LoRA to no routed expert (its FusedMoE layers take no
/// adapter: vllm/lora/models.py warns that LoRA on MoE models adapts only
/// the dense layers; expert adapters came in 0.11.1, PR #21229).
pub fn adapter_weights(llm: &crate::spec::LlmSpec, rank: u32) -> f64 {
    let h = llm.hidden_size as f64;
    let kv = (llm.num_kv_heads * llm.head_dim) as f64;
    let q = (llm.num_attention_heads * llm.head_dim) as f64;
    let attention = (h + q) + (h + kv) * 2.0 + (q + h);
    let mlp = |ffn: f64| 2.0 * (h + ffn) + (ffn + h);
    let layers = llm.num_layers as f64;
    let mlps = if llm.num_experts > 0 {
        let dense = llm.dense_layers.min(llm.num_layers) as f64;
        let expert = llm.moe_intermediate_size.unwrap_or(llm.intermediate_size) as f64;
        dense * mlp(llm.intermediate_size as f64) + (layers - dense) * llm.shared_experts as f64 * mlp(expert)
    } else {
        layers * mlp(llm.intermediate_size as f64)
    };
    rank as f64 * (layers * attention + mlps)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// vLLM 0.11 adapts no routed expert: a MoE model's adapter holds the
    /// attention projections (and dense layers and shared experts), not its
    /// expert MLPs (review: the expert MLP was charged once per layer).
    #[test]
    fn moe_adapters_leave_the_routed_experts_out() {
        let c = crate::catalog::Catalog::builtin().unwrap();
        let mixtral = &c.model("mixtral-8x7b").unwrap().spec;
        let (h, q, kv) = (4096.0, 4096.0, 1024.0);
        let attention = (h + q) + 2.0 * (h + kv) + (q + h);
        assert_eq!(adapter_weights(mixtral, 16), 16.0 * 32.0 * attention);
        // A dense model of the same attention pays its MLPs too.
        let mut dense = mixtral.clone();
        dense.num_experts = 0;
        assert!(adapter_weights(&dense, 16) > 3.0 * adapter_weights(mixtral, 16));
        // Shared experts and leading dense layers are plain linear layers: adapted.
        let mut shared = mixtral.clone();
        shared.shared_experts = 1;
        assert!(adapter_weights(&shared, 16) > adapter_weights(mixtral, 16));
    }

    fn plan(n: usize, slots: u32) -> std::sync::Arc<LoraPlan> {
        std::sync::Arc::new(LoraPlan {
            cdf: (1..=n).map(|k| k as f64 / n as f64).collect(),
            seed: 7,
            bytes: 1.0,
            max_loras: slots,
            max_cpu_loras: 2,
            host_load_s: 1.0,
            storage_load_s: 10.0,
            flops_per_token: 0.0,
            per_adapter_s: 0.0,
            per_flop_s: 0.0,
            merged: false,
        })
    }

    #[test]
    fn adapters_are_drawn_by_popularity() {
        let p = plan(4, 1);
        let mut counts = [0u32; 4];
        for r in 0..40_000 {
            counts[p.adapter_of(r) as usize] += 1;
        }
        assert!(counts.iter().all(|&c| (9_000..11_000).contains(&c)), "{counts:?}");
    }

    #[test]
    fn slots_loads_and_eviction() {
        let p = plan(1000, 2);
        let mut l = Loras::new(p.clone());
        // Three requests with distinct adapters.
        let mut reqs = Vec::new();
        let mut seen = Vec::new();
        for r in 0..10_000u32 {
            let a = p.adapter_of(r);
            if !seen.contains(&a) {
                seen.push(a);
                reqs.push(r);
            }
            if reqs.len() == 3 {
                break;
            }
        }
        assert!(l.can_start(reqs[0]));
        l.enter(reqs[0]);
        l.enter(reqs[1]);
        assert_eq!(l.step_time(&StepBatch::default()), 22.0, "two loads from storage");
        assert!(!l.can_start(reqs[2]), "both slots hold adapters in use");
        l.leave(reqs[0]);
        assert!(l.can_start(reqs[2]));
        l.enter(reqs[2]);
        assert!(!l.holds(p.adapter_of(reqs[0])) && l.holds(p.adapter_of(reqs[2])));
        assert_eq!((l.stats.storage_loads, l.stats.slot_waits), (3, 1));
    }
}
