// edgeprof's GPU ceiling kernels, compiled at run time by NVRTC for the GPU found (see
// src/collect/gpubench/mod.rs). No headers: vector types and the inline PTX below are all
// NVRTC needs, so the source compiles with any CUDA toolkit from 10.2 on.
//
// Peaks: every thread runs CHAINS independent FMA chains (enough to hide the FMA latency at
// full occupancy), unrolled so that loop overhead is under 1 % of the instructions.
// Bandwidth: each block reads its own contiguous chunk of the working set `repeats` times,
// with 16-byte loads; `ld.global.nc` goes through L1 (the read-only/texture path, cached on every
// generation), `ld.global.cg` bypasses L1 and is served by L2 or device memory. Shared memory:
// each block re-reads a 16 KiB tile. Results are stored only when `store` is set (never, in
// practice), which the compiler cannot know, so no work is removed.

#define CHAINS 16
#define TILE 1024
#define BLOCK 256

extern "C" __global__ void peak_fp32(float *out, int iterations, float a, float b, int store) {
    float x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = (float)(threadIdx.x + k);
#pragma unroll 8
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int k = 0; k < CHAINS; ++k) x[k] = fmaf(x[k], a, b);
    }
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) sum += x[k];
    if (store) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

extern "C" __global__ void peak_fp64(double *out, int iterations, double a, double b, int store) {
    double x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = (double)(threadIdx.x + k);
#pragma unroll 8
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int k = 0; k < CHAINS; ++k) x[k] = fma(x[k], a, b);
    }
    double sum = 0.0;
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) sum += x[k];
    if (store) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Two half-precision FMAs per instruction (fma.rn.f16x2 needs compute capability 5.3; older
// targets compile a stand-in that is never launched, so that the module still loads there).
// `a` and `b` are half2 bit patterns.
extern "C" __global__ void peak_fp16(unsigned int *out, int iterations, unsigned int a,
                                     unsigned int b, int store) {
    unsigned int x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = 0x3c003c00u + (unsigned int)k;
#pragma unroll 8
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int k = 0; k < CHAINS; ++k)
#if __CUDA_ARCH__ >= 530
            asm("fma.rn.f16x2 %0, %0, %1, %2;" : "+r"(x[k]) : "r"(a), "r"(b));
#else
            x[k] = x[k] * a + b;
#endif
    }
    unsigned int sum = 0;
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) sum ^= x[k];
    if (store) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Four int8 products summed into an int32 per instruction (dp4a, compute capability 6.1 and
// later; older targets compile a stand-in that is never launched). `a` and `b` are four int8
// lanes each, chosen so that the sums cancel: the accumulators never overflow.
extern "C" __global__ void peak_int8(int *out, int iterations, int a, int b, int store) {
    int x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = (int)(threadIdx.x + k);
#pragma unroll 8
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int k = 0; k < CHAINS; ++k)
#if __CUDA_ARCH__ >= 610
            asm("dp4a.s32.s32 %0, %1, %2, %0;" : "+r"(x[k]) : "r"(a), "r"(b));
#else
            x[k] += a * b;
#endif
    }
    int sum = 0;
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) sum ^= x[k];
    if (store) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Tensor-core peaks: every warp runs TC_CHAINS independent chains of warp-wide matrix
// multiply-adds (mma.sync), each accumulating into its own fragment, with the shapes of compute
// capability 8.0 and later: m16n8k16 for fp16 and bf16 (2 048 multiply-adds per warp
// instruction) and m16n8k32 for int8 (4 096). Every thread passes the same 32-bit pattern for
// each register of A and of B. Older targets compile a stand-in that is never launched.
#define TC_CHAINS 4

#define TC_HALF_KERNEL(NAME, TYPE)                                                              \
    extern "C" __global__ void NAME(float *out, int iterations, unsigned int a, unsigned int b, \
                                    int store) {                                               \
        float d[TC_CHAINS][4];                                                                 \
        _Pragma("unroll") for (int k = 0; k < TC_CHAINS; ++k) {                                \
            _Pragma("unroll") for (int j = 0; j < 4; ++j) d[k][j] = (float)(threadIdx.x + j);   \
        }                                                                                      \
        TC_HALF_LOOP(TYPE)                                                                     \
        float sum = 0.0f;                                                                      \
        _Pragma("unroll") for (int k = 0; k < TC_CHAINS; ++k) {                                \
            _Pragma("unroll") for (int j = 0; j < 4; ++j) sum += d[k][j];                       \
        }                                                                                      \
        if (store) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;                           \
    }

#if __CUDA_ARCH__ >= 800
#define TC_HALF_LOOP(TYPE)                                                                      \
    _Pragma("unroll 4") for (int i = 0; i < iterations; ++i) {                                 \
        _Pragma("unroll") for (int k = 0; k < TC_CHAINS; ++k)                                  \
            asm("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 "                 \
                "{%0, %1, %2, %3}, {%4, %4, %4, %4}, {%5, %5}, {%0, %1, %2, %3};"              \
                : "+f"(d[k][0]), "+f"(d[k][1]), "+f"(d[k][2]), "+f"(d[k][3])                   \
                : "r"(a), "r"(b));                                                             \
    }
