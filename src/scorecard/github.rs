//! Refreshes the community figures (stars, forks, contributors, open issues, latest release)
//! through the GitHub REST API, with conditional requests (ETags: a 304 costs no rate limit),
//! an optional token, and the rate limit and network failures reported rather than fatal. The
//! figures are kept in the data directory and laid over the shipped cards.

use super::cards::{Card, Cites, GitHubFigures, Release, Source};
use crate::error::Context;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// GitHub's REST API; `EDGEPROF_GITHUB_API` or `--api-url` point elsewhere (GitHub Enterprise,
/// a mirror, the tests' replay server).
pub const DEFAULT_API: &str = "https://api.github.com";
/// Environment variables that may hold a token, in the order they are read.
pub const TOKEN_VARS: [&str; 2] = ["EDGEPROF_GITHUB_TOKEN", "GITHUB_TOKEN"];

/// What edgeprof last read for one repository, with the ETags to ask again cheaply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CachedRepo {
    pub stars: Option<u64>,
    pub forks: Option<u64>,
    pub open_issues: Option<u64>,
    pub contributors: Option<u64>,
    pub release: Option<CachedRelease>,
    /// The repository publishes no GitHub releases (its releases go to a registry only).
    #[serde(default)]
    pub no_releases: bool,
    /// Endpoint ("repo", "contributors", "release") → the ETag of the answer kept.
    #[serde(default)]
    pub etags: BTreeMap<String, String>,
    /// When every endpoint last answered (RFC 3339).
    pub read: Option<String>,
    /// The API address the figures came from.
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedRelease {
    pub version: String,
    /// YYYY-MM-DD.
    pub date: String,
    pub url: String,
}

/// Every repository's last reading, as stored in `DATA_DIR/frameworks/github.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cache {
    pub repos: BTreeMap<String, CachedRepo>,
}

impl Cache {
    /// The cache file under edgeprof's data directory.
    pub fn path() -> crate::error::Result<PathBuf> {
        Ok(crate::engines::env::data_dir()?
            .join("frameworks")
            .join("github.json"))
    }

    /// Reads the cache; a missing file is an empty cache, a damaged one an error naming it.
    pub fn read(path: &Path) -> crate::error::Result<Cache> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).with_context(|| {
                format!(
                    "{} is damaged (delete it and refresh again)",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Cache::default()),
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }

    pub fn write(&self, path: &Path) -> crate::error::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(self).context("cannot encode the cache")?;
        crate::results::write_atomic(path, text.as_bytes())?;
        Ok(())
    }

    /// Lays the figures read over the shipped cards: GitHub figures where read, and GitHub's
    /// latest release where it is newer than (or as new as) the shipped one.
    pub fn apply(&self, cards: &mut [Card]) {
        for card in cards {
            let Some(repo) = self.repos.get(&card.repository) else {
                continue;
            };
            let (Some(read), Some(source)) = (&repo.read, &repo.source) else {
                continue;
            };
            card.development.github = Some(GitHubFigures {
                stars: repo.stars,
                forks: repo.forks,
                contributors: repo.contributors,
                open_issues: repo.open_issues,
                read: read.clone(),
                source: source.clone(),
            });
            if let Some(release) = &repo.release {
                if release.date >= card.development.last_release.date {
                    let key = "github-release".to_string();
                    card.sources.insert(
                        key.clone(),
                        Source {
                            url: release.url.clone(),
                            as_of: read.chars().take(10).collect(),
                        },
                    );
                    card.development.last_release = Release {
                        version: release.version.clone(),
                        date: release.date.clone(),
                        source: Cites::One(key),
                    };
                }
            }
        }
    }
}

/// The shipped cards with the refreshed figures laid over them, and a warning when the cache
/// could not be read (the shipped values stand).
pub fn cards_with_refreshed() -> crate::error::Result<(Vec<Card>, Option<String>)> {
    let mut cards = super::cards::shipped()?;
    let warning = match Cache::path().and_then(|p| Cache::read(&p)) {
        Ok(cache) => {
            cache.apply(&mut cards);
            None
        }
        Err(e) => Some(format!("{e:#}; showing the shipped values")),
    };
    Ok((cards, warning))
}

