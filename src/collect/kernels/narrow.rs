//! Kernels of the narrow precisions — fp16, bf16 and int8 — on the units that run them:
//! AVX-512 FP16, AVX-512 BF16, AVX-512 VNNI, AVX-VNNI and the AMX tiles on x86-64; FP16 FMLA,
//! BFDOT, SDOT and SMMLA on aarch64. Like the fp64/fp32 kernels, each multiplies ones and adds
//! them to its accumulators, so the accumulators' sum is the number of multiply-adds done and
//! the work claimed is twice that sum. Integer kernels count operations (OPs), not FLOPs.
//!
//! A unit is measured only where the CPU reports it (and, for AMX, where the kernel grants the
//! tile state); elsewhere it is listed as absent with the reason.

use super::{Precision, ACC};

/// Why a unit cannot run on this CPU, in words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Absent(pub String);

/// A unit that runs a narrow precision, named by the instructions it uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Avx512Fp16,
    Avx512Bf16,
    AmxBf16,
    Avx512Vnni,
    AvxVnni,
    AmxInt8,
    ArmFp16,
    ArmBf16,
    ArmSdot,
    ArmI8mm,
}

impl Unit {
    /// Every unit of the architecture this build runs on.
    pub fn of_this_architecture() -> &'static [Unit] {
        if cfg!(target_arch = "x86_64") {
            &[
                Unit::Avx512Fp16,
                Unit::Avx512Bf16,
                Unit::AmxBf16,
                Unit::Avx512Vnni,
                Unit::AvxVnni,
                Unit::AmxInt8,
            ]
        } else if cfg!(target_arch = "aarch64") {
            &[Unit::ArmFp16, Unit::ArmBf16, Unit::ArmSdot, Unit::ArmI8mm]
        } else {
            &[]
        }
    }

    pub fn precision(self) -> Precision {
        match self {
            Unit::Avx512Fp16 | Unit::ArmFp16 => Precision::Fp16,
            Unit::Avx512Bf16 | Unit::AmxBf16 | Unit::ArmBf16 => Precision::Bf16,
            Unit::Avx512Vnni | Unit::AvxVnni | Unit::AmxInt8 | Unit::ArmSdot | Unit::ArmI8mm => {
                Precision::Int8
            }
        }
    }

    /// The instruction the kernel repeats.
    pub fn instruction(self) -> &'static str {
        match self {
            Unit::Avx512Fp16 => "vfmadd231ph",
            Unit::Avx512Bf16 => "vdpbf16ps",
            Unit::AmxBf16 => "tdpbf16ps",
            Unit::Avx512Vnni | Unit::AvxVnni => "vpdpbusd",
            Unit::AmxInt8 => "tdpbusd",
            Unit::ArmFp16 => "fmla .8h",
            Unit::ArmBf16 => "bfdot",
            Unit::ArmSdot => "sdot",
            Unit::ArmI8mm => "smmla",
        }
    }

    /// The CPU feature it needs, as `/proc/cpuinfo` names it.
    fn feature(self) -> &'static str {
        match self {
            Unit::Avx512Fp16 => "avx512_fp16",
            Unit::Avx512Bf16 => "avx512_bf16",
            Unit::AmxBf16 => "amx_bf16",
            Unit::Avx512Vnni => "avx512_vnni",
            Unit::AvxVnni => "avx_vnni",
            Unit::AmxInt8 => "amx_int8",
            Unit::ArmFp16 => "asimdhp",
            Unit::ArmBf16 => "bf16",
            Unit::ArmSdot => "asimddp",
            Unit::ArmI8mm => "i8mm",
        }
    }

    /// Whether this CPU runs it: `Err` says why not, in words.
    pub fn available(self) -> Result<(), Absent> {
        if !Unit::of_this_architecture().contains(&self) {
            return Err(Absent(format!(
                "{self} is not an instruction of this CPU's architecture ({})",
                std::env::consts::ARCH
            )));
        }
        if !reported(self) {
            return Err(Absent(format!(
                "the CPU does not report {}",
                self.feature()
            )));
        }
        match self {
            #[cfg(target_arch = "x86_64")]
            Unit::AmxBf16 | Unit::AmxInt8 => amx::permitted(),
            _ => Ok(()),
        }
    }

    /// Runs `rounds` rounds: the checksum (multiply-adds counted by the accumulators) and the
    /// operations claimed (twice the multiply-adds). `None` where the unit is not available.
    pub fn run(self, rounds: u64) -> Option<(f64, u64)> {
        self.available().ok()?;
        match self {
            // SAFETY (every arm): `available` found the unit's feature on this CPU, and for
            // AMX that the kernel granted the tile state.
            #[cfg(target_arch = "x86_64")]
            Unit::Avx512Fp16 => Some(unsafe { x86::fp16_avx512(rounds) }),
            #[cfg(target_arch = "x86_64")]
            Unit::Avx512Bf16 => Some(unsafe { x86::bf16_avx512(rounds) }),
            #[cfg(target_arch = "x86_64")]
            Unit::Avx512Vnni => Some(unsafe { x86::int8_avx512_vnni(rounds) }),
            #[cfg(target_arch = "x86_64")]
            Unit::AvxVnni => Some(unsafe { x86::int8_avx_vnni(rounds) }),
            #[cfg(target_arch = "x86_64")]
            Unit::AmxBf16 => Some(unsafe { amx::tiles(rounds, amx::Kind::Bf16) }),
            #[cfg(target_arch = "x86_64")]
            Unit::AmxInt8 => Some(unsafe { amx::tiles(rounds, amx::Kind::Int8) }),
            #[cfg(target_arch = "aarch64")]
            Unit::ArmFp16 => Some(unsafe { arm::fp16_fmla(rounds) }),
            #[cfg(target_arch = "aarch64")]
            Unit::ArmBf16 => Some(unsafe { arm::bf16_bfdot(rounds) }),
            #[cfg(target_arch = "aarch64")]
            Unit::ArmSdot => Some(unsafe { arm::int8_sdot(rounds) }),
            #[cfg(target_arch = "aarch64")]
            Unit::ArmI8mm => Some(unsafe { arm::int8_smmla(rounds) }),
            _ => None,
        }
    }

    /// Units whose figure another available unit already gives: AVX-VNNI is VNNI on 256-bit
    /// registers, so with AVX-512 VNNI present it adds nothing.
    pub fn superseded(self) -> bool {
        self == Unit::AvxVnni && Unit::Avx512Vnni.available().is_ok()
    }
}