#else
#define TC_HALF_LOOP(TYPE)                                                                      \
    for (int i = 0; i < iterations; ++i) d[0][0] += (float)(a ^ b);
#endif

// `a` and `b` are pairs of half-precision (or bfloat16) values near 0.001: the fp32
// accumulators grow by 0.000016 per instruction and never overflow.
TC_HALF_KERNEL(peak_tc_fp16, "f16")
TC_HALF_KERNEL(peak_tc_bf16, "bf16")

// `a` holds the int8 lanes (1, -1, 1, -1) and `b` (1, 1, 1, 1): every row of A is orthogonal
// to every column of B, so the int32 accumulators stay where they started.
extern "C" __global__ void peak_tc_int8(int *out, int iterations, unsigned int a,
                                        unsigned int b, int store) {
    int d[TC_CHAINS][4];
#pragma unroll
    for (int k = 0; k < TC_CHAINS; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) d[k][j] = (int)(threadIdx.x + j);
    }
#if __CUDA_ARCH__ >= 800
#pragma unroll 4
    for (int i = 0; i < iterations; ++i) {
#pragma unroll
        for (int k = 0; k < TC_CHAINS; ++k)
            asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                "{%0, %1, %2, %3}, {%4, %4, %4, %4}, {%5, %5}, {%0, %1, %2, %3};"
                : "+r"(d[k][0]), "+r"(d[k][1]), "+r"(d[k][2]), "+r"(d[k][3])
                : "r"(a), "r"(b));
    }
#else
    for (int i = 0; i < iterations; ++i) d[0][0] += (int)(a ^ b);
#endif
    int sum = 0;
#pragma unroll
    for (int k = 0; k < TC_CHAINS; ++k) {
#pragma unroll
        for (int j = 0; j < 4; ++j) sum ^= d[k][j];
    }
    if (store) out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Four 16-byte loads per thread are issued before their sums, so each warp keeps four in flight.
#define LOAD4(CACHE_OP, P, X, Y, Z, W)                                                          \
    asm volatile("ld.global." CACHE_OP ".v4.f32 {%0, %1, %2, %3}, [%4];"                       \
                 : "=f"(X), "=f"(Y), "=f"(Z), "=f"(W)                                          \
                 : "l"(P))

// Launched with BLOCK threads; per_block (float4s) is a multiple of 4 * BLOCK.
#define LOAD_KERNEL(NAME, CACHE_OP)                                                             \
    extern "C" __global__ void NAME(const float4 *data, unsigned int per_block, int repeats,   \
                                    float *out, int store) {                                   \
        const float4 *mine = data + (unsigned long long)blockIdx.x * per_block + threadIdx.x;  \
        float ax = 0.0f, ay = 0.0f, az = 0.0f, aw = 0.0f;                                      \
        for (int r = 0; r < repeats; ++r) {                                                    \
            for (unsigned int i = 0; i < per_block; i += 4 * BLOCK) {                          \
                float x0, y0, z0, w0, x1, y1, z1, w1, x2, y2, z2, w2, x3, y3, z3, w3;          \
                LOAD4(CACHE_OP, mine + i, x0, y0, z0, w0);                                     \
                LOAD4(CACHE_OP, mine + i + BLOCK, x1, y1, z1, w1);                             \
                LOAD4(CACHE_OP, mine + i + 2 * BLOCK, x2, y2, z2, w2);                         \
                LOAD4(CACHE_OP, mine + i + 3 * BLOCK, x3, y3, z3, w3);                         \
                ax += (x0 + x1) + (x2 + x3);                                                   \
                ay += (y0 + y1) + (y2 + y3);                                                   \
                az += (z0 + z1) + (z2 + z3);                                                   \
                aw += (w0 + w1) + (w2 + w3);                                                   \
            }                                                                                  \
        }                                                                                      \
        if (store) out[blockIdx.x * BLOCK + threadIdx.x] = ax + ay + az + aw;                  \
    }

LOAD_KERNEL(load_l1, "nc")
LOAD_KERNEL(load_l2, "cg")

// Launched with BLOCK threads: each reads TILE / BLOCK = 4 float4s of the tile per repeat.
extern "C" __global__ void shared_read(int repeats, float *out, int store) {
    __shared__ float4 tile[TILE];
    for (unsigned int i = threadIdx.x; i < TILE; i += BLOCK)
        tile[i] = make_float4((float)i, (float)(i + 1), (float)(i + 2), (float)(i + 3));
    __syncthreads();
    float ax = 0.0f, ay = 0.0f, az = 0.0f, aw = 0.0f;
    for (int r = 0; r < repeats; ++r) {
#pragma unroll
        for (unsigned int i = threadIdx.x; i < TILE; i += BLOCK) {
            float4 v = tile[(i + (unsigned int)r) & (TILE - 1)];
            ax += v.x;
            ay += v.y;
            az += v.z;
            aw += v.w;
        }
    }
    if (store) out[blockIdx.x * BLOCK + threadIdx.x] = ax + ay + az + aw;
}
