//! Colour themes: the four shipped in `themes/` are built in; a user theme starts
//! from one of them (`base`) and overrides only the colours it names. `NO_COLOR` selects the
//! monochrome theme, which marks the selection in reverse video instead of colour.

use anyhow::Context;
use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The themes shipped with edgeprof, by name, as their TOML text.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
    ("monochrome", include_str!("../../themes/monochrome.toml")),
];

/// Colours by role.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    pub text: Color,
    pub muted: Color,
    pub accent: Color,
    pub border: Color,
    pub selected_fg: Color,
    pub selected_bg: Color,
    pub ok: Color,
    pub warn: Color,
    pub error: Color,
    pub series: Vec<Color>,
    /// No colours at all: emphasis by bold and reverse video.
    pub monochrome: bool,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: Option<String>,
    base: Option<String>,
    #[serde(default)]
    colors: Colors,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Colors {
    text: Option<String>,
    muted: Option<String>,
    accent: Option<String>,
    border: Option<String>,
    selected_fg: Option<String>,
    selected_bg: Option<String>,
    ok: Option<String>,
    warn: Option<String>,
    error: Option<String>,
    series: Option<Vec<String>>,
}

fn colour(role: &str, text: &str) -> anyhow::Result<Color> {
    text.parse::<Color>().map_err(|_| {
        anyhow::anyhow!(
            "colour {role} = {text:?} is not a colour name, #rrggbb or an index from 0 to 255"
        )
    })
}

impl Theme {
    /// The built-in theme `name`.
    pub fn built_in(name: &str) -> Option<Theme> {
        let (_, text) = BUILT_IN.iter().find(|(n, _)| *n == name)?;
        Theme::from_toml(text, None).ok()
    }

    /// A theme from its TOML text, over `base` (a built-in, `dark` unless the text names one).
    pub fn from_toml(text: &str, base: Option<Theme>) -> anyhow::Result<Theme> {
        let file: ThemeFile = toml::from_str(text).context("not a theme file")?;
        let mut theme = match (base, &file.base) {
            (_, Some(name)) => Theme::built_in(name).ok_or_else(|| {
                anyhow::anyhow!(
                    "base = {name:?} is not a built-in theme ({})",
                    names().join(", ")
                )
            })?,
            (Some(base), None) => base,
            (None, None) => Theme::fallback(),
        };
        let c = &file.colors;
        for (role, value, slot) in [
            ("text", &c.text, &mut theme.text),
            ("muted", &c.muted, &mut theme.muted),
            ("accent", &c.accent, &mut theme.accent),
            ("border", &c.border, &mut theme.border),
            ("selected_fg", &c.selected_fg, &mut theme.selected_fg),
            ("selected_bg", &c.selected_bg, &mut theme.selected_bg),
            ("ok", &c.ok, &mut theme.ok),
            ("warn", &c.warn, &mut theme.warn),
            ("error", &c.error, &mut theme.error),
        ] {
            if let Some(v) = value {
                *slot = colour(role, v)?;
            }
        }
        if let Some(series) = &c.series {
            if series.is_empty() {
                anyhow::bail!("series must list at least one colour");
            }
            theme.series = series
                .iter()
                .map(|v| colour("series", v))
                .collect::<anyhow::Result<_>>()?;
        }
        if let Some(name) = file.name {
            theme.name = name;
        }
        theme.monochrome = [
            theme.text,
            theme.muted,
            theme.accent,
            theme.selected_bg,
            theme.ok,
            theme.error,
        ]
        .iter()
        .chain(&theme.series)
        .all(|c| *c == Color::Reset);
        Ok(theme)
    }

    /// What the dark theme's file says, written out for when it cannot be read.
    fn fallback() -> Theme {
        Theme {
            name: "dark".into(),
            text: Color::Reset,
            muted: Color::DarkGray,
            accent: Color::Cyan,
            border: Color::Gray,
            selected_fg: Color::Black,
            selected_bg: Color::Cyan,
            ok: Color::Green,
            warn: Color::Yellow,
            error: Color::LightRed,
            series: vec![Color::Cyan, Color::LightMagenta, Color::Yellow],
            monochrome: false,
        }
    }

