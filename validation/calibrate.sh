#!/usr/bin/env bash
# Reproduces the fitted values of the shipped engine profiles (docs/engines.md,
# "How the shipped overheads were fitted"). Run from the repository root after
# `cargo build --release`; each run writes output/calibrate-<name>/ whose
# engine/<name>.toml and calibration.json hold the values shipped (a value a
# profile keeps in a [[rules]] table for H100/H200 is noted at its run). The
# rows each run names are marked `fitted` in `servesim validate`; the others
# are held out. Runs that start from the shipped profile reproduce its values.
#
# Stage 0 (H100, Step 11) -- host-side costs of vLLM 0.11, SGLang 0.5 and
# TensorRT-LLM 1.x on GPUStack's H100 blocks, fitted on Qwen3-14B and Qwen3-8B
# (Qwen3-32B for TensorRT-LLM, the only model with enough of its blocks);
# GLM-4.5-Air, GLM-4.6, Qwen3-235B and the other engines' pages are held out.
#
# Stage 1 (A100, Step 5) -- dense kernels and request handling, on the five
# Qwen3-14B BF16 vLLM blocks of GPUStack's A100 runs (ShareGPT and random
# 32K/4K/2K/128 prompts): the per-sequence step cost and how much slower served
# steps run their GEMMs than the isolated kernel timings the GPU's [kernels]
# were fitted to. (It also fitted the API server's time, 20.5 ms; Step 11
# replaced that and the step cost by stage 0's H100 values, which predict these
# five blocks within 2.8 % median with the A100 GEMM scale kept.)
# Stage 2 -- served fused-MoE layers against their isolated timings, on the GLM-4.5-Air and Qwen3-235B BF16 vLLM blocks.
# Everything else in validation/data/gpustack_blocks_corrected.csv (Qwen3-32B,
# FP8 and AWQ checkpoints, Qwen3-235B FP8 at TP4, GLM-4.6 FP8, SGLang and
# TensorRT-LLM) stays held out; `servesim validate` reports the two apart.
set -euo pipefail
bin=${SERVESIM:-./target/release/servesim}
# vLLM on H100: the API server's latency that occupies no worker and the CPU
# time per step (base keys, GPU-independent; the API server's queued time per
# request stays stage 1's), and the served-GEMM scale of the H100/H200 rule. The Qwen3-14B R128 block (#11) is left out: its TPOT is the API server
# streaming behind a burst of tokenisation, which servesim does not model.
$bin calibrate validation:gpustack-serve-h100 --preset vllm-v1 --rows "vLLM" \
  --rows "qwen3-14b #1 |qwen3-14b #8 |qwen3-14b #9 |qwen3-14b #10 |qwen3-8b-latency #" \
  --fit gemm_efficiency_scale,engine.frontend_latency_ms,step_overhead_ms --folds 3 \
  --name vllm-v1-h100 --out output/calibrate-vllm-v1-h100
# SGLang on H100: the HTTP process's time per request, the launch floor of
# eager steps (base keys) and the served-GEMM scale (H100/H200 rule).
$bin calibrate validation:gpustack-serve-h100 --preset sglang --rows "SGLang" \
  --rows "qwen3-14b #|qwen3-8b-latency #" \
  --fit gemm_efficiency_scale,engine.preprocess_ms,eager_launch_us_per_layer --folds 3 \
  --name sglang-h100 --out output/calibrate-sglang-h100
# TensorRT-LLM on H100: the served-GEMM scale (H100/H200 rule); its host
# costs are not determined by these blocks.
$bin calibrate validation:gpustack-serve-h100 --preset trtllm --rows "TensorRT-LLM" \
  --rows "qwen3-32b #" --fit gemm_efficiency_scale --folds 3 \
  --name trtllm-h100 --out output/calibrate-trtllm-h100
$bin calibrate validation:gpustack-serve --preset vllm-v1 \
  --rows "qwen3-14b #1 vLLM|qwen3-14b #8 |qwen3-14b #9 |qwen3-14b #10 |qwen3-14b #11 " \
  --fit engine.preprocess_ms,per_seq_overhead_ms,gemm_efficiency_scale \
  --name vllm-v1-dense --out output/calibrate-vllm-v1-dense
$bin calibrate validation:gpustack-serve --models output/calibrate-vllm-v1-dense --preset vllm-v1-dense \
  --rows "glm-4.5-air #1 |glm-4.5-air #7 |glm-4.5-air #8 |glm-4.5-air #9 |glm-4.5-air #10 |qwen3-235b-a22b #1 |qwen3-235b-a22b #8 |qwen3-235b-a22b #9 |qwen3-235b-a22b #10 |qwen3-235b-a22b #11 " \
  --fit moe_efficiency_scale --name vllm-v1 --out output/calibrate-vllm-v1
# Stage 3 (Step 11) -- MXFP4 experts (gpt-oss) under vLLM: the served 4-bit
# fused-MoE layers against the isolated timings, on GPUStack's A100 gpt-oss
# blocks (both models, every workload); the H100 gpt-oss blocks are held out
# (median 18.5 % with this value, against 55 % with the BF16 MoE scale).
$bin calibrate validation:gpustack-serve --preset vllm-v1 --rows "gpt-oss" --rows "vLLM" \
  --fit w4_moe_efficiency_scale --folds 3 --name vllm-v1-w4 --out output/calibrate-vllm-v1-w4
# vllm-v0-eager -- the host-side costs of vLLM as Splitwise measured it in 2023
# (eager steps: a launch floor per layer, a driver cost per step and per
# sequence), fitted on Llama-2-70B at TP 2 and 4 on DGX-A100; TP 8 is held out
# (servesim validate, data set splitwise).
$bin calibrate validation/data/splitwise_perf_model_a100.csv --preset vllm-v0-eager \
  --rows "tp2|tp4" \
  --fit step_overhead_ms,per_seq_overhead_ms,eager_launch_us_per_layer \
  --name vllm-v0-eager --out output/calibrate-vllm-v0-eager
