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
    /// How many layers use `sliding_window` when only some do (gpt-oss:
    /// every other layer); the others attend to the whole context. Set, the
    /// engine keeps only the window's KV of those layers (vLLM V1's hybrid
    /// KV-cache manager, SGLang's SWA pool), so a sequence holds a fixed
    /// amount for them. Unset, every layer slides but the KV of every token
    /// is kept (Mistral-7B as vLLM serves it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window_layers: Option<u32>,
    /// The query projection also emits a sigmoid gate on the attention
    /// output, as wide as the query (Qwen3-Next, Qwen3.5 `attn_output_gate`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub attn_output_gate: bool,
    /// Bits per weight of the routed experts when the checkpoint stores them
    /// apart from `model.dtype` (gpt-oss: 4.25, MXFP4 = 32 FP4 values and one
    /// E8M0 scale byte per block). They run as weight-only GEMMs at the BF16
    /// rate (W4A16, as vLLM's Marlin and Triton MXFP4 MoE kernels do on Hopper).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_weight_bits: Option<f64>,
    /// Linear-attention layers (Gated DeltaNet in Qwen3.5 and Qwen3-Next):
    /// a fixed-size recurrent state per sequence instead of a KV cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linear_attention: Option<LinearAttention>,
    /// Multi-head latent attention (DeepSeek-V3/R1): one compressed latent
    /// per token is cached, shared by all heads and replicated on every
    /// tensor-parallel GPU; `num_kv_heads` and `head_dim` are then unused
    /// for attention.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<Mla>,
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

fn is_false(v: &bool) -> bool {
    !*v
}

/// Linear-attention (Gated DeltaNet) layers of a hybrid model, from its
/// config.json (`linear_num_key_heads`, `linear_num_value_heads`,
/// `linear_key_head_dim`, `linear_value_head_dim`, `linear_conv_kernel_dim`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinearAttention {
    /// Layers that use linear attention; the remaining layers use the
    /// model's (full) softmax attention.
    pub layers: u32,
    /// Key (and query) heads.
    pub key_heads: u32,
    /// Value heads (the state has one d_k × d_v matrix per value head).
    pub value_heads: u32,
    /// Width of a key head.
    pub key_head_dim: u32,
    /// Width of a value head.
    pub value_head_dim: u32,
    /// Causal 1-D convolution width over q, k and v.
    pub conv_kernel: u32,
    /// Bytes per element of the recurrent state the engine keeps (4: FP32,
    /// the configs' `mamba_ssm_dtype`; 2: BF16).
    #[serde(default = "four")]
    pub state_bytes: f64,
}

fn four() -> f64 {
    4.0
}

/// Multi-head latent attention shapes (DeepSeek-V2/V3 config.json names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mla {
    /// Rank of the query down-projection (0: queries are projected directly).
    #[serde(default)]
    pub q_lora_rank: u32,
    /// Rank of the compressed key-value latent (cached per token).
    pub kv_lora_rank: u32,
    /// Per-head query/key width without rotary embedding.
    pub qk_nope_head_dim: u32,
    /// Per-head rotary query/key width; the rotary key (one, shared) is cached too.
    pub qk_rope_head_dim: u32,
    /// Per-head value width.
    pub v_head_dim: u32,
    /// DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning indexer
    /// picks the `topk` cached tokens each query attends to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexer: Option<SparseIndexer>,
}

/// The lightning indexer of DeepSeek Sparse Attention (config.json's
/// `index_n_heads`, `index_head_dim`, `index_topk`): per layer, each query
/// scores every cached token with `heads` small FP8 heads of `head_dim`
/// against one cached FP8 index key per token, and the main (MLA) attention
/// reads only the `topk` best. The indexer's projections are replicated on
/// every tensor-parallel GPU, as vLLM's `Indexer` builds them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SparseIndexer {
    /// Indexer heads (`index_n_heads`).
    pub heads: u32,
    /// Width of an indexer head and of the cached index key (`index_head_dim`).
    pub head_dim: u32,
    /// Cached tokens each query attends to (`index_topk`).
    pub topk: u32,
}

impl SparseIndexer {
    /// Cache bytes per token and layer: the FP8 index key and its FP32 scale.
    pub fn bytes_per_token(&self) -> f64 {
        self.head_dim as f64 + 4.0
    }