impl std::fmt::Display for Unit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Unit::Avx512Fp16 => "AVX-512 FP16",
            Unit::Avx512Bf16 => "AVX-512 BF16",
            Unit::AmxBf16 => "AMX-BF16",
            Unit::Avx512Vnni => "AVX-512 VNNI",
            Unit::AvxVnni => "AVX-VNNI",
            Unit::AmxInt8 => "AMX-INT8",
            Unit::ArmFp16 => "Arm FP16",
            Unit::ArmBf16 => "Arm BF16",
            Unit::ArmSdot => "Arm dot product",
            Unit::ArmI8mm => "Arm I8MM",
        })
    }
}

/// Whether the CPU reports the unit's feature.
fn reported(unit: Unit) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        match unit {
            Unit::Avx512Fp16 => has!("avx512fp16") && has!("avx512bw") && has!("avx512vl"),
            Unit::Avx512Bf16 => has!("avx512bf16") && has!("avx512f"),
            Unit::Avx512Vnni => has!("avx512vnni") && has!("avx512f"),
            Unit::AvxVnni => has!("avxvnni") && has!("avx2"),
            Unit::AmxBf16 => amx::reported(amx::Kind::Bf16),
            Unit::AmxInt8 => amx::reported(amx::Kind::Int8),
            _ => false,
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use std::arch::is_aarch64_feature_detected as has;
        match unit {
            Unit::ArmFp16 => has!("fp16"),
            Unit::ArmBf16 => has!("bf16"),
            Unit::ArmSdot => has!("dotprod"),
            Unit::ArmI8mm => has!("i8mm"),
            _ => false,
        }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = unit;
        false
    }
}