/// How one repository's refresh went.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum RepoOutcome {
    /// Every endpoint answered; `unchanged` of them with 304 (their ETag still held).
    Read { unchanged: usize, asked: usize },
    /// GitHub refused or failed for this repository; its previous figures are kept.
    Failed { reason: String },
    /// Not asked: the run stopped before it (offline, rate limit).
    NotAsked,
}

/// One framework's line of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RepoReport {
    pub framework: String,
    pub repository: String,
    #[serde(flatten)]
    pub outcome: RepoOutcome,
}

/// The run's end state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    Refreshed,
    Partial,
    Offline,
    RateLimited,
}

/// What a refresh did, for the terminal and `--json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub status: Status,
    pub api: String,
    pub authenticated: bool,
    /// Each framework's outcome, in the order asked.
    pub repos: Vec<RepoReport>,
    /// The rate limit as GitHub last reported it: remaining of limit, reset (RFC 3339).
    pub rate_remaining: Option<u64>,
    pub rate_limit: Option<u64>,
    pub rate_reset: Option<String>,
    /// The sentence for the user when the run stopped early.
    pub stopped: Option<String>,
    pub cache: String,
}

/// Why a request got no usable answer.
#[derive(Debug)]
enum Failure {
    /// No connection (DNS, refused, timeout, TLS): the network or the API is unreachable.
    Offline(String),
    /// The rate limit is spent (primary or secondary).
    RateLimited {
        reset: Option<i64>,
        retry_after: Option<u64>,
    },
}

/// An answer: status, ETag, body, and the Link header (pagination).
struct Reply {
    status: u16,
    etag: Option<String>,
    link: Option<String>,
    body: String,
}

/// Talks to the API for one run.
pub struct Client {
    agent: ureq::Agent,
    api: String,
    token: Option<String>,
    rate_remaining: Option<u64>,
    rate_limit: Option<u64>,
    rate_reset: Option<i64>,
}

impl Client {
    /// A client for `api` with the token from the environment, if any.
    pub fn new(api: &str, token: Option<String>) -> Client {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(30)))
            .user_agent(format!("edgeprof/{}", env!("CARGO_PKG_VERSION")))
            .build();
        Client {
            agent: config.into(),
            api: api.trim_end_matches('/').to_string(),
            token,
            rate_remaining: None,
            rate_limit: None,
            rate_reset: None,
        }
    }

    /// The token from `EDGEPROF_GITHUB_TOKEN` or `GITHUB_TOKEN`.
    pub fn token_from_env() -> Option<String> {
        TOKEN_VARS
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .map(|t| t.trim().to_string())
            .find(|t| !t.is_empty())
    }

    fn get(&mut self, path: &str, etag: Option<&str>) -> Result<Reply, Failure> {
        let url = format!("{}{path}", self.api);
        let mut request = self
            .agent
            .get(&url)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28");
        if let Some(token) = &self.token {
            request = request.header("Authorization", &format!("Bearer {token}"));
        }
        if let Some(etag) = etag {
            request = request.header("If-None-Match", etag);
        }
        let mut response = request
            .call()
            .map_err(|e| Failure::Offline(e.to_string()))?;
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let number = |name: &str| header(name).and_then(|v| v.trim().parse::<i64>().ok());
        if let Some(n) = number("x-ratelimit-remaining") {
            self.rate_remaining = u64::try_from(n).ok();
        }
        if let Some(n) = number("x-ratelimit-limit") {
            self.rate_limit = u64::try_from(n).ok();
        }
        if let Some(n) = number("x-ratelimit-reset") {
            self.rate_reset = Some(n);
        }
        let status = response.status().as_u16();
        let retry_after = number("retry-after").and_then(|n| u64::try_from(n).ok());
        if (status == 403 || status == 429)
            && (self.rate_remaining == Some(0) || retry_after.is_some())
        {
            return Err(Failure::RateLimited {
                reset: self.rate_reset,
                retry_after,
            });
        }
        let etag = header("etag");
        let link = header("link");
        let body = response
            .body_mut()
            .with_config()
            .limit(4 << 20)
            .read_to_string()
            .map_err(|e| Failure::Offline(format!("the answer broke off: {e}")))?;
        Ok(Reply {
            status,
            etag,
            link,
            body,
        })
    }
}

