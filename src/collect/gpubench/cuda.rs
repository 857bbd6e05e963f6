//! The driver side of the GPU ceilings: cudarc's thin `result` layer over the CUDA driver API
//! (loaded at run time), kept to calls that exist from CUDA 10.2 (JetPack 4) on, and NVRTC.
//! Every call's failure becomes a sentence; nothing here panics on a missing library because
//! [`libraries_present`] is asked first.

use super::{
    trials, GpuBenchError, GpuInfo, GpuMeasurement, GpuPeak, GpuSweepPoint, LoadPath, Message,
    PeakOperands, Step, BLOCK, KERNELS, TILE,
};
use crate::collect::ceilings::Effort;
use cudarc::driver::{result, sys};
use std::ffi::{c_void, CString};
use std::time::Instant;

/// Whether NVRTC can be loaded, or what to do.
pub fn nvrtc_present() -> Result<(), crate::error::Unavailable> {
    // SAFETY: only tries to dlopen the library by its names.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(crate::error::Unavailable::from(
            "NVRTC (libnvrtc.so) is not found: it comes with the CUDA toolkit (JetPack installs it \
             in /usr/local/cuda/lib64); add that directory to LD_LIBRARY_PATH"
                .to_string(),
        ))
    }
}

/// NVRTC's version, e.g. (12, 2) (NVRTC must be present).
pub fn nvrtc_version() -> Option<(i32, i32)> {
    let (mut major, mut minor) = (0i32, 0i32);
    // SAFETY: writes two ints; the library was found by `nvrtc_present`.
    unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .ok()
        .map(|_| (major, minor))
}

/// Whether libcuda and libnvrtc can be loaded, or which cannot and what to do.
pub fn libraries_present() -> Result<(), crate::error::Unavailable> {
    // SAFETY: only tries to dlopen the library by its names.
    if !unsafe { sys::is_culib_present() } {
        return Err(crate::error::Unavailable::from(
            "no CUDA driver (libcuda.so.1 is not installed: on a Jetson it comes with JetPack, \
             on a PC with the NVIDIA driver)"
                .to_string(),
        ));
    }
    nvrtc_present()
}

fn driver_error(what: &str, e: result::DriverError) -> String {
    let name = e
        .error_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| format!("{:?}", e.0));
    let text = e
        .error_string()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{what}: {name} ({text})")
}

fn failed(what: &str) -> impl Fn(result::DriverError) -> GpuBenchError + '_ {
    move |e| GpuBenchError::Failed(driver_error(what, e))
}

fn attribute(dev: sys::CUdevice, a: sys::CUdevice_attribute) -> Option<i64> {
    // SAFETY: `dev` came from cuDeviceGet; an attribute this driver does not know is an error.
    unsafe { result::device::get_attribute(dev, a) }
        .ok()
        .map(i64::from)
}

fn describe(ordinal: usize, dev: sys::CUdevice) -> Result<GpuInfo, GpuBenchError> {
    use sys::CUdevice_attribute as A;
    let need = |a: sys::CUdevice_attribute, what: &str| {
        attribute(dev, a).ok_or_else(|| {
            GpuBenchError::Failed(format!("the driver does not report the GPU's {what}"))
        })
    };
    let name = result::device::get_name(dev).map_err(failed("cannot read the GPU's name"))?;
    // SAFETY: `dev` came from cuDeviceGet.
    let memory =
        unsafe { result::device::total_mem(dev) }.map_err(failed("cannot read its memory"))?;
    let mut driver_version = 0i32;
    // SAFETY: writes one int.
    let driver_version = unsafe { sys::cuDriverGetVersion(&mut driver_version) }
        .result()
        .ok()
        .map(|_| driver_version);
    let nvrtc_version = nvrtc_version();
    let positive = |v: Option<i64>| v.filter(|v| *v > 0);
    Ok(GpuInfo {
        ordinal,
        name,
        compute_capability: (
            need(
                A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                "compute capability",
            )? as u32,
            need(
                A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                "compute capability",
            )? as u32,
        ),
        multiprocessors: need(
            A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            "multiprocessors",
        )? as u32,
        l2_bytes: need(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 size")? as u64,
        shared_per_sm_bytes: need(
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
            "shared memory",
        )? as u64,
        max_threads_per_sm: need(
            A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR,
            "threads per multiprocessor",
        )? as u32,
        clock_khz: positive(attribute(dev, A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)).map(|v| v as u64),
        memory_clock_khz: positive(attribute(dev, A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE))
            .map(|v| v as u64),
        memory_bus_bits: positive(attribute(
            dev,
            A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH,
        ))
        .map(|v| v as u32),
        memory_bytes: memory as u64,
        integrated: attribute(dev, A::CU_DEVICE_ATTRIBUTE_INTEGRATED) == Some(1),
        driver_version,
        nvrtc_version,
    })
}

/// Compiles the kernels for `arch` (e.g. compute_87) and returns the PTX, or NVRTC's log.
pub fn compile(arch: &str) -> Result<String, crate::error::ChildFailed> {
    let options = cudarc::nvrtc::CompileOptions {
        options: vec![format!("--gpu-architecture={arch}")],
        name: Some("edgeprof_ceilings.cu".into()),
        ..Default::default()
    };
    match cudarc::nvrtc::compile_ptx_with_opts(KERNELS, options) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(cudarc::nvrtc::CompileError::CompileError { nvrtc, log, .. }) => {
            Err(crate::error::ChildFailed::from(format!(
                "NVRTC could not compile the kernels for {arch} ({nvrtc:?}): {}",
                log.to_string_lossy().trim()
            )))
        }
        Err(e) => Err(crate::error::ChildFailed::from(format!(
            "NVRTC failed for {arch}: {e:?}"
        ))),
    }
}