    /// The theme to use: `choice` (a built-in name, a user theme's name under
    /// `config_dir/themes/`, or a file path), monochrome under `no_color`, else dark.
    pub fn select(
        choice: Option<&str>,
        no_color: bool,
        config_dir: Option<&Path>,
    ) -> anyhow::Result<Theme> {
        if no_color {
            return Ok(Theme::built_in("monochrome").unwrap_or_else(Theme::fallback));
        }
        let Some(choice) = choice else {
            return Ok(Theme::built_in("dark").unwrap_or_else(Theme::fallback));
        };
        if let Some(theme) = Theme::built_in(choice) {
            return Ok(theme);
        }
        let candidates: Vec<PathBuf> = if choice.ends_with(".toml") || choice.contains('/') {
            vec![PathBuf::from(choice)]
        } else {
            config_dir
                .map(|d| d.join("themes").join(format!("{choice}.toml")))
                .into_iter()
                .collect()
        };
        for path in &candidates {
            if let Ok(text) = std::fs::read_to_string(path) {
                return Theme::from_toml(&text, None)
                    .with_context(|| format!("theme {}", path.display()));
            }
        }
        anyhow::bail!(
            "no theme {choice:?}: not a built-in ({}) and no file {}",
            names().join(", "),
            candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" or ")
        )
    }

    pub fn text(&self) -> Style {
        Style::default().fg(self.text)
    }

    pub fn muted(&self) -> Style {
        if self.monochrome {
            Style::default().add_modifier(Modifier::DIM)
        } else {
            Style::default().fg(self.muted)
        }
    }

    pub fn accent(&self) -> Style {
        let s = Style::default().fg(self.accent);
        if self.monochrome {
            s.add_modifier(Modifier::BOLD)
        } else {
            s
        }
    }

    pub fn border(&self, focused: bool) -> Style {
        if focused {
            self.accent().add_modifier(Modifier::BOLD)
        } else {
            Style::default().fg(self.border)
        }
    }

    pub fn selected(&self) -> Style {
        if self.monochrome {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default().fg(self.selected_fg).bg(self.selected_bg)
        }
    }

    pub fn ok(&self) -> Style {
        Style::default().fg(self.ok)
    }

    pub fn warn(&self) -> Style {
        let s = Style::default().fg(self.warn);
        if self.monochrome {
            s.add_modifier(Modifier::BOLD)
        } else {
            s
        }
    }

    pub fn error(&self) -> Style {
        let s = Style::default().fg(self.error);
        if self.monochrome {
            s.add_modifier(Modifier::BOLD)
        } else {
            s
        }
    }

    /// The colour of the `k`th line or bar of a chart.
    pub fn series(&self, k: usize) -> Color {
        self.series
            .get(k % self.series.len().max(1))
            .copied()
            .unwrap_or(Color::Reset)
    }
}

/// The built-in themes' names.
pub fn names() -> Vec<&'static str> {
    BUILT_IN.iter().map(|(n, _)| *n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_theme_reads_and_sets_every_role() {
        for (name, text) in BUILT_IN {
            let theme = match Theme::from_toml(text, None) {
                Ok(t) => t,
                Err(e) => panic!("{name}: {e:#}"),
            };
            assert_eq!(theme.name, *name);
            assert!(!theme.series.is_empty());
            // Each file names every colour itself rather than leaning on the fallback.
            let file: ThemeFile = match toml::from_str(text) {
                Ok(f) => f,
                Err(e) => panic!("{name}: {e}"),
            };
            let c = file.colors;
            assert!(
                c.text.is_some()
                    && c.muted.is_some()
                    && c.accent.is_some()
                    && c.border.is_some()
                    && c.selected_fg.is_some()
                    && c.selected_bg.is_some()
                    && c.ok.is_some()
                    && c.warn.is_some()
                    && c.error.is_some()
                    && c.series.is_some(),
                "{name} leaves a role out"
            );
            assert_eq!(theme.monochrome, *name == "monochrome", "{name}");
        }
    }

    #[test]
    fn a_user_theme_overrides_only_what_it_names() {
        let Ok(theme) =
            Theme::from_toml("base = \"light\"\n[colors]\naccent = \"#8250df\"\n", None)
        else {
            panic!("rejected")
        };
        let Some(light) = Theme::built_in("light") else {
            panic!("no light theme")
        };
        assert_eq!(theme.accent, Color::Rgb(0x82, 0x50, 0xdf));
        assert_eq!(
            Theme {
                accent: light.accent,
                ..theme
            },
            light
        );
    }

    #[test]
    fn bad_themes_say_what_is_wrong() {
        let e = |text: &str| match Theme::from_toml(text, None) {
            Ok(_) => panic!("accepted {text}"),
            Err(e) => format!("{e:#}"),
        };
        assert!(e("[colors]\naccent = \"mauve-ish\"\n").contains("accent"));
        assert!(e("base = \"solarized\"\n").contains("not a built-in theme"));
        assert!(e("[colors]\nsparkle = \"red\"\n").contains("unknown field"));
        assert!(e("[colors]\nseries = []\n").contains("at least one"));
    }

    #[test]
    fn selection_by_name_file_and_no_color() {
        let dir = std::env::temp_dir().join(format!("edgeprof-theme-{}", std::process::id()));
        let themes = dir.join("themes");
        let _ = std::fs::create_dir_all(&themes);
        let _ = std::fs::write(themes.join("mine.toml"), "[colors]\nok = \"blue\"\n");
        let pick = |choice: Option<&str>, no_color: bool| {
            Theme::select(choice, no_color, Some(&dir)).map(|t| (t.name.clone(), t.ok))
        };
        assert_eq!(pick(None, false).ok(), Some(("dark".into(), Color::Green)));
        assert_eq!(
            pick(Some("mine"), false).ok(),
            Some(("dark".into(), Color::Blue))
        );
        assert_eq!(
            pick(Some("dark"), true).ok().map(|t| t.0),
            Some("monochrome".into())
        );
        let path = themes.join("mine.toml");
        assert!(pick(path.to_str(), false).is_ok());
        match pick(Some("nope"), false) {
            Ok(_) => panic!("found a theme that does not exist"),
            Err(e) => assert!(e.to_string().contains("not a built-in"), "{e}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