    /// Parameters per layer: the query projection from the query latent
    /// (`q_rank` wide, or the hidden state without one), the key projection
    /// and its LayerNorm, and the per-head weight projection.
    pub fn params(&self, hidden: f64, q_rank: f64) -> f64 {
        let (n, d) = (self.heads as f64, self.head_dim as f64);
        let q_in = if q_rank > 0.0 { q_rank } else { hidden };
        q_in * n * d + hidden * d + 2.0 * d + hidden * n
    }
}

/// One kind of attention layer of a model, as one GPU of a `tp`-way
/// replica runs it ([`LlmSpec::attention_kinds`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnKind {
    /// Layers of this kind in the whole model.
    pub layers: f64,
    /// Query heads on one GPU.
    pub heads: f64,
    /// Head width for prefill FLOPs: a (query, key) pair costs 4 × heads ×
    /// this (MLA: (qk + v head dims) / 2).
    pub prefill_head_dim: f64,
    /// Head width for decode FLOPs (MLA's weight-absorbed form works in the
    /// latent: kv_lora_rank + rope dim / 2).
    pub decode_head_dim: f64,
    /// KV-cache bytes per cached token per layer on one GPU (0 for linear attention).
    pub kv_bytes_per_token: f64,
    /// Keys a query reads at most.
    pub window: Option<f64>,
    /// Whether the engine keeps these layers' KV for every token (else at most
    /// the window per sequence, or a fixed state).
    pub kv_per_token: bool,
    /// Linear attention: recurrent-state bytes per sequence per layer on one GPU.
    pub state_bytes_per_seq: f64,
    /// Linear attention: recurrence FLOPs per token per layer on one GPU.
    pub state_flops_per_token: f64,
    /// Sparse attention: the indexer that scans every cached token, as
    /// (FLOPs per scored (query, key) pair, cached index bytes per key).
    /// The main attention then reads at most `window` keys per query, in
    /// prefill too, while the KV of every token is kept.
    pub indexer: Option<(f64, f64)>,
}

impl AttnKind {
    /// True for linear-attention layers (a state, no KV cache).
    pub fn is_linear(&self) -> bool {
        self.kv_bytes_per_token == 0.0 && self.state_bytes_per_seq > 0.0
    }
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

impl LinearAttention {
    /// (q + k width, v width) of the layer's projections: 2·n_k·d_k and n_v·d_v.
    fn widths(&self) -> (f64, f64) {
        (2.0 * self.key_heads as f64 * self.key_head_dim as f64, self.value_heads as f64 * self.value_head_dim as f64)
    }
}

impl LlmSpec {
    /// True for mixture-of-experts models.
    pub fn is_moe(&self) -> bool {
        self.num_experts > 0
    }

    /// Parameters of the attention projections of one layer, averaged over
    /// the layers when they differ (linear-attention layers).
    pub fn attn_params_per_layer(&self) -> f64 {
        let Some(la) = &self.linear_attention else { return self.softmax_attn_params() };
        let n = self.num_layers as f64;
        let lin = la.layers as f64;
        ((n - lin) * self.softmax_attn_params() + lin * self.linear_attn_params(la)) / n
    }

