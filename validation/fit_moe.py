#!/usr/bin/env python3
"""Fits the fused-MoE constants of the GPU files' [kernels] tables for
TensorRT-LLM's CUTLASS MoE kernels (cutlass_moe_efficiency,
cutlass_moe_stream_efficiency, cutlass_moe_latency_us) to NVIDIA
AIConfigurator's TensorRT-LLM MoE tables.

The tables are parquet files that are not copied into this repository (they
are large); point the script at a checkout of ai-dynamo/aiconfigurator at
commit 095f58a5:

    python3 validation/fit_moe.py /path/to/aiconfigurator

Needs numpy, scipy and pyarrow; nothing in servesim or its tests runs it.

The formula is src/cost/kernel.rs Kernels::moe (docs/cost-model.md): for t
tokens routed to top-k of E experts (balanced), touched = E(1 - (1 - k/E)^t)
experts each run ceil(rows per expert / 32) * 32 rows of the gate/up and down
GEMMs; time = latency + smax(compute at peak x efficiency, the touched
experts' weights and the rows' activations at bandwidth x stream efficiency).
Rows: BF16, balanced routing (A100: power_law_1.01, the only one measured),
no expert parallelism, expert tp 1-8 (the intermediate width divided by tp).
Least squares on log(predicted / measured).
"""
import os, sys
import numpy as np, pyarrow.parquet as pq
from scipy.optimize import least_squares

# (system, TensorRT-LLM version, kernel source, routing, BF16 TFLOP/s, GB/s as AIConfigurator lists them)
SYSTEMS = [
    ('a100_sxm', '1.0.0', 'moe_torch_flow', 'power_law_1.01', 312, 2039),
    ('h100_sxm', '1.3.0rc20', 'moe_torch_flow_cutlass', 'balanced', 989, 3350),
    ('h200_sxm', '1.3.0rc20', 'moe_torch_flow_cutlass', 'balanced', 989, 4800),
    ('b200_sxm', '1.3.0rc20', 'moe_torch_flow_cutlass', 'balanced', 2250, 7700),
    ('l40s', '1.3.0rc20', 'moe_torch_flow_cutlass', 'balanced', 362, 864),
]


def rows(root, system, version, source, routing):
    path = os.path.join(root, 'aic-core/src/aiconfigurator_core/systems/data', system, 'moe/trtllm', version,
                        'moe_perf.parquet')
    d = pq.read_table(path).to_pydict()
    keep = [i for i in range(len(d['latency']))
            if d['moe_dtype'][i] == 'bfloat16' and d['distribution'][i] == routing and d['moe_ep_size'][i] == 1
            and d['kernel_source'][i] == source and d['moe_tp_size'][i] <= 8]
    cols = ['num_tokens', 'hidden_size', 'inter_size', 'topk', 'num_experts', 'moe_tp_size', 'latency']
    return {c: np.array([d[c][i] for i in keep], dtype=float) for c in cols}


def predict(p, d, peak, bw):
    eff, stream, lat = p
    t, h, k, e = d['num_tokens'], d['hidden_size'], d['topk'], d['num_experts']
    f = d['inter_size'] / d['moe_tp_size']
    touched = e * (1 - (1 - k / e) ** t)
    r = t * k
    padded = np.ceil(r / touched / 32) * 32
    params = 3 * h * f
    compute = 2 * touched * padded * params / (peak * 1e12 * eff)
    stream_t = (touched * params * 2 + r * (2 * h + 2 * f) * 2) / (bw * 1e9 * stream)
    return (lat * 1e-6 + (compute ** 3 + stream_t ** 3) ** (1 / 3)) * 1e3


def main(root):
    for system, version, source, routing, peak, bw in SYSTEMS:
        d = rows(root, system, version, source, routing)
        res = lambda p: np.log(predict(p, d, peak, bw) / d['latency'])
        fit = least_squares(res, [0.3, 0.8, 20], bounds=([0.02, 0.1, 0], [1.5, 1.5, 200]))
        err = np.abs(np.exp(res(fit.x)) - 1)
        print(f'{system:9} efficiency {fit.x[0]:.3f} stream {fit.x[1]:.3f} latency {fit.x[2]:5.1f} us; '
              f'median |error| {np.median(err) * 100:.1f} % over {len(err)} rows')


if __name__ == '__main__':
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
