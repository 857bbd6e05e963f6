//! The mutations: byte flips, cuts, duplicated and deleted ranges and lines, dictionary words,
//! numbers that break parsers, invalid UTF-8 and pieces of other seeds.

use super::*;

/// Numbers that break parsers: huge, tiny, negative, not a number, past every integer type.
pub(super) const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "-1",
    "1e100",
    "-1e100",
    "1e308",
    "1e309",
    "-1e309",
    "1e-320",
    "NaN",
    "nan",
    "-nan",
    "inf",
    "-inf",
    "Infinity",
    "-Infinity",
    "4294967295",
    "4294967296",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999999999",
    "0.0000000000000000000000001",
    "1e-7",
    "255",
    "256",
    "65536",
    "0x10",
    "1_000",
    "+5",
    "..",
    "1e",
    "-",
];

/// Bytes that mean something to one parser or another.
pub(super) const BYTES: &[u8] = &[
    0, 0xff, b'\n', b'\r', b',', b'"', b'\'', b'{', b'}', b'[', b']', b'(', b')', b'-', b'+', b'.',
    b'e', b'%', b'@', b'/', b':', b'=', b'#', b' ', b'\t', b'\\', 0x80, 0xc3, 0xfe, b'0', b'9',
];

/// Characters of two, three and four bytes, for tears inside a character.
pub(super) const MULTIBYTE: &[&str] = &["è", "modèles", "µs", "°C", "中文", "…", "😀"];

/// Numbers for a JSON field: past every range a reader checks, and the values JSON allows that
/// arithmetic does not expect (negative zero, a denormal, integers past 2^53 and 2^64).
pub(super) const EXTREME_JSON: &[&str] = &[
    "-1e308",
    "1e308",
    "1e400",
    "-1e400",
    "-0.0",
    "-0",
    "0",
    "-1",
    "5e-324",
    "-5e-324",
    "4294967296",
    "9007199254740993",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
    "1.7976931348623157e308",
];

/// Sequences that are not UTF-8.
pub(super) const INVALID_UTF8: &[&[u8]] = &[
    &[0xff],
    &[0xc3, 0x28],
    &[0xe2, 0x82],
    &[0xed, 0xa0, 0x80],
    &[0xf0, 0x90, 0x80],
    &[0xc0, 0xaf],
];

pub(super) fn pick<'a, T>(rng: &mut ChaCha8Rng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

/// A random range of `data` at most `max` long (empty for empty data).
pub(super) fn range(rng: &mut ChaCha8Rng, data: &[u8], max: usize) -> std::ops::Range<usize> {
    if data.is_empty() {
        return 0..0;
    }
    let start = rng.random_range(0..data.len());
    let len = rng.random_range(1..=max.min(data.len() - start).max(1));
    start..(start + len).min(data.len())
}