/// The value of an IEEE half-precision number, for summing fp16 lanes.
fn half_to_f64(bits: u16) -> f64 {
    half::f16::from_bits(bits).to_f64()
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{half_to_f64, ACC};
    use std::arch::x86_64::*;

    /// fp16 multiply-adds, 32 lanes: every lane of every accumulator += 1 × 1 per round.
    /// The accumulators are fp16, exact up to 2048 (the self-check stays below); past it they
    /// stop growing and the instructions go on at the same rate. The instruction is written
    /// out: its intrinsics need a newer Rust than this crate's minimum.
    #[target_feature(enable = "avx512fp16,avx512bw,avx512vl,avx512f")]
    pub unsafe fn fp16_avx512(rounds: u64) -> (f64, u64) {
        // 0x3C00 is fp16 one; zero bits are fp16 zero.
        let one = _mm512_set1_epi16(0x3C00);
        let zero = _mm512_setzero_si512();
        let acc = twelve_chains!(rounds, zero, |x| {
            let mut acc = x;
            // SAFETY: a register-only instruction of a feature this function is compiled for.
            unsafe {
                std::arch::asm!(
                    "vfmadd231ph {a}, {o}, {o}",
                    a = inout(zmm_reg) acc,
                    o = in(zmm_reg) one,
                    options(pure, nomem, nostack)
                )
            };
            acc
        });
        let mut sum = 0.0;
        for x in acc {
            let mut lanes = [0u16; 32];
            // SAFETY: 64 bytes into a 64-byte array.
            unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), x) };
            sum += lanes.iter().map(|&b| half_to_f64(b)).sum::<f64>();
        }
        (sum, rounds * (ACC * 32) as u64 * 2)
    }

    /// bf16 pairs dotted into fp32 (`vdpbf16ps`), 16 lanes × 2 pairs: each lane += 2 a round.
    #[target_feature(enable = "avx512bf16,avx512f")]
    pub unsafe fn bf16_avx512(rounds: u64) -> (f64, u64) {
        // SAFETY: both are 64 bytes of plain bits; 0x3F80 is bf16 one.
        let one: __m512bh = unsafe { std::mem::transmute(_mm512_set1_epi16(0x3F80)) };
        let zero = _mm512_setzero_ps();
        let acc = twelve_chains!(rounds, zero, |x| _mm512_dpbf16_ps(x, one, one));
        let mut sum = 0.0;
        for x in acc {
            let mut lanes = [0f32; 16];
            // SAFETY: 64 bytes into a 64-byte array.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), x) };
            sum += lanes.iter().map(|&v| f64::from(v)).sum::<f64>();
        }
        (sum, rounds * (ACC * 16 * 2) as u64 * 2)
    }

    /// Sums the i32 lanes of 512-bit accumulators.
    fn sum_i32(lanes: &[i32]) -> f64 {
        lanes.iter().map(|&v| f64::from(v)).sum()
    }

    /// u8 × s8 quadruples into i32 (`vpdpbusd`), 16 lanes × 4: each lane += 4 a round.
    #[target_feature(enable = "avx512vnni,avx512f")]
    pub unsafe fn int8_avx512_vnni(rounds: u64) -> (f64, u64) {
        let one = _mm512_set1_epi8(1);
        let zero = _mm512_setzero_si512();
        let acc = twelve_chains!(rounds, zero, |x| _mm512_dpbusd_epi32(x, one, one));
        let mut sum = 0.0;
        for x in acc {
            let mut lanes = [0i32; 16];
            // SAFETY: 64 bytes into a 64-byte array.
            unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), x) };
            sum += sum_i32(&lanes);
        }
        (sum, rounds * (ACC * 16 * 4) as u64 * 2)
    }

    /// As [`int8_avx512_vnni`] on 256-bit registers (AVX-VNNI): 8 lanes × 4.
    #[target_feature(enable = "avxvnni,avx2")]
    pub unsafe fn int8_avx_vnni(rounds: u64) -> (f64, u64) {
        let one = _mm256_set1_epi8(1);
        let zero = _mm256_setzero_si256();
        let acc = twelve_chains!(rounds, zero, |x| _mm256_dpbusd_avx_epi32(x, one, one));
        let mut sum = 0.0;
        for x in acc {
            let mut lanes = [0i32; 8];
            // SAFETY: 32 bytes into a 32-byte array.
            unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), x) };
            sum += sum_i32(&lanes);
        }
        (sum, rounds * (ACC * 8 * 4) as u64 * 2)
    }
}

