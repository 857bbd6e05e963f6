//! What a node's name may be. A node's name names its results directory in a fleet run, so the
//! config refuses names that could not, and names taken from elsewhere (a destination, a
//! `fleet.json` read back) are made safe the same way.

/// The file that makes a directory a fleet run's; no node may take its name.
pub const FLEET_FILE: &str = "fleet.json";

/// The longest node name, and so the longest directory a node's results get.
pub const MAX_NAME: usize = 100;

/// What a node's name may hold: it names the node's results directory in a fleet run.
fn plain(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_.@".contains(c)
}

/// Why `name` cannot name a node's results directory as it is, if it cannot: it must be one
/// plain path component, neither hidden (`.`, `..`, the local share's `.local`) nor the fleet
/// run's own file.
pub fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() || !name.chars().all(plain) {
        return Some("must be letters, digits, '-', '_', '.' or '@'".to_string());
    }
    if name.starts_with('.') {
        return Some(
            "must not start with '.': it names the node's results directory in a fleet run"
                .to_string(),
        );
    }
    if name == FLEET_FILE {
        return Some(format!(
            "{:?} is the fleet run's own file: give the node another name",
            FLEET_FILE
        ));
    }
    if name.len() > MAX_NAME {
        return Some(format!("must be at most {MAX_NAME} characters"));
    }
    None
}

/// The directory (one path component) that holds node `name`'s results in a fleet directory:
/// the name itself when [`name_problem`] finds none (every name a user gave), else the name
/// with each other character as `_`, after a `_` where it would be hidden or the fleet's file.
/// Names taken from a destination (`ssh://pi@board:2222`) or read back from a `fleet.json`
/// come here too, so no name can reach outside the fleet directory.
pub fn dir_name(name: &str) -> String {
    if name_problem(name).is_none() {
        return name.to_string();
    }
    let mut dir: String = name
        .chars()
        .map(|c| if plain(c) { c } else { '_' })
        .collect();
    if dir.is_empty() || dir.starts_with('.') || dir == FLEET_FILE {
        dir.insert(0, '_');
    }
    // Only ASCII is left, so any byte is a character boundary.
    dir.truncate(MAX_NAME);
    dir
}
