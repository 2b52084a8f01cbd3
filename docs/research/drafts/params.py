# Parameter counts derived from config values (not from checkpoints)
def gptoss(L, E, k, H=2880, I=2880, nh=64, nkv=8, hd=64, V=201088):
    attn = H*(nh*hd + 2*nkv*hd) + (nh*hd + 2*nkv*hd) + nh*hd*H + H + nh  # qkv w+b, o w+b, sinks
    router = H*E + E
    expert = H*2*I + 2*I + I*H + H   # mlp1 (gate+up fused) w+b, mlp2 w+b
    norms = 2*H
    per_layer_total = attn + router + E*expert + norms
    per_layer_active = attn + router + k*expert + norms
    emb = V*H; unemb = V*H
    total = L*per_layer_total + emb + unemb + H
    active = L*per_layer_active + unemb + H  # embedding lookup not counted, like model card
    moe_w = L*E*(H*2*I + I*H)
    return total, active, moe_w, L*attn
for name,L,E in [("gpt-oss-120b",36,128),("gpt-oss-20b",24,32)]:
    t,a,m,at = gptoss(L,E,4)
    # MXFP4: 4 bits + 8-bit scale per 32 values = 4.25 bits
    bytes_ckpt = m*4.25/8 + (t-m)*2
    print(f"{name}: total {t/1e9:.3f}B active {a/1e9:.3f}B moe_mxfp4 {m/1e9:.3f}B ({m/t*100:.1f}%) ckpt~{bytes_ckpt/2**30:.1f} GiB ({bytes_ckpt/1e9:.1f} GB)")
    kv = 2*L*8*64*2
    print(f"   KV bf16 bytes/token (all layers full) {kv}; full layers only {kv//2}; sliding layers capped at 128 tokens")

def lin_attn_gdn(H, nk, dk, nv, dv, conv=4):
    qkv = H*(2*nk*dk + nv*dv); z = H*nv*dv; ba = 2*H*nv
    convw = (2*nk*dk + nv*dv)*conv
    alog_dt = 2*nv; norm = dv
    out = nv*dv*H
    return qkv+z+ba+convw+alog_dt+norm+out
def gated_attn(H, nh, nkv, hd):
    return H*nh*hd*2 + 2*H*nkv*hd + nh*hd*H + 2*hd

# Qwen3.5-9B
H=4096; L=32; full=8; lin=24; V=248320; I=12288
la = lin_attn_gdn(H,16,128,32,128); ga = gated_attn(H,16,4,256); ffn=3*H*I
t = lin*(la+ffn+2*H) + full*(ga+ffn+2*H) + 2*V*H + H
print(f"Qwen3.5-9B text (untied, no MTP/vision): {t/1e9:.3f}B; GDN layer attn {la/1e6:.1f}M, full attn {ga/1e6:.1f}M")
print("  KV bytes/token bf16 (8 full layers):", 2*full*4*256*2)
st = lin*32*128*128; cv = lin*3*(2*16*128+32*128)
print(f"  GDN state per seq: {st} elems = {st*4/2**20:.1f} MiB fp32 / {st*2/2**20:.1f} MiB bf16; conv state {cv} elems = {cv*2/2**20:.2f} MiB bf16")

# Qwen3-Next-80B-A3B
H=2048; L=48; full=12; lin=36; V=151936; E=512; k=10; mi=512; si=512
la = lin_attn_gdn(H,16,128,32,128); ga = gated_attn(H,16,2,256)
moe_total = E*3*H*mi + 3*H*si + H*E + H  # experts + shared + router + shared gate
moe_act = k*3*H*mi + 3*H*si + H*E + H
t = lin*(la+moe_total+2*H) + full*(ga+moe_total+2*H) + 2*V*H + H
a = lin*(la+moe_act+2*H) + full*(ga+moe_act+2*H) + V*H + H
print(f"Qwen3-Next-80B-A3B: total {t/1e9:.2f}B active {a/1e9:.2f}B (no MTP)")
print("  KV bytes/token bf16 (12 full layers):", 2*full*2*256*2)
st = lin*32*128*128; cv = lin*3*(2*16*128+32*128)
print(f"  GDN state per seq: {st} elems = {st*4/2**20:.1f} MiB fp32 / {st*2/2**20:.1f} MiB bf16; conv {cv*2/2**20:.2f} MiB bf16")