/// Line boundaries of `data`: (start, end including the line end).
pub(super) fn lines(data: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, b) in data.iter().enumerate() {
        if *b == b'\n' {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < data.len() {
        out.push((start, data.len()));
    }
    out
}

pub(super) fn is_number_byte(b: u8) -> bool {
    b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')
}

/// One byte-level mutation of `data` in place.
pub(super) fn mutate_once(
    rng: &mut ChaCha8Rng,
    data: &mut Vec<u8>,
    seeds: &[Vec<u8>],
    dictionary: &[&str],
) {
    let len = data.len();
    let at = |rng: &mut ChaCha8Rng| rng.random_range(0..=len);
    match rng.random_range(0..19) {
        // A flipped bit.
        0 if len > 0 => {
            let i = rng.random_range(0..len);
            data[i] ^= 1 << rng.random_range(0..8);
        }
        // A byte that means something.
        1 if len > 0 => {
            let i = rng.random_range(0..len);
            data[i] = *pick(rng, BYTES);
        }
        // A range deleted.
        2 => {
            let r = range(rng, data, 64);
            data.drain(r);
        }
        // Random bytes inserted.
        3 => {
            let n = rng.random_range(1..=16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.random()).collect();
            let i = at(rng);
            data.splice(i..i, bytes);
        }
        // A range duplicated somewhere else.
        4 => {
            let r = range(rng, data, 512);
            let copy = data[r].to_vec();
            let i = at(rng);
            data.splice(i..i, copy);
        }
        // Truncated.
        5 => {
            let i = at(rng);
            data.truncate(i);
        }
        // A number replaced by a troublesome one.
        6 | 7 => {
            let from = if len > 0 { rng.random_range(0..len) } else { 0 };
            let digit = data[from..]
                .iter()
                .position(u8::is_ascii_digit)
                .map(|p| p + from);
            let number = pick(rng, NUMBERS).as_bytes().to_vec();
            match digit {
                Some(d) => {
                    let mut start = d;
                    while start > 0 && is_number_byte(data[start - 1]) {
                        start -= 1;
                    }
                    let mut end = d;
                    while end < data.len() && is_number_byte(data[end]) {
                        end += 1;
                    }
                    data.splice(start..end, number);
                }
                None => {
                    let i = at(rng);
                    data.splice(i..i, number);
                }
            }
        }
        // Invalid UTF-8.
        8 => {
            let i = at(rng);
            data.splice(i..i, pick(rng, INVALID_UTF8).iter().copied());
        }
        // A very long line: a piece repeated thousands of times.
        9 => {
            let r = range(rng, data, 32);
            let piece = if r.is_empty() {
                b"x".to_vec()
            } else {
                data[r].iter().copied().filter(|b| *b != b'\n').collect()
            };
            let piece = if piece.is_empty() {
                b"7".to_vec()
            } else {
                piece
            };
            let total = if rng.random_bool(0.1) {
                rng.random_range(64_000..400_000)
            } else {
                rng.random_range(1_000..16_000)
            };
            let long: Vec<u8> = piece.iter().copied().cycle().take(total).collect();
            let i = at(rng);
            data.splice(i..i, long);
        }
        // A line duplicated, many times over at times (a big log or config).
        10 => {
            let l = lines(data);
            if !l.is_empty() {
                let (s, e) = *pick(rng, &l);
                let times = match rng.random_range(0..20) {
                    0 => rng.random_range(1_000..5_000),
                    1..=3 => rng.random_range(10..200),
                    _ => 1,
                };
                let mut line = data[s..e].to_vec();
                if !line.ends_with(b"\n") {
                    line.push(b'\n');
                }
                let copies: Vec<u8> = line
                    .iter()
                    .copied()
                    .cycle()
                    .take(line.len() * times)
                    .collect();
                data.splice(s..s, copies);
            }
        }
        // A line deleted.
        11 => {
            let l = lines(data);
            if !l.is_empty() {
                let (s, e) = *pick(rng, &l);
                data.drain(s..e);
            }
        }
        // Two lines swapped.
        12 => {
            let l = lines(data);
            if l.len() >= 2 {
                let a = rng.random_range(0..l.len() - 1);
                let b = rng.random_range(a + 1..l.len());
                let (a, b) = (l[a], l[b]);
                let mut out = data[..a.0].to_vec();
                out.extend_from_slice(&data[b.0..b.1]);
                out.extend_from_slice(&data[a.1..b.0]);
                out.extend_from_slice(&data[a.0..a.1]);
                out.extend_from_slice(&data[b.1..]);
                *data = out;
            }
        }
        // A piece of another fixture.
        13 => {
            let other = pick(rng, seeds);
            let r = range(rng, other, 256);
            let piece = other[r].to_vec();
            let i = at(rng);
            data.splice(i..i, piece);
        }
        // A word of the format.
        14 | 15 if !dictionary.is_empty() => {
            let word = pick(rng, dictionary).as_bytes().to_vec();
            if rng.random_bool(0.5) || len == 0 {
                let i = at(rng);
                data.splice(i..i, word);
            } else {
                let r = range(rng, data, 12);
                data.splice(r, word);
            }
        }
        // A multi-byte character, then a tear inside one (a write cut short, a disk that
        // filled): the input ends in the middle of a character.
        16 => {
            let i = at(rng);
            data.splice(i..i, pick(rng, MULTIBYTE).bytes());
            let starts: Vec<usize> = data
                .iter()
                .enumerate()
                .filter(|(_, b)| **b >= 0xc0)
                .map(|(k, _)| k + 1)
                .collect();
            if !starts.is_empty() {
                let cut = *pick(rng, &starts);
                data.truncate(cut);
            }
        }
        // A number of a JSON field made extreme (every field of a record may be reached).
        17 | 18 => {
            let fields = json_numbers(data);
            if !fields.is_empty() {
                let r = pick(rng, &fields).clone();
                data.splice(r, pick(rng, EXTREME_JSON).bytes());
            }
        }
        _ => {
            let i = at(rng);
            data.insert(i.min(data.len()), *pick(rng, BYTES));
        }
    }
    data.truncate(MAX_INPUT);
}

/// The byte ranges of the numbers that are JSON values (after `:`, `[` or `,`), in order.
pub(super) fn json_numbers(data: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut last = b' ';
    let mut in_string = false;
    while i < data.len() {
        let b = data[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            last = b;
            i += 1;
            continue;
        }
        if (b == b'-' || b.is_ascii_digit()) && matches!(last, b':' | b'[' | b',') {
            let start = i;
            while i < data.len()
                && matches!(data[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
            {
                i += 1;
            }
            out.push(start..i);
            last = b'0';
            continue;
        }
        if !b.is_ascii_whitespace() {
            last = b;
        }
        i += 1;
    }
    out
}

/// Mutated bytes: one seed with 1 to 8 stacked mutations (mostly few).
pub(super) fn mutate_bytes(
    rng: &mut ChaCha8Rng,
    seeds: &[Vec<u8>],
    dictionary: &[&str],
) -> Vec<u8> {
    let mut data = pick(rng, seeds).clone();
    let count = if rng.random_bool(0.6) {
        1
    } else {
        rng.random_range(2..=8)
    };
    for _ in 0..count {
        mutate_once(rng, &mut data, seeds, dictionary);
    }
    data
}
