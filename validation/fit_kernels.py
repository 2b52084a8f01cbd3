#!/usr/bin/env python3
"""Fits the [kernels] constants of models/gpu/*.toml to NVIDIA AIConfigurator's
kernel timings copied in validation/data/aic/ (see validation/README.md).

The formulas are those of src/cost/kernel.rs (docs/cost-model.md): GEMM as a
smooth maximum (cube norm) of compute on 64-row tiles and weight streaming plus
a launch latency; prefill attention at eff x s/(s + s_half) of the BF16 peak;
decode attention streaming the KV cache plus a per-sequence time; all-reduce as
latency + bytes x 2(tp-1)/tp / bus bandwidth. Least squares on log(predicted /
measured). Needs numpy, pandas and scipy; nothing in servesim runs it:
`python3 validation/fit_kernels.py` prints the constants and their in-sample
error, and `servesim validate --only kernels-gemm` (and -attention, -allreduce,
-held-out-gpu) shows the same fits from the Rust side.

The fused-MoE constants (moe_*) were fitted the same way to AIConfigurator's
moe_perf table (vLLM FusedMoE, bf16, power_law_1.01 routing), which is not
copied here (a 1 MB parquet file; commit and path in the GPU files).

decode_attention_efficiency is capped at 0.95 in the GPU files (the L40S and
B200 fits exceed it: their decode kernels are latency-bound in the measured
range, so the bandwidth term is not identified there).
"""
import json, os, sys
import numpy as np, pandas as pd
from scipy.optimize import least_squares

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data', 'aic')
GPU = {'a100_sxm': (312, 0, 2039),'h100_sxm': (989, 1979, 3350),'h200_sxm': (989, 1979, 4800),'b200_sxm': (2250, 4500, 7700),'l40s': (362, 733, 864)}
FP4 = {'b200_sxm': 9000}  # dense NVFP4 TFLOP/s (models/gpu/b200.toml)
# Bytes per weight and per quantised activation element: FP8 1 (activation: read BF16 2 + write 1);
# NVFP4 4.5 bits (16 E2M1 values share one FP8 scale; activation: read 2 + write 0.5625).
WB = {'bf16': 2.0, 'fp8': 1.0, 'nvfp4': 0.5625}
QB = {'fp8': 3.0, 'nvfp4': 2.5625}
PW=3
def sm(a,b): return (a**PW+b**PW)**(1/PW)
def gemm(p, d, g, dt):
    ec, em, t0 = p[:3]; tq = p[3] if dt in QB else 0
    P,P8,BW = GPU[g]; peak={'bf16': P, 'fp8': P8, 'nvfp4': FP4.get(g, 0)}[dt]*1e12; w=WB[dt]
    m,n,k=[d[c].values.astype(float) for c in 'mnk']
    mpad=np.where(m<64,m,np.ceil(m/64)*64)
    t = sm(2*mpad*n*k/(peak*ec), (n*k*w+m*(n+k)*2)/(BW*1e9*em)) + t0*1e-6
    if dt in QB: t += tq*1e-6 + m*k*QB[dt]/(BW*1e9*em)
    return t*1e3
def ctx(p,d,g):
    ea,t0,s0=p; P,_,BW=GPU[g]
    b,s,h,kvh,hd=[d[c].values.astype(float) for c in ['batch_size','seq_len','num_heads','num_kv_heads','head_dim']]
    kvb=np.where(d.kv_cache_dtype=='fp8',1,2)
    fl=4*h*hd*b*s*(s+1)/2; by=b*s*(h*hd*4+2*kvh*hd*(2+kvb))
    return (sm(fl/(P*1e12*ea*s/(s+s0)), by/(BW*1e9*0.8))+t0*1e-6)*1e3
def gen(p,d,g):
    ed,t0,ps=p; P,_,BW=GPU[g]
    b,L,h,kvh,hd=[d[c].values.astype(float) for c in ['batch_size','kv_len','num_heads','num_kv_heads','head_dim']]
    kvb=np.where(d.kv_cache_dtype=='fp8',1.0,2.0)
    return (sm(b*L*2*kvh*hd*kvb/(BW*1e9*ed), 4*h*hd*b*L/(P*1e12*0.5)) + t0*1e-6 + b*ps*1e-9)*1e3
