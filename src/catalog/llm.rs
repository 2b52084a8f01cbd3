//! LLM architectures: the numbers the cost model and the memory plan need.

use serde::{Deserialize, Serialize};

/// One transformer LLM architecture (decoder-only, GQA attention, SwiGLU or
/// GELU FFN, optionally mixture-of-experts with shared experts and leading
/// dense layers). Loaded from `models/llm/<name>.toml` or inlined in a
/// scenario as `[model.spec]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmSpec {
    /// Display name, e.g. "Llama-3.1-8B".
    pub name: String,
    /// Number of transformer layers.
    pub num_layers: u32,
    /// Model (residual stream) width.
    pub hidden_size: u32,
    /// Query heads.
    pub num_attention_heads: u32,
    /// Key/value heads (GQA); equal to `num_attention_heads` for MHA.
    pub num_kv_heads: u32,
    /// Width of one attention head.
    pub head_dim: u32,
    /// FFN inner width: of the dense FFN, and of each expert of an MoE model
    /// that does not set `moe_intermediate_size`.
    pub intermediate_size: u32,
    /// MoE models: FFN inner width of one routed (or shared) expert, when it
    /// differs from `intermediate_size` (Qwen3-MoE, GLM-4.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe_intermediate_size: Option<u32>,
    /// MoE models: shared experts every token runs through, each of the
    /// routed experts' size (GLM-4.5: 1; Qwen3-MoE, Mixtral: 0).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_experts: u32,
    /// MoE models: leading layers with a dense FFN of `intermediate_size`
    /// instead of experts (GLM-4.5's `first_k_dense_replace`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dense_layers: u32,
    /// FFN form: `swiglu` (gate, up and down matrices; Llama, Qwen, Mistral)
    /// or `gelu` (up and down only; GPT-J, GPT-2).
    #[serde(default, skip_serializing_if = "FfnKind::is_swiglu")]
    pub ffn: FfnKind,
    /// Vocabulary size (embedding and LM head rows).
    pub vocab_size: u32,
    /// Maximum context length (prompt + output) in tokens.
    pub max_context: u32,
    /// Whether the LM head shares the embedding matrix.
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Routed experts per MoE layer; 0 for dense models.
    #[serde(default)]
    pub num_experts: u32,
    /// Experts each token is routed to (top-k).
    #[serde(default)]
    pub experts_per_token: u32,
    /// Sliding attention window in tokens, if the model uses one: attention
    /// reads at most this many cached tokens per query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
    /// Where the numbers came from.
    #[serde(default)]
    pub source: String,
    /// Other names it is known by (in published tables, benchmark logs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

fn is_zero(v: &u32) -> bool {
    *v == 0
}

/// The form of the feed-forward block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FfnKind {
    /// Gated: gate and up projections, SiLU(gate) × up, down projection (3 matrices).
    #[default]
    Swiglu,
    /// Not gated: up projection, GELU, down projection (2 matrices).
    Gelu,
}

impl FfnKind {
    /// Weight matrices of one FFN (3 gated, 2 not).
    pub fn matrices(self) -> f64 {
        match self {
            FfnKind::Swiglu => 3.0,
            FfnKind::Gelu => 2.0,
        }
    }
    fn is_swiglu(&self) -> bool {
        *self == FfnKind::Swiglu
    }
}

impl LlmSpec {
    /// True for mixture-of-experts models.
    pub fn is_moe(&self) -> bool {
        self.num_experts > 0
    }

    /// Parameters of the attention projections (Q, K, V, O) of one layer.
    pub fn attn_params_per_layer(&self) -> f64 {
        let h = self.hidden_size as f64;
        let hd = self.head_dim as f64;
        let q = self.num_attention_heads as f64 * hd;
        let kv = self.num_kv_heads as f64 * hd;
        h * (q + 2.0 * kv) + q * h
    }

    /// Parameters of one expert's (or the dense) FFN: gate, up, down (SwiGLU)
    /// or up, down (GELU).
    pub fn ffn_params_per_expert(&self) -> f64 {
        self.ffn.matrices() * self.hidden_size as f64 * self.expert_ffn_size() as f64
    }

    /// Inner width of one expert's FFN (the dense FFN's for a dense model).
    pub fn expert_ffn_size(&self) -> u32 {
        if self.is_moe() {
            self.moe_intermediate_size.unwrap_or(self.intermediate_size)
        } else {
            self.intermediate_size
        }
    }

    /// Parameters of the dense FFN of a dense layer.
    pub fn dense_ffn_params(&self) -> f64 {
        self.ffn.matrices() * self.hidden_size as f64 * self.intermediate_size as f64
    }

    /// Layers whose FFN is a mixture of experts (all layers of an MoE model
    /// but its leading `dense_layers`; 0 for a dense model).
    pub fn moe_layers(&self) -> u32 {
        if self.is_moe() { self.num_layers.saturating_sub(self.dense_layers) } else { 0 }
    }

    /// True when every layer has the same shape (no leading dense layers, no shared experts).
    fn uniform(&self) -> bool {
        self.dense_layers == 0 && self.shared_experts == 0
    }

