//! Tests of `collect/tegrastats.rs`.

use super::*;

fn fixture(name: &str) -> Vec<Line> {
    let path = format!(
        "{}/tests/fixtures/tegrastats/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let (lines, errors) = parse_log(&text);
    let lines: Vec<Line> = lines.into_iter().map(|(_, l)| l).collect();
    assert!(errors.is_empty(), "{name}: {errors:?}");
    assert!(!lines.is_empty(), "{name} is empty");
    for l in &lines {
        assert!(l.unparsed.is_empty(), "{name}: {:?}", l.unparsed);
    }
    lines
}

fn temp<'a>(l: &'a Line, name: &str) -> Option<&'a Temperature> {
    l.temperatures.iter().find(|t| t.name == name)
}

#[test]
fn jetpack4_nano_as_root() {
    let lines = fixture("jp4-nano-root.log");
    assert_eq!(lines.len(), 2);
    let l = &lines[1];
    assert_eq!(l.timestamp, None);
    assert_eq!((l.ram_used_mb, l.ram_total_mb), (Some(1902), Some(3964)));
    assert_eq!((l.swap_used_mb, l.swap_cached_mb), (Some(180), Some(5)));
    assert_eq!((l.iram_used_kb, l.iram_total_kb), (Some(0), Some(252)));
    assert_eq!(l.cpus.len(), 4);
    assert_eq!(
        l.cpus[1],
        Core {
            id: 1,
            online: true,
            load_pct: Some(99.0),
            freq_mhz: Some(1479)
        }
    );
    assert!(!l.cpus[2].online && l.cpus[3].id == 3);
    assert_eq!(l.gpu_load_pct(), Some(99.0));
    assert_eq!(l.gpu_freq_mhz(), Some(921));
    assert_eq!(l.emc.as_ref().and_then(|e| e.load_pct), Some(9.0));
    assert_eq!(l.engines[0].name, "APE");
    assert_eq!(l.engines[0].freq_mhz, vec![25]);
    assert_eq!(temp(l, "thermal").and_then(|t| t.celsius), Some(41.75));
    // Unitless mW on JetPack 4; the board total is POM_5V_IN.
    assert_eq!(l.board_power_mw(), Some(5890.0));
    assert_eq!(l.rails[1].average_mw, Some(1247.0));
}

#[test]
fn jetpack4_tx2_without_root_has_no_frequencies() {
    let l = &fixture("jp4-tx2-nonroot.log")[0];
    assert_eq!(l.swap_total_mb, None);
    assert_eq!(l.cpus.len(), 6);
    assert_eq!(l.cpus[0].load_pct, Some(14.0));
    assert_eq!(l.cpus[0].freq_mhz, None);
    assert_eq!(
        l.cpus
            .iter()
            .filter(|c| !c.online)
            .map(|c| c.id)
            .collect::<Vec<_>>(),
        vec![3, 4]
    );
    assert_eq!(l.emc.as_ref().map(|e| e.freq_mhz.is_empty()), Some(true));
    assert_eq!(l.gpu_load_pct(), Some(0.0));
    assert_eq!(l.gpu_freq_mhz(), None);
    assert_eq!(l.board_power_mw(), Some(3140.0));
}

#[test]
fn jetpack5_orin_with_gpc_arrays_engines_and_offline_sensors() {
    let lines = fixture("jp5-orin-root.log");
    let l = &lines[1];
    assert_eq!(l.timestamp.as_deref(), Some("2026-11-29T14:02:12"));
    assert_eq!(l.cpus.len(), 12);
    assert_eq!(l.cpus.iter().filter(|c| c.online).count(), 8);
    assert_eq!(l.cpus[8].freq_mhz, Some(729));
    assert_eq!(l.gpu.len(), 2);
    assert_eq!(l.gpu[0].freq_mhz, vec![1300, 1300]);
    assert_eq!(l.gpu[1].name, "GR3D2_FREQ");
    assert_eq!(l.gpu_load_pct(), Some(81.0));
    let nvenc = lines[0].engines.iter().find(|e| e.name == "NVENC");
    assert_eq!(nvenc.map(|e| (e.on, e.load_pct)), Some((true, Some(1.0))));
    let dla = l.engines.iter().find(|e| e.name == "NVDLA0");
    assert_eq!(dla.map(|e| e.on), Some(false));
    assert_eq!(temp(l, "CV0").map(|t| t.celsius), Some(None));
    assert_eq!(temp(l, "tj").and_then(|t| t.celsius), Some(55.6));
    // NC rails are left out; no VDD_IN on AGX Orin, so the total is the sum.
    assert_eq!(l.rails.len(), 4);
    assert_eq!(l.board_power_mw(), Some(9512.0 + 2401.0 + 5031.0 + 805.0));
}

#[test]
fn jetpack6_lower_case_sensors_and_no_root() {
    let l = &fixture("jp6-orin-nano-nonroot.log")[0];
    assert_eq!(l.cpus[5].load_pct, Some(6.0));
    assert_eq!(l.gpu_load_pct(), Some(63.0));
    assert_eq!(temp(l, "gpu").and_then(|t| t.celsius), Some(50.062));
    assert_eq!(l.board_power_mw(), Some(7120.0));
}

