use super::*;
use std::path::PathBuf;

fn board(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/boards/{name}"))
}

fn state(name: &str) -> BoardState {
    let root = board(name);
    read(&root, &FixtureCommands(root.join("commands")))
}

fn problems(s: &BoardState) -> Vec<String> {
    s.warnings().into_iter().map(|w| w.problem).collect()
}

fn fixes(s: &BoardState) -> Vec<String> {
    s.warnings().into_iter().map(|w| w.fix).collect()
}

#[test]
fn agx_orin_in_maxn_without_jetson_clocks() {
    let s = state("orin-jp5");
    assert_eq!(
        s.summary(),
        "power mode MAXN (0), jetson_clocks off, GPU clock limit 1.30 GHz, CPU governor schedutil"
    );
    let Some(j) = s.jetson.get() else {
        panic!("{:?}", s.jetson)
    };
    assert_eq!(j.fan_mode.as_deref(), Some("quiet"));
    assert_eq!(j.fan_pwm, Found::Found(92));
    assert_eq!(
        j.fastest,
        Some(PowerMode {
            id: 0,
            name: "MAXN".into()
        })
    );
    assert_eq!(
        j.gpu.get().and_then(|g| g.governor.as_deref()),
        Some("nvhost_podgov")
    );
    // debugfs is root's.
    assert!(matches!(&j.emc_hz, Found::Absent(why) if why.contains("readable by root only")));
    let cpus: Vec<Vec<usize>> = s.policies().iter().map(|p| p.cpus.clone()).collect();
    assert_eq!(cpus, [vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
    assert_eq!(
        s.idle.get().map(|i| i.states.len()),
        Some(2),
        "{:?}",
        s.idle
    );
    assert_eq!(
        problems(&s),
        [
            "the CPU frequency governor is not `performance` (schedutil on CPUs 0-3; schedutil on \
             CPUs 4-7): the clock follows the load, so the first iterations run slower",
            "jetson_clocks is off: the CPU, GPU and memory clocks follow the load"
        ]
    );
}

#[test]
fn orin_nano_below_its_fastest_mode_with_capped_clocks() {
    let s = state("orin-jp6");
    assert_eq!(
        s.jetson
            .get()
            .and_then(|j| j.mode.get())
            .map(|m| m.to_string()),
        Some("15W (0)".to_string())
    );
    let p = problems(&s);
    assert_eq!(p.len(), 6, "{p:#?}");
    assert!(p.contains(&"CPUs 0-3 are limited to 1.51 GHz of their 1.73 GHz".to_string()));
    assert!(p.contains(
        &"the power mode is 15W (0), below the board's fastest, MAXN_SUPER (2)".to_string()
    ));
    assert!(p.contains(&"the GPU is limited to 625 MHz of its 1.02 GHz".to_string()));
    let f = fixes(&s);
    assert!(f.contains(&"sudo nvpmodel -m 2".to_string()), "{f:?}");
    assert!(f.contains(
        &"echo 1728000 | sudo tee /sys/devices/system/cpu/cpufreq/policy4/scaling_max_freq"
            .to_string()
    ));
}

#[test]
fn agx_xavier_with_jetson_clocks_in_force_is_stable() {
    let s = state("xavier-jp5");
    assert_eq!(s.jetson_clocks(), Some(true));
    let Some(j) = s.jetson.get() else {
        panic!("{:?}", s.jetson)
    };
    assert_eq!(j.emc_hz, Found::Found(2_133_000_000));
    assert_eq!(j.fan_pwm, Found::Found(255));
    // The governor of a clock pinned at its maximum does not matter.
    assert_eq!(problems(&s), Vec::<String>::new());
    let idle = s
        .idle
        .get()
        .map(|i| i.states.iter().filter(|x| x.disabled).count());
    assert_eq!(idle, Some(2));
}

#[test]
fn jetson_nano_power_mode_from_nvpmodel_when_it_keeps_no_status_file() {
    let s = state("nano-jp4");
    let Some(j) = s.jetson.get() else {
        panic!("{:?}", s.jetson)
    };
    assert_eq!(
        j.mode,
        Found::Found(PowerMode {
            id: 1,
            name: "5W".into()
        })
    );
    assert_eq!(j.fan_pwm, Found::Found(0));
    assert_eq!(j.fan_mode, None);
    assert!(problems(&s)
        .contains(&"the power mode is 5W (1), below the board's fastest, MAXN (0)".to_string()));
    // Without the tool, the reason.
    let root = board("nano-jp4");
    let s = read(&root, &FixtureCommands(root.join("no-such-dir")));
    assert!(matches!(
        s.jetson.get().map(|j| &j.mode),
        Some(Found::Absent(why)) if why == "no /var/lib/nvpmodel/status, and nvpmodel is not installed: the power mode is unknown"
    ));
}

#[test]
fn tx2_with_its_denver_cores_off() {
    let s = state("tx2-jp4");
    assert!(s
        .summary()
        .starts_with("power mode MAXP_CORE_ARM (3), jetson_clocks off"));
    assert_eq!(
        s.jetson.get().map(|j| j.fan_pwm.clone()),
        Some(Found::Found(77))
    );
    assert_eq!(problems(&s).len(), 3, "{:?}", problems(&s));
}

#[test]
fn thor_in_maxn_pinned() {
    let s = state("thor-jp7");
    assert_eq!(
        s.summary(),
        "power mode MAXN (0), jetson_clocks on, GPU clock limit 1.57 GHz, CPU governor performance"
    );
    assert_eq!(
        s.jetson.get().and_then(|j| j.fan_mode.clone()),
        Some("cool".into())
    );
    assert_eq!(problems(&s), Vec::<String>::new());
}

#[test]
fn raspberry_pi_clocks_and_throttling_from_the_firmware() {
    let s = state("pi4");
    let Some(pi) = s.pi.get() else {
        panic!("{:?}", s.pi)
    };
    assert_eq!(pi.arm_hz, Found::Found(1_500_398_464));
    assert_eq!(pi.core_hz, Found::Found(500_000_992));
    assert_eq!(
        pi.throttled_now,
        Found::Found(vec!["under-voltage".to_string(), "throttled".to_string()])
    );
    assert!(matches!(s.jetson, Found::Absent(_)));
    assert!(matches!(&s.idle, Found::Absent(why) if why.contains("no cpuidle")));
    assert_eq!(
        problems(&s),
        [
            "the CPU frequency governor is not `performance` (ondemand on CPUs 0-3): the clock \
             follows the load, so the first iterations run slower",
            "CPUs 0-3 are limited to 1.50 GHz of their 1.80 GHz",
            "the firmware is throttling now: under-voltage, throttled"
        ]
    );
}

#[test]
fn x86_desktop_with_intel_pstate_turbo_and_an_amd_gpu() {
    let s = state("amd-x86");
    assert_eq!(s.policies().len(), 8);
    assert_eq!(
        s.turbo,
        Found::Found(Turbo {
            on: true,
            file: "/sys/devices/system/cpu/intel_pstate/no_turbo".into()
        })
    );
    assert_eq!(
        s.idle.get().and_then(|i| i.driver.clone()),
        Some("intel_idle".into())
    );
    assert_eq!(
        s.amd,
        Found::Found(vec![AmdGpu {
            card: "card1".into(),
            performance_level: Some("auto".into()),
            power_profile: Some("3D_FULL_SCREEN".into()),
        }])
    );
    assert_eq!(
        s.summary(),
        "CPU governor powersave, turbo on, card1 performance level auto"
    );
    assert_eq!(
        fixes(&s)[1],
        "echo 1 | sudo tee /sys/devices/system/cpu/intel_pstate/no_turbo"
    );
}

#[test]
fn a_machine_without_cpufreq_says_so() {
    let s = state("none");
    assert_eq!(
        s.summary(),
        "no clock state: no cpufreq here (no /sys/devices/system/cpu/cpufreq/policy*: the clock \
         is the hypervisor's or the firmware's, and nothing here can read or set it)"
    );
    assert!(matches!(s.jetson, Found::Absent(_)));
    assert!(matches!(&s.nvidia, Found::Absent(why) if why.contains("not from a directory")));
    assert_eq!(problems(&s), Vec::<String>::new());
}

#[test]
fn acpi_cpufreq_boost_is_turbo() {
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => panic!("{e}"),
    };
    let boost = dir.path().join("sys/devices/system/cpu/cpufreq/boost");
    if let Err(e) = std::fs::create_dir_all(dir.path().join("sys/devices/system/cpu/cpufreq"))
        .and_then(|_| std::fs::write(&boost, "1\n"))
    {
        panic!("{e}");
    }
    let s = read(dir.path(), &FixtureCommands(dir.path().to_path_buf()));
    assert_eq!(
        fixes(&s),
        ["echo 0 | sudo tee /sys/devices/system/cpu/cpufreq/boost"]
    );
}

#[test]
fn two_states_differ_part_by_part() {
    let orin = state("orin-jp5");
    let nano = state("orin-jp6");
    let d = BoardState::differences(&orin, &nano);
    assert_eq!(d[0], "power mode: A MAXN (0), B 15W (0)");
    assert!(d.contains(&"CPU clock limit (policy0): A 2.19 GHz, B 1.51 GHz".to_string()));
    assert_eq!(BoardState::differences(&orin, &orin), Vec::<String>::new());
    // A part one side did not record is no difference.
    assert_eq!(
        BoardState::differences(&orin, &BoardState::default()),
        Vec::<String>::new()
    );
}

#[test]
fn nvpmodel_texts() {
    assert_eq!(
        parse_nvpmodel_status("pmode:0002 fmode:quiet"),
        Some((2, Some("quiet".into())))
    );
    assert_eq!(parse_nvpmodel_status("garbage"), None);
    assert_eq!(parse_nvpmodel_query("NV Power Mode: MAXN\n"), None);
    assert_eq!(
        parse_nvpmodel_conf("< POWER_MODEL ID=x NAME=MAXN >\n< POWER_MODEL NAME=A >"),
        Vec::<PowerMode>::new()
    );
    assert_eq!(parse_vcgencmd_clock("frequency(48)=abc"), None);
    assert_eq!(parse_power_profile("0 BOOTUP_DEFAULT :\n"), None);
}