/// Device memory, freed on drop.
struct Buffer(sys::CUdeviceptr);

impl Buffer {
    fn zeroed(bytes: usize) -> Result<Buffer, GpuBenchError> {
        // SAFETY: a plain allocation in the current context, set to zero before use.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(failed(&format!(
            "cannot allocate {} MiB on the GPU",
            bytes >> 20
        )))?;
        let buffer = Buffer(ptr);
        // SAFETY: `ptr` holds `bytes` bytes.
        unsafe { result::memset_d8_sync(ptr, 0, bytes) }.map_err(failed("cannot clear memory"))?;
        Ok(buffer)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in this context and not used after this.
        let _ = unsafe { result::free_sync(self.0) };
    }
}

/// A timing event pair.
struct Timer {
    start: sys::CUevent,
    end: sys::CUevent,
}

impl Timer {
    fn new() -> Result<Timer, GpuBenchError> {
        let flags = sys::CUevent_flags::CU_EVENT_DEFAULT;
        let start = result::event::create(flags).map_err(failed("cannot create an event"))?;
        let end = match result::event::create(flags) {
            Ok(e) => e,
            Err(e) => {
                // SAFETY: created just above.
                let _ = unsafe { result::event::destroy(start) };
                return Err(failed("cannot create an event")(e));
            }
        };
        Ok(Timer { start, end })
    }

    /// Seconds one launch takes on the default stream.
    fn time(
        &self,
        launch: impl FnOnce() -> Result<(), GpuBenchError>,
    ) -> Result<f64, GpuBenchError> {
        let stream = std::ptr::null_mut();
        // SAFETY: both events belong to the current context; the null stream is the default one.
        unsafe {
            result::event::record(self.start, stream).map_err(failed("cannot record an event"))?;
            launch()?;
            result::event::record(self.end, stream).map_err(failed("cannot record an event"))?;
            result::event::synchronize(self.end).map_err(failed("a kernel failed"))?;
            let ms = result::event::elapsed(self.start, self.end)
                .map_err(failed("cannot read the kernel time"))?;
            Ok(f64::from(ms) / 1e3)
        }
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        // SAFETY: created by cuEventCreate and not used after this.
        unsafe {
            let _ = result::event::destroy(self.start);
            let _ = result::event::destroy(self.end);
        }
    }
}

/// A kernel argument, as cuLaunchKernel takes it.
#[derive(Clone, Copy)]
enum Arg {
    Ptr(sys::CUdeviceptr),
    I32(i32),
    U32(u32),
    F32(f32),
    F64(f64),
}

fn launch(f: sys::CUfunction, blocks: u32, args: &mut [Arg]) -> Result<(), GpuBenchError> {
    let mut params: Vec<*mut c_void> = args
        .iter_mut()
        .map(|a| match a {
            Arg::Ptr(p) => p as *mut sys::CUdeviceptr as *mut c_void,
            Arg::I32(v) => v as *mut i32 as *mut c_void,
            Arg::U32(v) => v as *mut u32 as *mut c_void,
            Arg::F32(v) => v as *mut f32 as *mut c_void,
            Arg::F64(v) => v as *mut f64 as *mut c_void,
        })
        .collect();
    // SAFETY: `f` is a kernel of the loaded module whose parameters are exactly `args` (see
    // kernels.cu), every pointer argument is a live buffer large enough for what the kernel
    // reads, and `params` outlives the call.
    unsafe {
        result::launch_kernel(
            f,
            (blocks, 1, 1),
            (BLOCK, 1, 1),
            0,
            std::ptr::null_mut(),
            &mut params,
        )
    }
    .map_err(failed("cannot launch a kernel"))
}