#[test]
fn jetpack7_thor_pairs_triples_and_frequency_only_gpu() {
    let l = &fixture("jp7-thor.log")[0];
    assert_eq!(l.cpus.len(), 14);
    assert_eq!(l.gpu_load_pct(), None);
    assert_eq!(l.gpu_freq_mhz(), Some(1575));
    let cpu = temp(l, "cpu");
    assert_eq!(
        cpu.map(|t| (t.celsius, t.average_celsius)),
        Some((Some(47.6), Some(47.5)))
    );
    assert_eq!(l.rails[0].peak_mw, Some(6100.0));
    assert_eq!(l.board_power_mw(), Some(4020.0 + 6630.0 + 2200.0));
}

#[test]
fn stamps() {
    assert_eq!(
        seconds_between("2026-11-29T23:59:59", "2026-11-30T00:00:01"),
        Some(2.0)
    );
    assert_eq!(seconds_between("x", "2026-11-30T00:00:01"), None);
}

#[test]
fn implausible_readings_are_dropped_and_listed() {
    let text = "RAM 18446744073709551615/3964MB SWAP 5/10MB CPU [-3%@1479,nan%@1479,50%@999999] \
                EMC_FREQ 9%@1600 GR3D_FREQ 250%@921 gpu@NaNC cpu@41.5C pmic@999C \
                POM_5V_IN -5/1628 VDD_IN 3000/2900";
    let l = match parse_line(text) {
        Ok(l) => l,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        l.implausible,
        vec![
            "RAM 18446744073709551615/3964MB",
            "CPU0 -3%",
            "CPU1 NaN%",
            "CPU2 @999999MHz",
            "GR3D_FREQ 250%",
            "gpu@NaNC",
            "pmic@999C",
            "POM_5V_IN -5mW",
        ]
    );
    assert_eq!((l.ram_used_mb, l.ram_total_mb), (None, None));
    assert_eq!((l.swap_used_mb, l.swap_total_mb), (Some(5), Some(10)));
    assert_eq!(l.cpus[2].load_pct, Some(50.0));
    assert_eq!(l.gpu_load_pct(), None);
    assert_eq!(l.gpu_freq_mhz(), Some(921));
    assert_eq!(l.temperatures.len(), 1);
    assert_eq!(l.rails.len(), 1);
    assert!(l.unparsed.is_empty(), "{:?}", l.unparsed);
    // The offline marker is not a drop.
    assert!(parse_line("cv0@-256C RAM 1/2MB")
        .is_ok_and(|l| l.implausible.is_empty() && l.temperatures[0].celsius.is_none()));
}

#[test]
fn a_replay_streams_counts_drops_and_cuts_overlong_lines() {
    let log = format!(
        "RAM 1/2MB GR3D_FREQ 250%@921\n{}\nnot tegrastats\n\n12-01-2026 10:00:00 RAM 1/2MB\n12-01-2026 10:00:03 RAM 1/2MB CPU [101%]\n",
        "x".repeat(MAX_LINE_BYTES + 10)
    );
    let mut samples = Vec::new();
    let mut warnings = Vec::new();
    let replay = replay(
        std::io::BufReader::with_capacity(64, log.as_bytes()),
        std::time::Duration::from_millis(500),
        |s| {
            samples.push(s);
            Ok(())
        },
        |line, w| warnings.push((line, w)),
    );
    let replay = match replay {
        Ok(r) => r,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(
        replay,
        Replay {
            samples: 3,
            dropped: 2,
            first_dropped: Some((1, "GR3D_FREQ 250%".to_string())),
        }
    );
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert_eq!(warnings[0].0, Some(2));
    assert!(warnings[0].1.contains("a line over"), "{warnings:?}");
    assert_eq!(warnings[1].0, Some(3));
    // The first line has no stamp: t_s by the interval until stamped lines, which count
    // from the first line's stamp (none here), so by the interval too.
    let t: Vec<f64> = samples.iter().map(|s| s.t_s).collect();
    assert_eq!(t, vec![0.0, 0.5, 1.0]);
}

#[test]
fn garbage_and_truncated_lines_are_errors_or_partial() {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/tegrastats/broken.log",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap_or_default();
    let (lines, errors) = parse_log(&text);
    assert_eq!(lines.iter().map(|l| l.0).collect::<Vec<_>>(), vec![2, 4]);
    let lines: Vec<Line> = lines.into_iter().map(|(_, l)| l).collect();
    // Line 1 is prose, line 3 has nothing readable: errors with their line numbers.
    assert_eq!(errors.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 3]);
    assert_eq!(lines.len(), 2);
    // A garbled line keeps its RAM figures and lists what it could not read.
    assert_eq!(lines[0].ram_used_mb, Some(1890));
    assert!(lines[0].cpus.is_empty());
    assert!(lines[0].unparsed.iter().any(|t| t.contains("banana")));
    assert!(lines[0].unparsed.contains(&"POM_5V_IN".to_string()));
    // A line cut short keeps its timestamp and RAM.
    assert_eq!(lines[1].timestamp.as_deref(), Some("2026-11-29T14:02:11"));
    assert_eq!(lines[1].ram_total_mb, Some(30536));
    assert!(matches!(parse_line(""), Err(TegraError::NotTegrastats(_))));
}
