//! Microbenchmark kernels for the CPU ceilings: FMA chains for the peak FLOP rate and streaming
//! loads for bandwidth, in the widest SIMD the CPU has (chosen at run time), and the narrow
//! precisions' multiply-adds on the units that have them ([`narrow`]).
//!
//! Every kernel's result is a checksum that equals the work it claims: a FLOP kernel updates
//! `acc = acc × 1 + 1` in every lane of every accumulator, so the lanes sum to the number of
//! updates (and FLOPs = 2 × updates); a load kernel sums a buffer of ones, so the sum is the
//! number of elements loaded (bytes = elements × element size). Tests check the counts on
//! whatever the machine runs, aarch64 under qemu included.

use std::hint::black_box;

/// A precision of the compute roofs: three floating-point widths, bfloat16 and 8-bit integers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    Fp64,
    Fp32,
    Fp16,
    Bf16,
    Int8,
}

impl Precision {
    /// Every precision, widest first.
    pub const ALL: [Precision; 5] = [
        Precision::Fp64,
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Int8,
    ];

    /// The precisions a model can run in, as a config names them.
    pub const OF_MODELS: [Precision; 4] = [
        Precision::Fp32,
        Precision::Fp16,
        Precision::Bf16,
        Precision::Int8,
    ];

    /// A precision a model can run in, from its name (`fp32`, `fp16`, `bf16`, `int8`).
    pub fn of_models(name: &str) -> Option<Precision> {
        Precision::OF_MODELS
            .into_iter()
            .find(|p| p.to_string() == name)
    }

    /// Bytes of one number.
    pub fn bytes(self) -> usize {
        match self {
            Precision::Fp64 => 8,
            Precision::Fp32 => 4,
            Precision::Fp16 | Precision::Bf16 => 2,
            Precision::Int8 => 1,
        }
    }

    /// What its work is counted in: floating-point operations, or integer operations (OPs).
    pub fn op(self) -> &'static str {
        match self {
            Precision::Int8 => "OP",
            _ => "FLOP",
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::Fp64 => "fp64",
            Precision::Fp32 => "fp32",
            Precision::Fp16 => "fp16",
            Precision::Bf16 => "bf16",
            Precision::Int8 => "int8",
        })
    }
}

/// The instruction set a kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isa {
    Avx512,
    Avx2Fma,
    Sse2,
    Neon,
    /// Plain Rust loops, vectorised as the compiler's baseline allows.
    Portable,
}

impl std::fmt::Display for Isa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Isa::Avx512 => "AVX-512",
            Isa::Avx2Fma => "AVX2+FMA",
            Isa::Sse2 => "SSE2",
            Isa::Neon => "NEON",
            Isa::Portable => "portable",
        })
    }
}

/// The ISAs this CPU can run, widest first.
// One push per ISA found, under the target's cfg: on aarch64 only the unconditional ones remain.
#[allow(clippy::vec_init_then_push)]
pub fn available_isas() -> Vec<Isa> {
    let mut isas = Vec::new();
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            isas.push(Isa::Avx512);
        }
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            isas.push(Isa::Avx2Fma);
        }
        isas.push(Isa::Sse2);
    }
    #[cfg(target_arch = "aarch64")]
    isas.push(Isa::Neon);
    isas.push(Isa::Portable);
    isas
}

/// The widest ISA available.
pub fn best_isa() -> Isa {
    available_isas().first().copied().unwrap_or(Isa::Portable)
}

/// Runs `rounds` rounds of the fp64 FMA kernel; returns the checksum (the number of lane
/// updates) and the FLOPs it claims.
pub fn fma_f64(isa: Isa, rounds: u64) -> (f64, u64) {
    let (a, b) = (black_box(1.0f64), black_box(1.0f64));
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: each arm runs only when `available_isas` found its feature on this CPU.
        Isa::Avx512 if has(isa) => unsafe { x86::fma_f64_avx512(rounds, a, b) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if has(isa) => unsafe { x86::fma_f64_avx2(rounds, a, b) },
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => x86::muladd_f64_sse2(rounds, a, b),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => arm::fma_f64_neon(rounds, a, b),
        _ => portable_f64(rounds, a, b),
    }
}