    /// Parameters of one softmax-attention layer's projections: Q (with the
    /// output gate), K, V and O; MLA's down- and up-projections.
    fn softmax_attn_params(&self) -> f64 {
        let h = self.hidden_size as f64;
        let nh = self.num_attention_heads as f64;
        if let Some(m) = &self.mla {
            let qk = (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64;
            let (rq, rkv) = (m.q_lora_rank as f64, m.kv_lora_rank as f64);
            let q = if rq > 0.0 { h * rq + rq + rq * nh * qk } else { h * nh * qk };
            let kv =
                h * (rkv + m.qk_rope_head_dim as f64) + rkv + rkv * nh * (m.qk_nope_head_dim + m.v_head_dim) as f64;
            let index = m.indexer.as_ref().map_or(0.0, |i| i.params(h, rq));
            return q + kv + nh * m.v_head_dim as f64 * h + index;
        }
        let hd = self.head_dim as f64;
        let q = nh * hd;
        let kv = self.num_kv_heads as f64 * hd;
        let gate = if self.attn_output_gate { q } else { 0.0 };
        h * (q + gate + 2.0 * kv) + q * h
    }

    /// Parameters of one Gated DeltaNet layer: the q/k/v and z projections,
    /// the a/b (decay and beta) projections, the convolution, A_log, dt_bias,
    /// the gated norm and the output projection.
    fn linear_attn_params(&self, la: &LinearAttention) -> f64 {
        let h = self.hidden_size as f64;
        let (qk, v) = la.widths();
        let nv = la.value_heads as f64;
        h * (qk + v)
            + h * v
            + 2.0 * h * nv
            + la.conv_kernel as f64 * (qk + v)
            + 2.0 * nv
            + la.value_head_dim as f64
            + v * h
    }

    /// Layers of each attention kind, per GPU of a `tp`-way replica, with KV
    /// elements of `kv_bytes` bytes: full softmax (or MLA) layers, sliding
    /// layers, linear-attention layers (the kinds with no layers are left out).
    pub fn attention_kinds(&self, tp: f64, kv_bytes: f64) -> Vec<AttnKind> {
        let n = self.num_layers as f64;
        let heads = self.num_attention_heads as f64 / tp;
        let hd = self.head_dim as f64;
        let gqa = AttnKind {
            layers: n,
            heads,
            prefill_head_dim: hd,
            decode_head_dim: hd,
            kv_bytes_per_token: self.kv_bytes_per_token_layer(tp, kv_bytes),
            window: None,
            kv_per_token: true,
            state_bytes_per_seq: 0.0,
            state_flops_per_token: 0.0,
            indexer: None,
        };
        let softmax = match &self.mla {
            Some(m) => AttnKind {
                prefill_head_dim: (m.qk_nope_head_dim + m.qk_rope_head_dim + m.v_head_dim) as f64 / 2.0,
                decode_head_dim: m.kv_lora_rank as f64 + m.qk_rope_head_dim as f64 / 2.0,
                window: m.indexer.as_ref().map(|i| i.topk as f64),
                // One multiply-add per indexer head and key element (the FP8 logits).
                indexer: m.indexer.as_ref().map(|i| (2.0 * (i.heads * i.head_dim) as f64, i.bytes_per_token())),
                ..gqa
            },
            None => gqa,
        };
        let lin = self.linear_attention.as_ref().map_or(0.0, |l| l.layers as f64);
        let mut kinds = Vec::with_capacity(3);
        match (self.sliding_window, self.sliding_window_layers) {
            (Some(w), None) => kinds.push(AttnKind { layers: n - lin, window: Some(w as f64), ..softmax }),
            (Some(w), Some(sl)) => {
                let sl = sl as f64;
                if n - lin - sl > 0.0 {
                    kinds.push(AttnKind { layers: n - lin - sl, ..softmax });
                }
                kinds.push(AttnKind { layers: sl, window: Some(w as f64), kv_per_token: false, ..softmax });
            }
            _ => kinds.push(AttnKind { layers: n - lin, ..softmax }),
        }
        if let Some(la) = &self.linear_attention {
            let nv = la.value_heads as f64 / tp;
            let (dk, dv) = (la.key_head_dim as f64, la.value_head_dim as f64);
            let (qk, v) = la.widths();
            kinds.push(AttnKind {
                layers: lin,
                heads: nv,
                prefill_head_dim: dv,
                decode_head_dim: dv,
                kv_bytes_per_token: 0.0,
                window: None,
                kv_per_token: false,
                // The d_k × d_v state of each value head, plus the convolution's
                // last (kernel − 1) inputs in BF16.
                state_bytes_per_seq: nv * dk * dv * la.state_bytes
                    + (la.conv_kernel as f64 - 1.0) * (qk + v) / tp * 2.0,
                // Per token and value head: decay the state, read S·k, the rank-1
                // delta update and S·q: about 8 multiply-adds per state element
                // (an operation count, not a kernel measurement).
                state_flops_per_token: 8.0 * nv * dk * dv,
                indexer: None,
            });
        }
        kinds
    }

    /// Bytes one sequence holds whatever its length, per GPU of a `tp`-way
    /// replica holding `layers` of the model's layers: the window of the
    /// sliding layers whose KV is capped (plus one partly filled block of
    /// `block_size` tokens) and the linear-attention state.
    pub fn seq_state_bytes(&self, layers: f64, tp: f64, kv_bytes: f64, block_size: u32) -> f64 {
        let share = layers / self.num_layers as f64;
        self.attention_kinds(tp, kv_bytes)
            .iter()
            .map(|k| {
                let capped = match k.window {
                    Some(w) if !k.kv_per_token => k.kv_bytes_per_token * (w + block_size as f64),
                    _ => 0.0,
                };
                k.layers * share * (capped + k.state_bytes_per_seq)
            })
            .sum()
    }

    /// KV bytes per cached token of one layer on one GPU of a `tp`-way
    /// replica: keys and values of ⌈num_kv_heads / tp⌉ heads, or MLA's latent
    /// and rotary key (replicated on every GPU).
    fn kv_bytes_per_token_layer(&self, tp: f64, bytes: f64) -> f64 {
        match &self.mla {
            // The index keys stay FP8 whatever the latent's format.
            Some(m) => {
                (m.kv_lora_rank + m.qk_rope_head_dim) as f64 * bytes
                    + m.indexer.as_ref().map_or(0.0, SparseIndexer::bytes_per_token)
            }
            None => 2.0 * (self.num_kv_heads as f64 / tp).ceil() * self.head_dim as f64 * bytes,
        }
    }

    /// Parameters of the routed experts of all layers.
    pub fn routed_expert_params(&self) -> f64 {
        self.moe_layers() as f64 * self.num_experts as f64 * self.ffn_params_per_expert()
    }

    /// Bytes per weight of the routed experts given `model.dtype`'s `bytes`.
    pub fn expert_bytes_per_weight(&self, bytes: f64) -> f64 {
        self.expert_weight_bits.map_or(bytes, |b| b / 8.0)
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
    ///
    /// Only the layers whose KV grows with the sequence count: not the
    /// linear-attention layers, nor the sliding layers of a model that sets
    /// `sliding_window_layers` (see [`LlmSpec::seq_state_bytes`]).
    pub fn kv_bytes_per_token(&self, layers: f64, tp: f64, bytes: f64) -> f64 {
        let capped = self.linear_attention.as_ref().map_or(0, |l| l.layers)
            + if self.sliding_window.is_some() { self.sliding_window_layers.unwrap_or(0) } else { 0 };
        let layers =
            if capped == 0 { layers } else { layers * (self.num_layers - capped) as f64 / self.num_layers as f64 };
        if self.mla.is_some() {
            return layers * self.kv_bytes_per_token_layer(tp, bytes);
        }
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
        let lin = self.linear_attention.as_ref().map_or(0, |l| l.layers);
        if let Some(sl) = self.sliding_window_layers {
            if self.sliding_window.is_none() {
                return Err("`sliding_window_layers` is set but `sliding_window` is not; set the window too".into());
            }
            if sl == 0 || sl + lin > self.num_layers {
                return Err(format!(
                    "`sliding_window_layers` must be between 1 and the {} softmax-attention layers, got {sl}",
                    self.num_layers - lin
                ));
            }
        }
        if let Some(la) = &self.linear_attention {
            let dims = [la.layers, la.key_heads, la.value_heads, la.key_head_dim, la.value_head_dim, la.conv_kernel];
            if dims.contains(&0) {
                return Err("every `[linear_attention]` size must be a positive integer".into());
            }
            if la.layers >= self.num_layers {
                return Err(format!(
                    "`linear_attention.layers` ({}) must be fewer than `num_layers` ({}): hybrid models keep some \
                     softmax-attention layers",
                    la.layers, self.num_layers
                ));
            }
            if !(la.state_bytes == 2.0 || la.state_bytes == 4.0) {
                return Err(format!(
                    "`linear_attention.state_bytes` must be 2 (BF16) or 4 (FP32), got {}",
                    la.state_bytes
                ));
            }
        }
        if let Some(m) = &self.mla
            && [m.kv_lora_rank, m.qk_nope_head_dim, m.qk_rope_head_dim, m.v_head_dim].contains(&0)
        {
            return Err("`[mla]` needs positive kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim".into());
        }
        if let Some(b) = self.expert_weight_bits
            && (!self.is_moe() || !(1.0..=16.0).contains(&b))
        {
            return Err(format!(
                "`expert_weight_bits` ({b}) must be between 1 and 16 and needs an MoE model (num_experts > 0)"
            ));
        }
        Ok(())
    }
}