/// GitHub's message in an error answer, or the status.
fn message_of(reply: &Reply) -> String {
    serde_json::from_str::<serde_json::Value>(&reply.body)
        .ok()
        .and_then(|v| {
            v.get("message")
                .and_then(|m| m.as_str())
                .map(str::to_string)
        })
        .map(|m| format!("{} ({m})", reply.status))
        .unwrap_or_else(|| reply.status.to_string())
}

/// The page number of `rel="last"` in a Link header: with one item per page, the count.
pub fn last_page(link: &str) -> Option<u64> {
    link.split(',').find_map(|part| {
        let (target, params) = part.split_once(';')?;
        if !params.contains("rel=\"last\"") {
            return None;
        }
        let url = target.trim().trim_start_matches('<').trim_end_matches('>');
        let query = url.split_once('?')?.1;
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix("page="))
            .and_then(|n| n.parse().ok())
    })
}

/// The three endpoints asked per repository.
const ENDPOINTS: [&str; 3] = ["repo", "contributors", "release"];

/// Reads one endpoint into `repo`; Ok(true) when the answer was 304 (unchanged).
fn read_endpoint(
    client: &mut Client,
    repository: &str,
    endpoint: &str,
    repo: &mut CachedRepo,
) -> Result<Result<bool, String>, Failure> {
    let path = match endpoint {
        "repo" => format!("/repos/{repository}"),
        "contributors" => format!("/repos/{repository}/contributors?per_page=1"),
        _ => format!("/repos/{repository}/releases/latest"),
    };
    // Ask conditionally only when the value the ETag stands for is kept.
    let kept = match endpoint {
        "repo" => repo.stars.is_some(),
        "contributors" => repo.contributors.is_some(),
        _ => repo.release.is_some() || repo.no_releases,
    };
    let etag = if kept {
        repo.etags.get(endpoint).cloned()
    } else {
        None
    };
    let reply = client.get(&path, etag.as_deref())?;
    match reply.status {
        304 => return Ok(Ok(true)),
        200 => {}
        404 if endpoint == "release" => {
            repo.release = None;
            repo.no_releases = true;
            if let Some(etag) = reply.etag {
                repo.etags.insert(endpoint.to_string(), etag);
            }
            return Ok(Ok(false));
        }
        _ => return Ok(Err(format!("{path} answered {}", message_of(&reply)))),
    }
    let json: serde_json::Value = match serde_json::from_str(&reply.body) {
        Ok(v) => v,
        Err(e) => return Ok(Err(format!("{path} answered something not JSON ({e})"))),
    };
    let count = |key: &str| json.get(key).and_then(|v| v.as_u64());
    match endpoint {
        "repo" => {
            let (Some(stars), Some(forks)) = (count("stargazers_count"), count("forks_count"))
            else {
                return Ok(Err(format!("{path} answered without stargazers_count")));
            };
            repo.stars = Some(stars);
            repo.forks = Some(forks);
            repo.open_issues = count("open_issues_count");
        }
        "contributors" => {
            let on_page = json.as_array().map(|a| a.len() as u64).unwrap_or(0);
            repo.contributors = Some(reply.link.as_deref().and_then(last_page).unwrap_or(on_page));
        }
        _ => {
            let version = json.get("tag_name").and_then(|v| v.as_str());
            let date = json.get("published_at").and_then(|v| v.as_str());
            let (Some(version), Some(date)) = (version, date) else {
                return Ok(Err(format!(
                    "{path} answered without tag_name/published_at"
                )));
            };
            let url = json
                .get("html_url")
                .and_then(|v| v.as_str())
                .unwrap_or(&path)
                .to_string();
            repo.release = Some(CachedRelease {
                version: version.trim_start_matches('v').to_string(),
                date: date.chars().take(10).collect(),
                url,
            });
            repo.no_releases = false;
        }
    }
    match reply.etag {
        Some(etag) => repo.etags.insert(endpoint.to_string(), etag),
        None => repo.etags.remove(endpoint),
    };
    Ok(Ok(false))
}