/// Runs the fp32 FMA kernel; as [`fma_f64`].
pub fn fma_f32(isa: Isa, rounds: u64) -> (f64, u64) {
    let (a, b) = (black_box(1.0f32), black_box(1.0f32));
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in fma_f64.
        Isa::Avx512 if has(isa) => unsafe { x86::fma_f32_avx512(rounds, a, b) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if has(isa) => unsafe { x86::fma_f32_avx2(rounds, a, b) },
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => x86::muladd_f32_sse2(rounds, a, b),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => arm::fma_f32_neon(rounds, a, b),
        _ => portable_f32(rounds, a, b),
    }
}

/// Sums `data` `passes` times with streaming loads; returns the checksum (the elements loaded
/// when `data` holds ones) and the bytes it claims to have read.
pub fn load_f64(isa: Isa, data: &[f64], passes: u64) -> (f64, u64) {
    let sum = match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as in fma_f64.
        Isa::Avx512 if has(isa) => unsafe { x86::sum_avx512(data, passes) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma if has(isa) => unsafe { x86::sum_avx2(data, passes) },
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => x86::sum_sse2(data, passes),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => arm::sum_neon(data, passes),
        _ => (0..passes).map(|_| portable_sum(black_box(data))).sum(),
    };
    (sum, passes * std::mem::size_of_val(data) as u64)
}

#[cfg(target_arch = "x86_64")]
fn has(isa: Isa) -> bool {
    available_isas().contains(&isa)
}

/// Independent accumulators: enough to hide FMA latency (4–5 cycles) on two pipes.
const ACC: usize = 12;

/// Twelve named dependency chains (as many as [`ACC`]), each stepped by `$step` `$rounds` times;
/// the chains come back as an array. Named variables rather than an array walked by an inner
/// loop: they stay in registers at every optimisation level, where an array needs that loop
/// unrolled, which LLVM does not do when it optimises for size.
macro_rules! twelve_chains {
    ($rounds:expr, $init:expr, |$x:ident| $step:expr) => {{
        let i = $init;
        let (mut c0, mut c1, mut c2, mut c3, mut c4, mut c5) = (i, i, i, i, i, i);
        let (mut c6, mut c7, mut c8, mut c9, mut c10, mut c11) = (i, i, i, i, i, i);
        for _ in 0..$rounds {
            c0 = {
                let $x = c0;
                $step
            };
            c1 = {
                let $x = c1;
                $step
            };
            c2 = {
                let $x = c2;
                $step
            };
            c3 = {
                let $x = c3;
                $step
            };
            c4 = {
                let $x = c4;
                $step
            };
            c5 = {
                let $x = c5;
                $step
            };
            c6 = {
                let $x = c6;
                $step
            };
            c7 = {
                let $x = c7;
                $step
            };
            c8 = {
                let $x = c8;
                $step
            };
            c9 = {
                let $x = c9;
                $step
            };
            c10 = {
                let $x = c10;
                $step
            };
            c11 = {
                let $x = c11;
                $step
            };
        }
        let chains: [_; $crate::collect::kernels::ACC] =
            [c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11];
        chains
    }};
}

pub mod narrow;
pub use narrow::Unit;

fn portable_f64(rounds: u64, a: f64, b: f64) -> (f64, u64) {
    let acc = twelve_chains!(rounds, 0.0f64, |x| x.mul_add(a, b));
    (acc.iter().sum(), rounds * ACC as u64 * 2)
}

fn portable_f32(rounds: u64, a: f32, b: f32) -> (f64, u64) {
    let acc = twelve_chains!(rounds, 0.0f32, |x| x.mul_add(a, b));
    (
        acc.iter().map(|&x| f64::from(x)).sum(),
        rounds * ACC as u64 * 2,
    )
}