/// Grows `units` (iterations or repeats) until one launch lasts about `target` seconds, then
/// runs `trials` launches; the shortest time and the units it covered.
fn best_time(
    timer: &Timer,
    target: f64,
    trials: usize,
    mut run: impl FnMut(i32) -> Result<(), GpuBenchError>,
) -> Result<(f64, i32), GpuBenchError> {
    let mut units: i32 = 1;
    loop {
        let t = timer.time(|| run(units))?;
        if t >= target / 4.0 || units >= i32::MAX / 8 {
            let scaled = (f64::from(units) * target / t.max(1e-9)).ceil();
            units = scaled.clamp(1.0, f64::from(i32::MAX / 2)) as i32;
            break;
        }
        units = units.saturating_mul(8);
    }
    let mut best = f64::INFINITY;
    for _ in 0..trials.max(1) {
        best = best.min(timer.time(|| run(units))?);
    }
    Ok((best, units))
}

fn occupancy(f: sys::CUfunction) -> Result<u32, GpuBenchError> {
    // SAFETY: `f` is a loaded kernel.
    let n = unsafe { result::occupancy::max_active_block_per_multiprocessor(f, BLOCK as i32, 0) }
        .map_err(failed("cannot read a kernel's occupancy"))?;
    Ok(n.max(1) as u32)
}