/// Refreshes `cards`' repositories into `cache`, telling `progress` after each one. Stops at
/// the first sign of no network or a spent rate limit; what was read before stays.
pub fn refresh(
    client: &mut Client,
    cards: &[&Card],
    cache: &mut Cache,
    now: &str,
    mut progress: impl FnMut(usize, &str, &RepoOutcome),
) -> Report {
    let mut repos = Vec::new();
    let mut stopped: Option<(Status, String)> = None;
    for (i, card) in cards.iter().enumerate() {
        if stopped.is_some() {
            repos.push(RepoReport {
                framework: card.name.clone(),
                repository: card.repository.clone(),
                outcome: RepoOutcome::NotAsked,
            });
            continue;
        }
        let mut repo = cache
            .repos
            .get(&card.repository)
            .cloned()
            .unwrap_or_default();
        let mut unchanged = 0;
        let mut outcome = None;
        for endpoint in ENDPOINTS {
            match read_endpoint(client, &card.repository, endpoint, &mut repo) {
                Ok(Ok(was_unchanged)) => unchanged += usize::from(was_unchanged),
                Ok(Err(reason)) => {
                    outcome = Some(RepoOutcome::Failed { reason });
                    break;
                }
                Err(Failure::Offline(why)) => {
                    let what = if repos
                        .iter()
                        .any(|r| matches!(r.outcome, RepoOutcome::Read { .. }))
                    {
                        "the network went away during the refresh"
                    } else {
                        "offline"
                    };
                    stopped = Some((
                        Status::Offline,
                        format!("{what}: cannot reach {} ({why})", client.api),
                    ));
                    break;
                }
                Err(Failure::RateLimited { reset, retry_after }) => {
                    let when = match (retry_after, reset.and_then(rfc3339_of)) {
                        (Some(s), _) => format!("asks to wait {s} s"),
                        (None, Some(at)) => format!("is spent until {at}"),
                        (None, None) => "is spent".to_string(),
                    };
                    let hint = if client.token.is_some() {
                        ""
                    } else {
                        "; a token in EDGEPROF_GITHUB_TOKEN or GITHUB_TOKEN raises it to 5000 \
                         requests an hour"
                    };
                    stopped = Some((
                        Status::RateLimited,
                        format!("GitHub's rate limit {when}{hint}"),
                    ));
                    break;
                }
            }
        }
        let outcome = match (outcome, &stopped) {
            (Some(failed), _) => failed,
            (None, Some(_)) => RepoOutcome::NotAsked,
            (None, None) => {
                repo.read = Some(now.to_string());
                repo.source = Some(card.api_url(&client.api));
                cache.repos.insert(card.repository.clone(), repo);
                RepoOutcome::Read {
                    unchanged,
                    asked: ENDPOINTS.len(),
                }
            }
        };
        if outcome != RepoOutcome::NotAsked {
            progress(i, &card.name, &outcome);
        }
        repos.push(RepoReport {
            framework: card.name.clone(),
            repository: card.repository.clone(),
            outcome,
        });
    }
    let read = repos
        .iter()
        .filter(|r| matches!(r.outcome, RepoOutcome::Read { .. }))
        .count();
    let status = match &stopped {
        Some((status, _)) => *status,
        None if read == repos.len() => Status::Refreshed,
        None => Status::Partial,
    };
    Report {
        status,
        api: client.api.clone(),
        authenticated: client.token.is_some(),
        repos,
        rate_remaining: client.rate_remaining,
        rate_limit: client.rate_limit,
        rate_reset: client.rate_reset.and_then(rfc3339_of),
        stopped: stopped.map(|(_, why)| why),
        cache: String::new(),
    }
}