def fit(f, d, g, x0, lo, hi, *a):
    r = least_squares(lambda p: np.log(f(p,d,g,*a)/d.latency_ms.values), x0, bounds=(lo,hi))
    e = f(r.x,d,g,*a)/d.latency_ms.values-1
    return r.x, e
out={}
for g in GPU:
    o={}
    G = pd.read_csv(f'{DATA}/{g}_gemm.csv'); G=G[(G.n>=1024)&(G.k>=1024)&(G.m<=16384)]
    x,e = fit(gemm, G[G.dtype=='bf16'], g, [0.8,0.8,5],[0.2,0.2,0],[1.2,1.5,40],'bf16')
    o['gemm']=dict(ec=x[0],em=x[1],t0=x[2],med=np.median(abs(e)),p90=np.percentile(abs(e),90),n=len(e))
    if GPU[g][1]:
        x,e = fit(gemm, G[G.dtype=='fp8'], g, [0.6,0.8,5,3],[0.2,0.2,0,0],[1.2,1.5,40,40],'fp8')
        o['fp8']=dict(ec=x[0],em=x[1],t0=x[2],tq=x[3],med=np.median(abs(e)),p90=np.percentile(abs(e),90),n=len(e))
    if g in FP4:
        x,e = fit(gemm, G[G.dtype=='nvfp4'], g, [0.4,0.8,5,3],[0.05,0.2,0,0],[1.2,1.5,40,40],'nvfp4')
        o['nvfp4']=dict(ec=x[0],em=x[1],t0=x[2],tq=x[3],med=np.median(abs(e)),p90=np.percentile(abs(e),90),n=len(e))
    C = pd.read_csv(f'{DATA}/{g}_context_attention.csv'); C=C[(C.kv_cache_dtype=='bf16')&(C.seq_len>=16)]
    x,e = fit(ctx, C, g, [0.5,10,500],[0.05,0,0],[1.5,100,20000])
    o['ctx']=dict(ea=x[0],t0=x[1],s0=x[2],med=np.median(abs(e)),p90=np.percentile(abs(e),90),n=len(e))
    D = pd.read_csv(f'{DATA}/{g}_generation_attention.csv'); D=D[D.kv_cache_dtype=='bf16']
    x,e = fit(gen, D, g, [0.8,10,50],[0.05,0,0],[1.5,100,5000])
    o['gen']=dict(ed=x[0],t0=x[1],ps=x[2],med=np.median(abs(e)),p90=np.percentile(abs(e),90),n=len(e))
    out[g]=o
    print(g, json.dumps({k:{kk:round(float(vv),4) for kk,vv in v.items()} for k,v in o.items()}))

# All-reduce: latency + bytes x 2(tp-1)/tp / bus bandwidth, per tp, custom (CUDA-graph mode) and NCCL.
for g in GPU:
    for kind, f in [('nccl', 'nccl_allreduce'), ('custom', 'custom_allreduce')]:
        d = pd.read_csv(f'{DATA}/{g}_{f}.csv')
        d = d[(d.op == 'all_reduce') & (d.dtype == 'half')] if kind == 'nccl' else d[d['mode'] == 'graph']
        d = d[d.message_bytes <= 64 * 2**20]
        for n in [2, 4, 8]:
            x = d[d.num_gpus == n]
            if len(x) == 0:
                continue
            B = x.message_bytes.values.astype(float); T = x.latency_ms.values * 1e3
            res = lambda p: np.log((p[0] + B * 2 * (n - 1) / n / (p[1] * 1e3)) / T)
            r = least_squares(res, [10, 100], bounds=([0, 1], [1000, 5000]))
            e = np.exp(res(r.x)) - 1
            print(f'{g:9} {kind:6} tp{n}: latency {r.x[0]:6.1f} us, bus bandwidth {r.x[1]:6.0f} GB/s, median |err| {np.median(abs(e))*100:4.1f} %')