/// Measures GPU `ordinal`'s ceilings, passing every message but the last to `report`.
pub fn measure(
    ordinal: usize,
    effort: Effort,
    mut report: impl FnMut(Message),
) -> Result<GpuMeasurement, GpuBenchError> {
    let began = Instant::now();
    libraries_present().map_err(|e| GpuBenchError::Unavailable(e.0))?;
    result::init().map_err(|e| {
        GpuBenchError::Unavailable(driver_error(
            "the CUDA driver did not start (is there an NVIDIA GPU, and may this user open /dev/nvidia*?)",
            e,
        ))
    })?;
    let count = result::device::get_count().map_err(failed("cannot count the GPUs"))?;
    if count <= 0 {
        return Err(GpuBenchError::Unavailable(
            "the CUDA driver sees no GPU".to_string(),
        ));
    }
    if ordinal >= count as usize {
        return Err(GpuBenchError::Unavailable(format!(
            "there is no GPU {ordinal}: the CUDA driver sees {count} (0 to {})",
            count - 1
        )));
    }
    let dev = result::device::get(ordinal as i32).map_err(failed("cannot open the GPU"))?;
    let info = describe(ordinal, dev)?;
    report(Message::Info(info.clone()));
    // The primary context is not released: this process exits after the measurement, and
    // cuDevicePrimaryCtxRelease_v2 does not exist before CUDA 11 (JetPack 4).
    // SAFETY: `dev` came from cuDeviceGet.
    let ctx = unsafe { result::primary_ctx::retain(dev) }
        .map_err(failed("cannot create a CUDA context"))?;
    // SAFETY: `ctx` is the retained primary context.
    unsafe { result::ctx::set_current(ctx) }.map_err(failed("cannot use the CUDA context"))?;

    let (trials, target) = trials(effort);
    let (kernels, skipped) = super::peak_kernels(&info);
    let (free, _) = result::mem_get_info().map_err(failed("cannot read the free memory"))?;
    let free = free as u64;
    // The load kernels use few registers and no shared memory: as many blocks per multiprocessor
    // as its thread limit allows.
    let blocks_per_sm = (info.max_threads_per_sm / BLOCK).max(1);
    let l1_sizes = super::sweep_sizes(
        info.multiprocessors,
        blocks_per_sm,
        super::max_l1_sweep_bytes(&info, free),
    );
    let l2_sizes = super::sweep_sizes(
        info.multiprocessors,
        blocks_per_sm,
        super::max_sweep_bytes(info.l2_bytes, free),
    );
    let total = 1 + kernels.len() + 1 + l1_sizes.len() + l2_sizes.len();
    let mut done = 0usize;
    let mut step = |what: String, report: &mut dyn FnMut(Message)| {
        report(Message::Step(Step { what, done, total }));
        done += 1;
    };
    step(
        format!("compiling the kernels for {} with NVRTC", info.arch()),
        &mut report,
    );
    let ptx = compile(&info.arch()).map_err(|e| GpuBenchError::Failed(e.0))?;
    let ptx = CString::new(ptx)
        .map_err(|_| GpuBenchError::Failed("NVRTC returned PTX with a NUL byte".into()))?;
    // SAFETY: a NUL-terminated PTX image; the module lives until the context is released.
    let module = unsafe { result::module::load_data(ptx.as_ptr() as *const c_void) }
        .map_err(failed("the driver could not load the compiled kernels"))?;
    let function = |name: &str| -> Result<sys::CUfunction, GpuBenchError> {
        let c = CString::new(name)
            .map_err(|_| GpuBenchError::Failed(format!("bad kernel name {name}")))?;
        // SAFETY: `module` is loaded.
        unsafe { result::module::get_function(module, c) }
            .map_err(failed(&format!("the kernel {name} is missing")))
    };
    let timer = Timer::new()?;
    let l1_fn = function("load_l1")?;
    let l2_fn = function("load_l2")?;

    let mut peaks = Vec::new();
    for kernel in &kernels {
        step(kernel.what(), &mut report);
        let f = function(kernel.name)?;
        let blocks = occupancy(f)? * info.multiprocessors;
        let out = Buffer::zeroed(blocks as usize * BLOCK as usize * kernel.out_bytes)?;
        let (a, b) = match kernel.operands {
            PeakOperands::F64(a, b) => (Arg::F64(a), Arg::F64(b)),
            PeakOperands::F32(a, b) => (Arg::F32(a), Arg::F32(b)),
            PeakOperands::Bits(a, b) => (Arg::U32(a), Arg::U32(b)),
        };
        let (seconds, iterations) = best_time(&timer, target, trials, |iterations| {
            launch(
                f,
                blocks,
                &mut [Arg::Ptr(out.0), Arg::I32(iterations), a, b, Arg::I32(0)],
            )
        })?;
        let ops = kernel.ops_per_thread_iteration as f64
            * f64::from(iterations)
            * f64::from(blocks)
            * f64::from(BLOCK);
        peaks.push(GpuPeak {
            precision: kernel.precision,
            flops_per_s: ops / seconds,
            blocks,
            via: kernel.via.map(str::to_string),
        });
    }

    step("shared-memory bandwidth".to_string(), &mut report);
    let f = function("shared_read")?;
    let blocks = occupancy(f)? * info.multiprocessors;
    let out = Buffer::zeroed(blocks as usize * BLOCK as usize * 4)?;
    let (seconds, repeats) = best_time(&timer, target, trials, |repeats| {
        launch(
            f,
            blocks,
            &mut [Arg::I32(repeats), Arg::Ptr(out.0), Arg::I32(0)],
        )
    })?;
    let shared = (TILE * 16) as f64 * f64::from(blocks) * f64::from(repeats) / seconds;

    let largest = l1_sizes
        .iter()
        .chain(&l2_sizes)
        .map(|s| s.bytes)
        .max()
        .unwrap_or(0);
    let data = Buffer::zeroed(largest.max(16) as usize)?;
    let mut sweep = Vec::new();
    for (path, f, sizes) in [
        (LoadPath::ThroughL1, l1_fn, &l1_sizes),
        (LoadPath::BypassL1, l2_fn, &l2_sizes),
    ] {
        for size in sizes {
            step(
                format!(
                    "load bandwidth {}, {} working set",
                    match path {
                        LoadPath::ThroughL1 => "through L1",
                        LoadPath::BypassL1 => "around L1",
                    },
                    crate::collect::ceilings::human(size.bytes)
                ),
                &mut report,
            );
            let out = Buffer::zeroed(size.blocks as usize * BLOCK as usize * 4)?;
            let per_block = u32::try_from(size.per_block()).map_err(|_| {
                GpuBenchError::Failed(format!(
                    "a working set of {} bytes is too large",
                    size.bytes
                ))
            })?;
            let (seconds, repeats) = best_time(&timer, target, trials, |repeats| {
                launch(
                    f,
                    size.blocks,
                    &mut [
                        Arg::Ptr(data.0),
                        Arg::U32(per_block),
                        Arg::I32(repeats),
                        Arg::Ptr(out.0),
                        Arg::I32(0),
                    ],
                )
            })?;
            sweep.push(GpuSweepPoint {
                path,
                bytes: size.bytes,
                blocks: size.blocks,
                bytes_per_s: size.bytes as f64 * f64::from(repeats) / seconds,
            });
        }
    }
    drop(data);
    // SAFETY: no kernel of the module runs any more.
    let _ = unsafe { result::module::unload(module) };
    Ok(GpuMeasurement {
        info,
        peaks,
        shared_bytes_per_s: Some(shared),
        sweep,
        skipped,
        seconds: began.elapsed().as_secs_f64(),
    })
}