    /// Number of FFN experts stored per layer (1 for dense models).
    pub fn experts_stored(&self) -> f64 {
        if self.is_moe() { self.num_experts as f64 } else { 1.0 }
    }

    /// Experts each token runs through (1 for dense models).
    pub fn experts_active(&self) -> f64 {
        if self.is_moe() { self.experts_per_token as f64 } else { 1.0 }
    }

    /// Router (gate) parameters of one MoE layer.
    pub fn router_params_per_layer(&self) -> f64 {
        if self.is_moe() { self.hidden_size as f64 * self.num_experts as f64 } else { 0.0 }
    }

    /// Embedding plus LM-head parameters.
    pub fn embedding_params(&self) -> f64 {
        let e = self.vocab_size as f64 * self.hidden_size as f64;
        if self.tie_word_embeddings { e } else { 2.0 * e }
    }

    /// Total parameter count (norm weights included).
    pub fn total_params(&self) -> f64 {
        let per_layer = self.attn_params_per_layer()
            + self.experts_stored() * self.ffn_params_per_expert()
            + self.router_params_per_layer()
            + 2.0 * self.hidden_size as f64;
        if self.uniform() {
            return self.num_layers as f64 * per_layer + self.embedding_params() + self.hidden_size as f64;
        }
        let moe = per_layer + self.shared_experts as f64 * self.ffn_params_per_expert();
        let dense = self.attn_params_per_layer() + self.dense_ffn_params() + 2.0 * self.hidden_size as f64;
        self.moe_layers() as f64 * moe
            + self.dense_layers as f64 * dense
            + self.embedding_params()
            + self.hidden_size as f64
    }

    /// Parameters touched per token (active and shared experts only).
    pub fn active_params(&self) -> f64 {
        let per_layer = self.attn_params_per_layer()
            + self.experts_active() * self.ffn_params_per_expert()
            + self.router_params_per_layer();
        if self.uniform() {
            return self.num_layers as f64 * per_layer + self.vocab_size as f64 * self.hidden_size as f64;
        }
        let moe = per_layer + self.shared_experts as f64 * self.ffn_params_per_expert();
        let dense = self.attn_params_per_layer() + self.dense_ffn_params();
        self.moe_layers() as f64 * moe
            + self.dense_layers as f64 * dense
            + self.vocab_size as f64 * self.hidden_size as f64
    }

    /// KV-cache bytes per token on one GPU that holds `layers` layers of a
    /// `tp`-way tensor-parallel replica, at `bytes` per element: keys and
    /// values of ⌈num_kv_heads / tp⌉ heads per layer (a KV head is
    /// replicated when tp exceeds the KV heads). `tp = 1` and all layers
    /// give the whole model's bytes per token.
    pub fn kv_bytes_per_token(&self, layers: f64, tp: f64, bytes: f64) -> f64 {
        2.0 * layers * (self.num_kv_heads as f64 / tp).ceil() * self.head_dim as f64 * bytes
    }

    /// Checks internal consistency; returns a message naming the bad field.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("num_layers", self.num_layers),
            ("hidden_size", self.hidden_size),
            ("num_attention_heads", self.num_attention_heads),
            ("num_kv_heads", self.num_kv_heads),
            ("head_dim", self.head_dim),
            ("intermediate_size", self.intermediate_size),
            ("vocab_size", self.vocab_size),
            ("max_context", self.max_context),
        ];
        for (k, v) in positive {
            if v == 0 {
                return Err(format!("`{k}` must be a positive integer, got 0"));
            }
        }
        if !self.num_attention_heads.is_multiple_of(self.num_kv_heads) {
            return Err(format!(
                "`num_attention_heads` ({}) must be a multiple of `num_kv_heads` ({})",
                self.num_attention_heads, self.num_kv_heads
            ));
        }
        if self.is_moe() && (self.experts_per_token == 0 || self.experts_per_token > self.num_experts) {
            return Err(format!(
                "`experts_per_token` must be between 1 and `num_experts` ({}) for an MoE model, got {}",
                self.num_experts, self.experts_per_token
            ));
        }
        if !self.is_moe() && self.experts_per_token != 0 {
            return Err("`experts_per_token` is set but `num_experts` is 0; set both or neither".into());
        }
        if !self.is_moe() && (self.moe_intermediate_size.is_some() || self.shared_experts > 0 || self.dense_layers > 0)
        {
            return Err(
                "`moe_intermediate_size`, `shared_experts` and `dense_layers` describe MoE models; set `num_experts` \
                 or remove them"
                    .into(),
            );
        }
        if self.moe_intermediate_size == Some(0) {
            return Err("`moe_intermediate_size` must be positive when set".into());
        }
        if self.is_moe() && self.dense_layers >= self.num_layers {
            return Err(format!(
                "`dense_layers` ({}) must be fewer than `num_layers` ({}): an MoE model needs MoE layers",
                self.dense_layers, self.num_layers
            ));
        }
        if self.sliding_window == Some(0) {
            return Err("`sliding_window` must be positive when set".into());
        }
        Ok(())
    }
}