/// Intel AMX: tile registers and the matrix multiply-adds on them. The Rust intrinsics are
/// not stable, so the kernel is inline assembly; Linux hands out the tile state only to a
/// process that asks for it (`arch_prctl(ARCH_REQ_XCOMP_PERM)`).
#[cfg(target_arch = "x86_64")]
mod amx {
    use super::Absent;
    use std::arch::asm;
    use std::arch::x86_64::{__cpuid_count, _xgetbv};

    #[derive(Clone, Copy)]
    pub enum Kind {
        Int8,
        Bf16,
    }

    /// Whether CPUID reports the tiles and the kind's multiply, and the OS saves tile state.
    pub fn reported(kind: Kind) -> bool {
        // CPUID leaf 7 exists on every x86-64 CPU that reports AVX-512 or AMX, and on older
        // ones reads as zeros.
        let leaf7 = __cpuid_count(7, 0);
        let tile = leaf7.edx >> 24 & 1 == 1;
        let op = match kind {
            Kind::Int8 => leaf7.edx >> 25 & 1 == 1,
            Kind::Bf16 => leaf7.edx >> 22 & 1 == 1,
        };
        let osxsave = __cpuid_count(1, 0).ecx >> 27 & 1 == 1;
        // XCR0 bits 17 and 18: the OS saves XTILECFG and XTILEDATA.
        // SAFETY: XGETBV is available where the OS set OSXSAVE.
        tile && op && osxsave && unsafe { xcr0() } >> 17 & 3 == 3
    }

    #[target_feature(enable = "xsave")]
    unsafe fn xcr0() -> u64 {
        _xgetbv(0)
    }

    /// Asks Linux for the tile data state once per process.
    pub fn permitted() -> Result<(), Absent> {
        static ASKED: std::sync::OnceLock<Result<(), Absent>> = std::sync::OnceLock::new();
        ASKED
            .get_or_init(|| {
                const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
                const XFEATURE_XTILEDATA: libc::c_long = 18;
                // SAFETY: arch_prctl with this request only changes which extended state the
                // process may use; it reads and writes no memory of ours.
                let r = unsafe {
                    libc::syscall(
                        libc::SYS_arch_prctl,
                        ARCH_REQ_XCOMP_PERM,
                        XFEATURE_XTILEDATA,
                    )
                };
                if r == 0 {
                    Ok(())
                } else {
                    Err(Absent(format!(
                        "the kernel did not grant the AMX tile state ({}; Linux 5.16 or later \
                         grants it)",
                        std::io::Error::last_os_error()
                    )))
                }
            })
            .clone()
    }

    #[repr(C, align(64))]
    struct Tile([u8; 1024]);