/// A Unix time as RFC 3339 (UTC).
fn rfc3339_of(seconds: i64) -> Option<String> {
    time::OffsetDateTime::from_unix_timestamp(seconds)
        .ok()?
        .format(&time::format_description::well_known::Rfc3339)
        .ok()
}

/// Refreshes `cards`' repositories from the GitHub API at `api` into this user's cache of
/// figures (see [`refresh`]) and keeps the cache; returns the report (naming the cache) and the
/// cache, to lay over the shipped cards.
pub fn refresh_kept(
    api: &str,
    cards: &[Card],
    progress: impl FnMut(usize, &str, &RepoOutcome),
) -> crate::error::Result<(Report, Cache)> {
    use crate::error::Context;
    let path = Cache::path()?;
    let mut cache = Cache::read(&path)?;
    let mut client = Client::new(api, Client::token_from_env());
    let refs: Vec<&Card> = cards.iter().collect();
    let now = crate::text::now_rfc3339();
    let mut report = refresh(&mut client, &refs, &mut cache, &now, progress);
    cache
        .write(&path)
        .context("cannot keep the refreshed figures")?;
    report.cache = path.display().to_string();
    Ok((report, cache))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_page_of_a_one_per_page_list_is_the_count() {
        let link =
            "<https://api.github.com/repositories/156939672/contributors?per_page=1&page=2>; \
                    rel=\"next\", <https://api.github.com/repositories/156939672/contributors?\
                    per_page=1&page=873>; rel=\"last\"";
        assert_eq!(last_page(link), Some(873));
        assert_eq!(
            last_page("<https://x/y?page=2&per_page=1>; rel=\"next\""),
            None
        );
        assert_eq!(last_page(""), None);
    }

    #[test]
    fn refreshed_figures_and_a_newer_release_lay_over_the_shipped_card() -> crate::error::Result<()>
    {
        let mut cards = super::super::cards::shipped()?;
        let mut cache = Cache::default();
        cache.repos.insert(
            "sonos/tract".into(),
            CachedRepo {
                stars: Some(11_000),
                forks: Some(250),
                open_issues: Some(90),
                contributors: Some(100),
                release: Some(CachedRelease {
                    version: "0.24.0".into(),
                    date: "2026-12-01".into(),
                    url: "https://github.com/sonos/tract/releases/tag/0.24.0".into(),
                }),
                read: Some("2026-12-02T10:00:00Z".into()),
                source: Some("https://api.github.com/repos/sonos/tract".into()),
                ..CachedRepo::default()
            },
        );
        // An older GitHub release than the shipped registry release does not replace it.
        cache.repos.insert(
            "huggingface/candle".into(),
            CachedRepo {
                stars: Some(1),
                release: Some(CachedRelease {
                    version: "0.9.0".into(),
                    date: "2025-01-01".into(),
                    url: "https://github.com/huggingface/candle/releases/tag/0.9.0".into(),
                }),
                read: Some("2026-12-02T10:00:00Z".into()),
                source: Some("https://api.github.com/repos/huggingface/candle".into()),
                ..CachedRepo::default()
            },
        );
        cache.apply(&mut cards);
        let tract = super::super::cards::find(&cards, "tract")?;
        let figures = tract
            .development
            .github
            .as_ref()
            .ok_or_else(|| crate::error::failed!("no figures"))?;
        assert_eq!(figures.stars, Some(11_000));
        assert_eq!(tract.development.last_release.version, "0.24.0");
        assert!(tract.problems().is_empty(), "{:?}", tract.problems());
        let candle = super::super::cards::find(&cards, "candle")?;
        assert_eq!(candle.development.last_release.version, "0.11.1");
        assert!(candle.problems().is_empty(), "{:?}", candle.problems());
        let onnxruntime = super::super::cards::find(&cards, "onnxruntime")?;
        assert!(onnxruntime.development.github.is_none());
        Ok(())
    }
}