fn portable_sum(data: &[f64]) -> f64 {
    let mut acc = [0.0f64; 8];
    let chunks = data.chunks_exact(8);
    let rest: f64 = chunks.remainder().iter().sum();
    for c in chunks {
        for (a, x) in acc.iter_mut().zip(c) {
            *a += x;
        }
    }
    acc.iter().sum::<f64>() + rest
}

/// Generates a SIMD FMA kernel: `$acc` accumulators of `$vec`, lanes summed at the end.
macro_rules! simd_fma_kernel {
    ($name:ident, $feature:literal, $elem:ty, $lanes:expr, $vec:ty, $splat:expr, $fma:expr, $store:expr) => {
        #[target_feature(enable = $feature)]
        pub unsafe fn $name(rounds: u64, a: $elem, b: $elem) -> (f64, u64) {
            const N: usize = super::ACC;
            let va: $vec = $splat(a);
            let vb: $vec = $splat(b);
            let zero: $vec = $splat(0.0);
            let acc = twelve_chains!(rounds, zero, |x| $fma(x, va, vb));
            let mut sum = 0.0f64;
            for x in acc {
                let mut lanes = [0.0 as $elem; $lanes];
                $store(lanes.as_mut_ptr(), x);
                sum += lanes.iter().map(|&v| f64::from(v)).sum::<f64>();
            }
            (sum, rounds * (N * $lanes) as u64 * 2)
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    simd_fma_kernel!(
        fma_f64_avx512,
        "avx512f",
        f64,
        8,
        __m512d,
        _mm512_set1_pd,
        _mm512_fmadd_pd,
        _mm512_storeu_pd
    );
    simd_fma_kernel!(
        fma_f32_avx512,
        "avx512f",
        f32,
        16,
        __m512,
        _mm512_set1_ps,
        _mm512_fmadd_ps,
        _mm512_storeu_ps
    );
    simd_fma_kernel!(
        fma_f64_avx2,
        "avx2,fma",
        f64,
        4,
        __m256d,
        _mm256_set1_pd,
        _mm256_fmadd_pd,
        _mm256_storeu_pd
    );
    simd_fma_kernel!(
        fma_f32_avx2,
        "avx2,fma",
        f32,
        8,
        __m256,
        _mm256_set1_ps,
        _mm256_fmadd_ps,
        _mm256_storeu_ps
    );

    /// SSE2 has no FMA: a multiply then an add, still 2 FLOPs per lane update.
    pub fn muladd_f64_sse2(rounds: u64, a: f64, b: f64) -> (f64, u64) {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        unsafe { muladd_f64_sse2_inner(rounds, a, b) }
    }
    simd_fma_kernel!(
        muladd_f64_sse2_inner,
        "sse2",
        f64,
        2,
        __m128d,
        _mm_set1_pd,
        |x, a, b| _mm_add_pd(_mm_mul_pd(x, a), b),
        _mm_storeu_pd
    );

    pub fn muladd_f32_sse2(rounds: u64, a: f32, b: f32) -> (f64, u64) {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        unsafe { muladd_f32_sse2_inner(rounds, a, b) }
    }
    simd_fma_kernel!(
        muladd_f32_sse2_inner,
        "sse2",
        f32,
        4,
        __m128,
        _mm_set1_ps,
        |x, a, b| _mm_add_ps(_mm_mul_ps(x, a), b),
        _mm_storeu_ps
    );

    /// Generates a streaming-sum kernel with 8 vector accumulators kept in registers, `passes`
    /// times over `data`.
    macro_rules! sum_kernel {
        ($name:ident, $feature:literal, $lanes:expr, $vec:ty, $zero:expr, $load:expr, $add:expr, $store:expr) => {
            #[target_feature(enable = $feature)]
            pub unsafe fn $name(data: &[f64], passes: u64) -> f64 {
                // Sixteen loads a block, added pairwise into eight chains: the loads, not the
                // latency of the add chains, set the pace.
                const STEP: usize = 16 * $lanes;
                let blocks = data.len() / STEP;
                let mut sum = 0.0f64;
                // The accumulators live across passes: at L1 sizes a pass is only a few dozen
                // cycles, and a reduction per pass would cost as much as the loads.
                let (mut a0, mut a1, mut a2, mut a3) = ($zero(), $zero(), $zero(), $zero());
                let (mut a4, mut a5, mut a6, mut a7) = ($zero(), $zero(), $zero(), $zero());
                for _ in 0..passes {
                    let data = std::hint::black_box(data);
                    let mut p = data.as_ptr();
                    for _ in 0..blocks {
                        // SAFETY: each block reads STEP elements, and blocks * STEP <= len.
                        unsafe {
                            let pair = |k: usize| {
                                $add(
                                    $load(p.add(2 * k * $lanes)),
                                    $load(p.add((2 * k + 1) * $lanes)),
                                )
                            };
                            a0 = $add(a0, pair(0));
                            a1 = $add(a1, pair(1));
                            a2 = $add(a2, pair(2));
                            a3 = $add(a3, pair(3));
                            a4 = $add(a4, pair(4));
                            a5 = $add(a5, pair(5));
                            a6 = $add(a6, pair(6));
                            a7 = $add(a7, pair(7));
                            p = p.add(STEP);
                        }
                    }
                    sum += data[blocks * STEP..].iter().sum::<f64>();
                }
                let total = $add(
                    $add($add(a0, a1), $add(a2, a3)),
                    $add($add(a4, a5), $add(a6, a7)),
                );
                let mut lanes = [0.0f64; $lanes];
                unsafe { $store(lanes.as_mut_ptr(), total) };
                sum + lanes.iter().sum::<f64>()
            }
        };
    }
    sum_kernel!(
        sum_avx512,
        "avx512f",
        8,
        __m512d,
        _mm512_setzero_pd,
        _mm512_loadu_pd,
        _mm512_add_pd,
        _mm512_storeu_pd
    );
    sum_kernel!(
        sum_avx2,
        "avx2",
        4,
        __m256d,
        _mm256_setzero_pd,
        _mm256_loadu_pd,
        _mm256_add_pd,
        _mm256_storeu_pd
    );
    pub fn sum_sse2(data: &[f64], passes: u64) -> f64 {
        // SAFETY: SSE2 is part of the x86_64 baseline.
        unsafe { sum_sse2_inner(data, passes) }
    }
    sum_kernel!(
        sum_sse2_inner,
        "sse2",
        2,
        __m128d,
        _mm_setzero_pd,
        _mm_loadu_pd,
        _mm_add_pd,
        _mm_storeu_pd
    );
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use std::arch::aarch64::*;

    // NEON is part of the aarch64 baseline, so these are safe to call on any aarch64 CPU.
    simd_fma_kernel!(
        fma_f64_neon_inner,
        "neon",
        f64,
        2,
        float64x2_t,
        vdupq_n_f64,
        |x, a, b| vfmaq_f64(b, x, a),
        vst1q_f64
    );
    simd_fma_kernel!(
        fma_f32_neon_inner,
        "neon",
        f32,
        4,
        float32x4_t,
        vdupq_n_f32,
        |x, a, b| vfmaq_f32(b, x, a),
        vst1q_f32
    );

    pub fn fma_f64_neon(rounds: u64, a: f64, b: f64) -> (f64, u64) {
        // SAFETY: NEON is baseline on aarch64.
        unsafe { fma_f64_neon_inner(rounds, a, b) }
    }

    pub fn fma_f32_neon(rounds: u64, a: f32, b: f32) -> (f64, u64) {
        // SAFETY: NEON is baseline on aarch64.
        unsafe { fma_f32_neon_inner(rounds, a, b) }
    }

    pub fn sum_neon(data: &[f64], passes: u64) -> f64 {
        // SAFETY: NEON is baseline on aarch64; loads stay within `data` (see below).
        unsafe { sum_neon_inner(data, passes) }
    }

    #[target_feature(enable = "neon")]
    unsafe fn sum_neon_inner(data: &[f64], passes: u64) -> f64 {
        const STEP: usize = 16;
        let blocks = data.len() / STEP;
        let mut sum = 0.0f64;
        // Eight named accumulators, not an array walked by a loop: see `twelve_chains`.
        let z = vdupq_n_f64(0.0);
        let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
            (z, z, z, z, z, z, z, z);
        for _ in 0..passes {
            let data = std::hint::black_box(data);
            let mut p = data.as_ptr();
            for _ in 0..blocks {
                // SAFETY: each block reads STEP elements, and blocks * STEP <= len.
                unsafe {
                    a0 = vaddq_f64(a0, vld1q_f64(p));
                    a1 = vaddq_f64(a1, vld1q_f64(p.add(2)));
                    a2 = vaddq_f64(a2, vld1q_f64(p.add(4)));
                    a3 = vaddq_f64(a3, vld1q_f64(p.add(6)));
                    a4 = vaddq_f64(a4, vld1q_f64(p.add(8)));
                    a5 = vaddq_f64(a5, vld1q_f64(p.add(10)));
                    a6 = vaddq_f64(a6, vld1q_f64(p.add(12)));
                    a7 = vaddq_f64(a7, vld1q_f64(p.add(14)));
                    p = p.add(STEP);
                }
            }
            sum += data[blocks * STEP..].iter().sum::<f64>();
        }
        for x in [a0, a1, a2, a3, a4, a5, a6, a7] {
            sum += vaddvq_f64(x);
        }
        sum
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_does_exactly_the_work_it_claims() {
        for isa in available_isas() {
            for rounds in [0u64, 1, 7, 1000] {
                let (sum, flops) = fma_f64(isa, rounds);
                assert_eq!(flops as f64, 2.0 * sum, "{isa} fp64, {rounds} rounds");
                let (sum, flops) = fma_f32(isa, rounds);
                assert_eq!(flops as f64, 2.0 * sum, "{isa} fp32, {rounds} rounds");
            }
            // Lengths that are and are not multiples of the unrolled step.
            for len in [0usize, 1, 15, 64, 1000, 4099] {
                let data = vec![1.0f64; len];
                let (sum, bytes) = load_f64(isa, &data, 3);
                assert_eq!(sum, 3.0 * len as f64, "{isa} load, {len} elements");
                assert_eq!(bytes, 3 * 8 * len as u64, "{isa}");
            }
        }
    }

    #[test]
    fn flops_per_round_follow_the_vector_width() {
        let per_round = |isa| fma_f64(isa, 1).1;
        #[cfg(target_arch = "x86_64")]
        assert_eq!(per_round(Isa::Sse2), 2 * 2 * ACC as u64);
        #[cfg(target_arch = "aarch64")]
        assert_eq!(per_round(Isa::Neon), 2 * 2 * ACC as u64);
        assert_eq!(per_round(Isa::Portable), 2 * ACC as u64);
        if available_isas().contains(&Isa::Avx2Fma) {
            assert_eq!(per_round(Isa::Avx2Fma), 4 * 2 * ACC as u64);
            assert_eq!(fma_f32(Isa::Avx2Fma, 1).1, 8 * 2 * ACC as u64);
        }
        if available_isas().contains(&Isa::Avx512) {
            assert_eq!(per_round(Isa::Avx512), 8 * 2 * ACC as u64);
        }
    }
}

/// Asks the kernel to back a large, untouched buffer with transparent huge pages, as streaming
/// benchmarks (STREAM with THP, likwid on `always` systems) get: with 4 KiB pages a DRAM sweep
/// also measures TLB misses. Best effort: ignored where THP is off or the range is small.
fn advise_huge_pages(ptr: *const u8, bytes: usize) {
    const HUGE: usize = 2 << 20;
    #[cfg(target_os = "linux")]
    if bytes >= 2 * HUGE {
        let first = (ptr as usize).div_ceil(HUGE) * HUGE;
        let end = (ptr as usize + bytes) / HUGE * HUGE;
        if end > first {
            // SAFETY: the range lies inside an allocation this process owns; MADV_HUGEPAGE only
            // changes how the kernel backs it, never its contents or validity.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
}

/// A buffer of ones whose first element sits on a cache-line boundary: a vector load that
/// straddles two lines costs two, which would halve the bandwidth measured in L1.
pub struct Ones {
    storage: Vec<f64>,
    start: usize,
    len: usize,
}

impl Ones {
    /// Cache line size assumed for alignment (64 bytes on every x86-64 and Armv8 core edgeprof
    /// meets; 128 on Apple's, where 64-byte alignment still avoids most splits).
    const LINE: usize = 64;

    pub fn new(len: usize) -> Ones {
        let total = len + Self::LINE / 8;
        let mut storage: Vec<f64> = Vec::with_capacity(total);
        advise_huge_pages(storage.as_ptr().cast(), total * 8);
        storage.resize(total, 1.0);
        let start = storage
            .as_ptr()
            .align_offset(Self::LINE)
            .min(Self::LINE / 8);
        Ones {
            storage,
            start,
            len,
        }
    }

    pub fn as_slice(&self) -> &[f64] {
        &self.storage[self.start..self.start + self.len]
    }
}

/// One kernel's self-check: the work it claims against the checksum it computed.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct KernelCheck {
    /// The instruction set or unit it ran on.
    pub isa: String,
    pub kernel: &'static str,
    pub claimed: u64,
    pub counted: f64,
    pub ok: bool,
}

/// Runs every kernel of every available ISA and narrow-precision unit on a small, known amount
/// of work and compares the FLOPs, OPs and bytes each claims with what its checksum counted
/// (see the module documentation).
pub fn self_check() -> Vec<KernelCheck> {
    let mut checks = Vec::new();
    let ones = Ones::new(4099);
    let data = ones.as_slice();
    for isa in available_isas() {
        let (sum, flops) = fma_f64(isa, 1000);
        let isa_name = isa.to_string();
        checks.push(KernelCheck {
            isa: isa_name.clone(),
            kernel: "fp64 FMA (FLOPs)",
            claimed: flops,
            counted: 2.0 * sum,
            ok: flops as f64 == 2.0 * sum,
        });
        let (sum, flops) = fma_f32(isa, 1000);
        checks.push(KernelCheck {
            isa: isa_name.clone(),
            kernel: "fp32 FMA (FLOPs)",
            claimed: flops,
            counted: 2.0 * sum,
            ok: flops as f64 == 2.0 * sum,
        });
        let (sum, bytes) = load_f64(isa, data, 3);
        checks.push(KernelCheck {
            isa: isa_name,
            kernel: "fp64 load (bytes)",
            claimed: bytes,
            counted: 8.0 * sum,
            ok: bytes as f64 == 8.0 * sum,
        });
    }
    for &unit in Unit::of_this_architecture() {
        // 1000 rounds: fp16 accumulators are exact to 2048.
        if let Some((sum, ops)) = unit.run(1000) {
            checks.push(KernelCheck {
                isa: unit.to_string(),
                kernel: match unit.precision() {
                    Precision::Int8 => "int8 multiply-add (OPs)",
                    Precision::Bf16 => "bf16 multiply-add (FLOPs)",
                    _ => "fp16 FMA (FLOPs)",
                },
                claimed: ops,
                counted: 2.0 * sum,
                ok: ops as f64 == 2.0 * sum,
            });
        }
    }
    checks
}