    /// Four accumulator tiles of 16 × 16 32-bit elements, each multiplied-and-added with two
    /// 16-row × 64-byte tiles of ones per round: int8 (`tdpbusd`) adds 64 products to every
    /// element, bf16 (`tdpbf16ps`) 32.
    ///
    /// # Safety
    /// The CPU reports AMX with the kind's multiply and the process has the tile state.
    pub unsafe fn tiles(rounds: u64, kind: Kind) -> (f64, u64) {
        // Palette 1, eight tiles of 16 rows × 64 bytes.
        let mut config = Tile([0; 1024]);
        config.0[0] = 1;
        for t in 0..8 {
            config.0[16 + 2 * t] = 64;
            config.0[48 + t] = 16;
        }
        let mut ones = Tile([0; 1024]);
        match kind {
            Kind::Int8 => ones.0.fill(1),
            Kind::Bf16 => {
                for pair in ones.0.chunks_exact_mut(2) {
                    pair.copy_from_slice(&0x3F80u16.to_le_bytes());
                }
            }
        }
        let mut out = [
            Tile([0; 1024]),
            Tile([0; 1024]),
            Tile([0; 1024]),
            Tile([0; 1024]),
        ];
        let [o0, o1, o2, o3] = &mut out;
        let stride = 64usize;
        macro_rules! tile_loop {
            ($op:literal) => {
                // SAFETY: the configuration and the tiles are 64-byte aligned buffers of 1 KiB
                // (16 rows × 64 bytes at stride 64); the tile registers are configured, used and
                // released inside this one block.
                unsafe {
                    asm!(
                        "ldtilecfg [{config}]",
                        "tilezero tmm0",
                        "tilezero tmm1",
                        "tilezero tmm2",
                        "tilezero tmm3",
                        "tileloadd tmm4, [{ones} + {stride}*1]",
                        "tileloadd tmm5, [{ones} + {stride}*1]",
                        "test {n}, {n}",
                        "jz 3f",
                        "2:",
                        concat!($op, " tmm0, tmm4, tmm5"),
                        concat!($op, " tmm1, tmm4, tmm5"),
                        concat!($op, " tmm2, tmm4, tmm5"),
                        concat!($op, " tmm3, tmm4, tmm5"),
                        "dec {n}",
                        "jnz 2b",
                        "3:",
                        "tilestored [{o0} + {stride}*1], tmm0",
                        "tilestored [{o1} + {stride}*1], tmm1",
                        "tilestored [{o2} + {stride}*1], tmm2",
                        "tilestored [{o3} + {stride}*1], tmm3",
                        "tilerelease",
                        config = in(reg) config.0.as_ptr(),
                        ones = in(reg) ones.0.as_ptr(),
                        stride = in(reg) stride,
                        n = inout(reg) rounds => _,
                        o0 = in(reg) o0.0.as_mut_ptr(),
                        o1 = in(reg) o1.0.as_mut_ptr(),
                        o2 = in(reg) o2.0.as_mut_ptr(),
                        o3 = in(reg) o3.0.as_mut_ptr(),
                        options(nostack),
                    )
                }
            };
        }
        let (sum, per_element): (f64, u64) = match kind {
            Kind::Int8 => {
                tile_loop!("tdpbusd");
                let sum = out
                    .iter()
                    .flat_map(|t| t.0.chunks_exact(4))
                    .map(|b| f64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    .sum();
                (sum, 64)
            }
            Kind::Bf16 => {
                tile_loop!("tdpbf16ps");
                let sum = out
                    .iter()
                    .flat_map(|t| t.0.chunks_exact(4))
                    .map(|b| f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    .sum();
                (sum, 32)
            }
        };
        (sum, rounds * 4 * 256 * per_element * 2)
    }
}

#[cfg(target_arch = "aarch64")]
mod arm {
    use super::{half_to_f64, ACC};
    use std::arch::aarch64::*;
    use std::arch::asm;

    /// One multiply-add instruction on an accumulator register with a register of ones; the
    /// intrinsics for these are not all stable, the instructions are.
    macro_rules! step {
        ($insn:literal, $acc:expr, $ones:expr) => {{
            let mut acc = $acc;
            // SAFETY: a register-only instruction of a feature the caller checked.
            unsafe {
                asm!($insn, a = inout(vreg) acc, o = in(vreg) $ones,
                     options(pure, nomem, nostack))
            };
            acc
        }};
    }

    /// fp16 multiply-adds (`fmla .8h`), 8 lanes: each lane += 1 a round (exact to 2048).
    #[target_feature(enable = "fp16")]
    pub unsafe fn fp16_fmla(rounds: u64) -> (f64, u64) {
        let one = vdupq_n_u16(0x3C00);
        let acc = twelve_chains!(rounds, vdupq_n_u16(0), |x| step!(
            "fmla {a:v}.8h, {o:v}.8h, {o:v}.8h",
            x,
            one
        ));
        let mut sum = 0.0;
        for x in acc {
            let mut lanes = [0u16; 8];
            // SAFETY: 16 bytes into a 16-byte array.
            unsafe { vst1q_u16(lanes.as_mut_ptr(), x) };
            sum += lanes.iter().map(|&b| half_to_f64(b)).sum::<f64>();
        }
        (sum, rounds * (ACC * 8) as u64 * 2)
    }

    fn sum_lanes(acc: [float32x4_t; ACC]) -> f64 {
        let mut sum = 0.0;
        for x in acc {
            let mut lanes = [0f32; 4];
            // SAFETY: 16 bytes into a 16-byte array.
            unsafe { vst1q_f32(lanes.as_mut_ptr(), x) };
            sum += lanes.iter().map(|&v| f64::from(v)).sum::<f64>();
        }
        sum
    }

    fn sum_int_lanes(acc: [int32x4_t; ACC]) -> f64 {
        let mut sum = 0.0;
        for x in acc {
            let mut lanes = [0i32; 4];
            // SAFETY: 16 bytes into a 16-byte array.
            unsafe { vst1q_s32(lanes.as_mut_ptr(), x) };
            sum += lanes.iter().map(|&v| f64::from(v)).sum::<f64>();
        }
        sum
    }

    /// bf16 pairs dotted into fp32 (`bfdot`), 4 lanes × 2 pairs: each lane += 2 a round.
    #[target_feature(enable = "bf16")]
    pub unsafe fn bf16_bfdot(rounds: u64) -> (f64, u64) {
        let one = vdupq_n_u16(0x3F80);
        let acc = twelve_chains!(rounds, vdupq_n_f32(0.0), |x| step!(
            "bfdot {a:v}.4s, {o:v}.8h, {o:v}.8h",
            x,
            one
        ));
        (sum_lanes(acc), rounds * (ACC * 4 * 2) as u64 * 2)
    }

    /// s8 quadruples into i32 (`sdot`), 4 lanes × 4: each lane += 4 a round.
    #[target_feature(enable = "dotprod")]
    pub unsafe fn int8_sdot(rounds: u64) -> (f64, u64) {
        let one = vdupq_n_s8(1);
        let acc = twelve_chains!(rounds, vdupq_n_s32(0), |x| step!(
            "sdot {a:v}.4s, {o:v}.16b, {o:v}.16b",
            x,
            one
        ));
        (sum_int_lanes(acc), rounds * (ACC * 4 * 4) as u64 * 2)
    }

    /// A 2 × 8 by 8 × 2 s8 matrix multiply into a 2 × 2 i32 tile (`smmla`): each of the four
    /// elements += 8 a round.
    #[target_feature(enable = "i8mm")]
    pub unsafe fn int8_smmla(rounds: u64) -> (f64, u64) {
        let one = vdupq_n_s8(1);
        let acc = twelve_chains!(rounds, vdupq_n_s32(0), |x| step!(
            "smmla {a:v}.4s, {o:v}.16b, {o:v}.16b",
            x,
            one
        ));
        (sum_int_lanes(acc), rounds * (ACC * 4 * 8) as u64 * 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_available_unit_does_exactly_the_work_it_claims() {
        for &unit in Unit::of_this_architecture() {
            if unit.available().is_err() {
                assert_eq!(unit.run(10), None, "{unit}");
                continue;
            }
            // fp16 accumulators are exact to 2048 updates per lane.
            for rounds in [0u64, 1, 7, 1000] {
                let Some((sum, ops)) = unit.run(rounds) else {
                    panic!("{unit} is available but did not run");
                };
                assert_eq!(ops as f64, 2.0 * sum, "{unit}, {rounds} rounds");
            }
        }
    }

    #[test]
    fn a_unit_of_another_architecture_says_so() {
        let other = if cfg!(target_arch = "aarch64") {
            Unit::AmxInt8
        } else {
            Unit::ArmI8mm
        };
        let Err(why) = other.available() else {
            panic!("{other} available here");
        };
        assert!(why.0.contains("not an instruction of this CPU"), "{why}");
    }

    #[test]
    fn work_per_round_follows_the_unit() {
        let per_round = |unit: Unit| unit.run(1).map(|r| r.1);
        if Unit::AmxInt8.available().is_ok() {
            // Four tiles of 16 × 16 elements, 64 multiply-adds each.
            assert_eq!(per_round(Unit::AmxInt8), Some(4 * 256 * 64 * 2));
        }
        if Unit::Avx512Vnni.available().is_ok() {
            assert_eq!(per_round(Unit::Avx512Vnni), Some(ACC as u64 * 16 * 4 * 2));
        }
        if Unit::ArmI8mm.available().is_ok() {
            assert_eq!(per_round(Unit::ArmI8mm), Some(ACC as u64 * 4 * 8 * 2));
        }
    }
}
