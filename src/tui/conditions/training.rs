//! The Training pane: whether the config's task is a distributed-training study (`[train]`)
//! instead of the inference matrix, and the study's framework, model, epochs, batch, data and
//! members. `r` then trains each cluster size; `w` saves the section with the rest.

use super::*;
use edgeprof::config::Train;

/// The lines before the members, in order.
const TASK: usize = 0;
const PYTORCH: usize = 1;
const TENSORFLOW: usize = 2;
const MODEL: usize = 3;
const EPOCHS: usize = 4;
const BATCH: usize = 5;
const DATA: usize = 6;
/// The first member line (after the sizes').
const MEMBERS: usize = 8;

/// Models both harnesses build.
const MODELS: [&str; 2] = ["cnn", "mobilenet_v2"];

impl Conditions {
    /// The members a study can train on: this machine and every `[[nodes]]`.
    fn candidates(&self) -> Vec<String> {
        let mut all = vec![config::LOCAL_NODE.to_string()];
        all.extend(self.config.nodes.iter().map(|n| n.name.clone()));
        all
    }

    pub(super) fn training_items(&self) -> Vec<Item> {
        let on = self.config.train.is_some();
        let t = self.config.train.clone().unwrap_or_default();
        let line = |label: &str, ticked: Option<bool>, note: String| Item {
            label: label.to_string(),
            ticked,
            disabled: !on && label != "train",
            note,
        };
        let members = t.members(&self.config.nodes);
        let processes = members == [config::LOCAL_NODE];
        let sizes = if !t.sizes.is_empty() {
            t.sizes
                .iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        } else if processes {
            "1, 2, 4 (processes on this machine)".to_string()
        } else {
            let all = edgeprof::train::study::default_sizes(members.len());
            all.iter()
                .map(|k| k.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut items = vec![
            line(
                "train",
                Some(on),
                if on {
                    "r trains each cluster size, not the matrix".into()
                } else {
                    "tick to train across nodes, not the matrix".into()
                },
            ),
            line(
                "pytorch",
                Some(t.framework == "pytorch"),
                "DDP over gloo, launched by torchrun".into(),
            ),
            line(
                "tensorflow",
                Some(t.framework == "tensorflow"),
                "MultiWorkerMirroredStrategy via TF_CONFIG".into(),
            ),
            line("model", None, format!("{} (+/-)", t.model)),
            line("epochs", None, format!("{} (+/-)", t.epochs)),
            line(
                "batch",
                None,
                format!("{} per rank per step (+/-)", t.batch),
            ),
            line(
                "data",
                None,
                match &t.data {
                    Some(dir) => format!("CIFAR-10 at {}", dir.display()),
                    None => format!("synthetic, {} training images (+/-)", t.synthetic),
                },
            ),
            line("sizes", None, sizes),
        ];
        items.extend(self.candidates().into_iter().map(|name| {
            let note = match self.config.nodes.iter().find(|n| n.name == name) {
                Some(n) => format!("{} over ssh", n.destination),
                None => "this machine".to_string(),
            };
            let rank = members.iter().position(|m| *m == name);
            let note = match rank {
                Some(r) => format!("rank {r}: {note}"),
                None => note,
            };
            line(&name, Some(rank.is_some()), note)
        }));
        items
    }

    pub(super) fn training_toggle(&mut self, index: usize) -> bool {
        if index == TASK {
            self.config.train = match self.config.train.take() {
                Some(_) => None,
                None => Some(Train::default()),
            };
            return true;
        }
        let candidates = self.candidates();
        let nodes = self.config.nodes.clone();
        let Some(t) = self.config.train.as_mut() else {
            return false;
        };
        match index {
            PYTORCH | TENSORFLOW => {
                let wanted = if index == PYTORCH {
                    "pytorch"
                } else {
                    "tensorflow"
                };
                let changed = t.framework != wanted;
                t.framework = wanted.to_string();
                changed
            }
            i if i >= MEMBERS => {
                let Some(name) = candidates.get(i - MEMBERS) else {
                    return false;
                };
                // The members as they are now, written out, then this one added or taken away
                // (in the order of the pane; at least one stays).
                let mut members = t.members(&nodes);
                let changed = toggle(&mut members, name, &candidates);
                let largest = members.len();
                if changed {
                    t.nodes = members;
                    // Sizes beyond the members no longer fit.
                    t.sizes.retain(|&k| k <= largest);
                }
                changed
            }
            _ => false,
        }
    }

    /// Steps the Training pane's line `index` up (`up`) or down: the model, epochs, batch, and
    /// the synthetic set's size.
    pub fn adjust_training(&mut self, index: usize, up: bool) -> bool {
        let Some(t) = self.config.train.as_mut() else {
            return false;
        };
        match index {
            MODEL => {
                let at = MODELS.iter().position(|m| *m == t.model);
                let next = match (at, up) {
                    (Some(i), true) => (i + 1) % MODELS.len(),
                    (Some(i), false) => (i + MODELS.len() - 1) % MODELS.len(),
                    (None, _) => 0,
                };
                t.model = MODELS[next].to_string();
            }
            EPOCHS => t.epochs = ladder(t.epochs, &[1, 2, 3, 5, 10, 20, 50, 100], up),
            BATCH => t.batch = ladder(t.batch, &[8, 16, 32, 64, 128, 256], up),
            DATA if t.data.is_none() => {
                t.synthetic = ladder(
                    t.synthetic,
                    &[100, 500, 1000, 2000, 5000, 10_000, 50_000],
                    up,
                )
            }
            _ => return false,
        }
        true
    }

    /// The study the selection describes, when its task is training: what it trains, on how
    /// many members, in a line.
    pub fn training_summary(&self) -> Option<String> {
        let t = self.config.train.as_ref()?;
        let members = t.members(&self.config.nodes);
        Some(format!(
            "training {} with {} for {} epoch(s) on {}",
            t.model,
            t.framework,
            t.epochs,
            if members == [config::LOCAL_NODE] {
                "processes on this machine".to_string()
            } else {
                members.join(", ")
            }
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::conditions;
    use super::*;

    const BOARDS: &str = "[[nodes]]\nname = \"pi-1\"\ndestination = \"pi@10.0.0.2\"\n\
                          [[nodes]]\nname = \"pi-2\"\ndestination = \"pi@10.0.0.3\"\n";

    #[test]
    fn the_pane_writes_a_train_section_that_reads_back_the_same() {
        let mut c = conditions(BOARDS);
        assert!(c.config.train.is_none());
        // Nothing but the task can be changed until it is training.
        assert!(!c.toggle(Axis::Training, TENSORFLOW));
        assert!(c.toggle(Axis::Training, TASK));
        assert!(c.toggle(Axis::Training, TENSORFLOW));
        assert!(c.adjust_training(EPOCHS, true));
        assert!(c.adjust_training(MODEL, true));
        assert!(c.adjust_training(DATA, false));
        // Members: every node by default; taking pi-1 away leaves pi-2, adding local puts it
        // first (the pane's order).
        assert!(c.toggle(Axis::Training, MEMBERS + 1));
        assert!(c.toggle(Axis::Training, MEMBERS));
        let Some(t) = c.config.train.clone() else {
            panic!("no [train]")
        };
        assert_eq!(t.framework, "tensorflow");
        assert_eq!(
            (t.epochs, t.model.as_str(), t.synthetic),
            (3, "mobilenet_v2", 1000)
        );
        assert_eq!(t.nodes, ["local", "pi-2"]);
        let items = c.items(Axis::Training);
        assert_eq!(items[MEMBERS].note, "rank 0: this machine");
        assert_eq!(items[MEMBERS + 2].note, "rank 1: pi@10.0.0.3 over ssh");
        // Saved (w) and loaded (L): the same section.
        let text = c.to_toml();
        match config::parse(&text, Path::new("/elsewhere/saved.toml")) {
            Ok(back) => assert_eq!(back.train, c.config.train, "{text}"),
            Err(e) => panic!("{text}\n{e}"),
        }
        assert!(text.contains("[train]"), "{text}");
        assert!(c
            .training_summary()
            .is_some_and(|s| s.contains("on local, pi-2")));
        // And off again: no section.
        assert!(c.toggle(Axis::Training, TASK));
        assert!(!c.to_toml().contains("[train]"));
    }

    #[test]
    fn the_last_member_stays() {
        let mut c = conditions("[train]\n");
        let items = c.items(Axis::Training);
        assert_eq!(items.len(), MEMBERS + 1, "{items:?}");
        assert_eq!(
            items[MEMBERS - 1].note,
            "1, 2, 4 (processes on this machine)"
        );
        assert!(!c.toggle(Axis::Training, MEMBERS));
    }
}
