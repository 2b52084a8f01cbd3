#!/usr/bin/env bash
# Reproduces the fitted values of models/engine/vllm-v1.toml (docs/engines.md,
# "How the shipped overheads were fitted"). Run from the repository root after
# `cargo build --release`; writes output/calibrate-vllm-v1-dense/ and
# output/calibrate-vllm-v1/, whose engine/vllm-v1.toml holds the values shipped.
#
# Stage 1 -- dense kernels and request handling, on the five Qwen3-14B BF16 vLLM
# blocks of GPUStack's A100 runs (ShareGPT and random 32K/4K/2K/128 prompts):
# the API server's per-request time (one worker), the per-sequence step cost and
# how much slower served steps run their GEMMs than the isolated kernel timings
# the GPU's [kernels] were fitted to.
# Stage 2 -- served fused-MoE layers against their isolated timings, on the GLM-4.5-Air and Qwen3-235B BF16 vLLM blocks.
# Everything else in validation/data/gpustack_blocks_corrected.csv (Qwen3-32B,
# FP8 and AWQ checkpoints, Qwen3-235B FP8 at TP4, GLM-4.6 FP8, SGLang and
# TensorRT-LLM) stays held out; `servesim validate` reports the two apart.
set -euo pipefail
bin=${SERVESIM:-./target/release/servesim}
$bin calibrate validation:gpustack-serve --preset vllm-v1 \
  --rows "qwen3-14b #1 vLLM" --rows "qwen3-14b #8 " --rows "qwen3-14b #9 " \
  --rows "qwen3-14b #10 " --rows "qwen3-14b #11 " \
  --fit engine.preprocess_ms,per_seq_overhead_ms,gemm_efficiency_scale \
  --name vllm-v1-dense --out output/calibrate-vllm-v1-dense
$bin calibrate validation:gpustack-serve --models output/calibrate-vllm-v1-dense --preset vllm-v1-dense \
  --rows "glm-4.5-air #1 " --rows "glm-4.5-air #7 " --rows "glm-4.5-air #8 " \
  --rows "glm-4.5-air #9 " --rows "glm-4.5-air #10 " \
  --rows "qwen3-235b-a22b #1 " --rows "qwen3-235b-a22b #8 " --rows "qwen3-235b-a22b #9 " \
  --rows "qwen3-235b-a22b #10 " --rows "qwen3-235b-a22b #11 " \
  --fit moe_efficiency_scale --name vllm-v1 --out output/calibrate-vllm-v1