# DeepSeek-V3 (MLA)
def mla_attn(H, nh, qr, kvr, nope, rope, vd):
    q = (H*qr + qr + qr*nh*(nope+rope)) if qr else H*nh*(nope+rope)
    kv = H*(kvr+rope) + kvr + kvr*nh*(nope+vd)
    o = nh*vd*H
    return q+kv+o
def ds(H,L,dense,nh,qr,kvr,nope,rope,vd,I,mi,E,k,shared,V,mtp=0, extra_attn=0):
    at = mla_attn(H,nh,qr,kvr,nope,rope,vd) + extra_attn
    dense_l = at + 3*H*I + 2*H
    moe_t = at + E*3*H*mi + shared*3*H*mi + H*E + E + 2*H
    moe_a = at + k*3*H*mi + shared*3*H*mi + H*E + E + 2*H
    t = dense*dense_l + (L-dense)*moe_t + 2*V*H + H
    a = dense*dense_l + (L-dense)*moe_a + V*H + H
    return t,a,at
t,a,at = ds(7168,61,3,128,1536,512,128,64,128,18432,2048,256,8,1,129280)
print(f"DeepSeek-V3: total {t/1e9:.2f}B active {a/1e9:.2f}B; MLA attn/layer {at/1e6:.1f}M")
print("  MLA KV bytes/token/layer bf16:", (512+64)*2, " all 61 layers:", (512+64)*2*61, "; fp8 (576 B/layer):", 576*61)
# MTP module: 1 extra layer (MoE) + eh_proj 2H*H + 2 norms, shares embed & head
mtp = (at + 256*3*7168*2048 + 3*7168*2048 + 7168*256 + 256 + 2*7168) + 2*7168*7168 + 3*7168
print(f"  MTP module approx {mtp/1e9:.2f}B -> total with MTP {(t+mtp)/1e9:.2f}B")
# GLM-5 (MLA + DSA indexer)
H=6144; idx = H*32*128 + 2048*32*128 + H*128 + H*32  # approx indexer: wq_b from q_lora, wk, weights_proj (UNCONFIRMED shapes)
t,a,at = ds(6144,78,3,64,2048,512,192,64,256,12288,2048,256,8,1,154880)
print(f"GLM-5 (without DSA indexer params): total {t/1e9:.2f}B active {a/1e9:.2f}B; MLA KV/token all layers bf16 {(512+64)*2*78}")

# Llama 4
def llama4(L, moe_layers, E, H=5120, nh=40, nkv=8, hd=128, I=8192, Imlp=16384, V=202048):
    at = H*(nh*hd+2*nkv*hd) + nh*hd*H
    moe_t = at + E*3*H*I + 3*H*I + H*E + 2*H
    moe_a = at + 1*3*H*I + 3*H*I + H*E + 2*H
    den = at + 3*H*Imlp + 2*H
    dl = L-moe_layers
    t = moe_layers*moe_t + dl*den + 2*V*H + H
    a = moe_layers*moe_a + dl*den + V*H + H
    return t,a
for n,ml,E in [("Scout",48,16),("Maverick",24,128)]:
    t,a = llama4(48,ml,E)
    print(f"Llama-4-{n}: total text {t/1e9:.2f}B active {a/1e9:.2f}B")
print("Llama4 KV bytes/token/layer bf16:", 2*8*128*2, "; 12 global(NoPE) layers + 36 chunked layers capped at 8192 tokens")
