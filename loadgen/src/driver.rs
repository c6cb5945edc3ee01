//! When and how requests are sent: prefill (bounded concurrency), the open loop (request
//! `i` due at `start + i/rate`, latency measured from that intended time even when the
//! sender runs late, an in-flight cap whose overflow is counted, not dropped) and the
//! closed loop (a fixed number of workers); and the HTTP calls themselves, over one client
//! that reuses connections.

use std::fs::File;
use std::io::{BufWriter, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::config::Config;
use super::consistency::Consistency;
use super::ending::Ending;
use super::faults::Sample;
use super::mix::{Mix, Op};
use super::population::Population;
use super::progress::Line;
use super::report::{PrefillSummary, Recorder};
use super::service::Service;
use super::verify::{Content, History, Outcome, RunMarks, States, Write, WriteKind, classify};

/// Ids remembered per tenant, at most (for get, update and delete).
const KNOWN_IDS_CAP: usize = 4096;
/// A list answer is parsed for ids only while the tenant has fewer known ids than this.
const LEARN_FROM_LISTS_BELOW: usize = 32;

/// State shared by every request of a run.
pub struct Shared {
    /// How requests reach the service as each tenant.
    service: Service,
    population: Population,
    mix: Mix,
    /// Known bookmark ids per tenant (from prefill, creates and lists).
    known: Vec<Mutex<Vec<String>>>,
    /// Ids of the collections this run made, per tenant (bookmarks are filed in them).
    collections: Vec<Mutex<Vec<String>>>,
    /// `run-{run_tag}-`: every collection this run makes is named with it.
    run_collections: String,
    collected: AtomicU64,
    /// `https://example.com/<seed>`: every bookmark URL this run creates starts with it.
    url_prefix: String,
    /// Makes this run's created URLs differ from an earlier run's with the same seed.
    run_tag: u128,
    /// `{url_prefix}/run-{run_tag}/`: what every URL of this run's creates starts with.
    run_urls: String,
    created: AtomicU64,
    updated: AtomicU64,
    recorder: Arc<Recorder>,
    progress: bool,
    /// Every write and its outcome, with `--verify`.
    history: Option<History>,
    /// Each tenant's latest consistency token, and what reads did with it.
    consistency: Consistency,
    /// One JSON line per request, with `--events`.
    events: Option<Mutex<BufWriter<File>>>,
    /// Every request's time, latency and error kind, with `--timeline`.
    samples: Option<Mutex<Vec<Sample>>>,
    /// The clock of the history's intervals.
    born: Instant,
    /// Wall-clock time of `born`, in Unix milliseconds (the events' `unix_ms`).
    born_unix_ms: u128,
    /// When the measured load started, in µs since `born`.
    load_start_us: AtomicU64,
}

/// What one request came back with.
struct Answer {
    /// The operation sent (a list when the one picked needed an id and none was known).
    op: Op,
    ending: Ending,
    shard: Option<String>,
    /// The JSON error code of a non-2xx answer (`shard_unavailable`).
    code: Option<String>,
    /// Where a read was served, as `X-Read-From` said.
    read_from: Option<String>,
}

impl Answer {
    fn without_response(op: Op, ending: Ending, shard: Option<String>) -> Self {
        Answer {
            op,
            ending,
            shard,
            code: None,
            read_from: None,
        }
    }

    /// The error kind with its code when the answer had one (`503 shard_unavailable`).
    fn error_kind(&self) -> Option<String> {
        let label = self.ending.error_label()?;
        Some(match &self.code {
            Some(code) => format!("{label} {code}"),
            None => label,
        })
    }
}

/// The error kind of a request that got no (complete) response.
fn failure_kind(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        "connect"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "other"
    }
}

impl Shared {
    pub fn new(
        config: &Config,
        population: Population,
        keys: Vec<reqwest::header::HeaderValue>,
        viewer_keys: Vec<reqwest::header::HeaderValue>,
        events: Option<File>,
    ) -> Result<Self, reqwest::Error> {
        let now_unix_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let url_prefix = format!("https://example.com/{}", config.seed);
        Ok(Shared {
            service: Service::new(config, population.names().to_vec(), keys, viewer_keys)?,
            known: population
                .names()
                .iter()
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            collections: population
                .names()
                .iter()
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            run_collections: format!("run-{now_unix_ms}-"),
            collected: AtomicU64::new(0),
            run_urls: format!("{url_prefix}/run-{now_unix_ms}/"),
            url_prefix,
            run_tag: now_unix_ms,
            created: AtomicU64::new(0),
            updated: AtomicU64::new(0),
            history: config.verify.is_some().then(History::default),
            consistency: Consistency::new(population.names().len(), config.send_tokens),
            events: events.map(|f| Mutex::new(BufWriter::new(f))),
            samples: config.timeline.is_some().then(Mutex::default),
            born: Instant::now(),
            born_unix_ms: now_unix_ms,
            load_start_us: AtomicU64::new(0),
            recorder: Arc::new(Recorder::new(
                population.names(),
                population.whales().len(),
                config.timeout,
            )),
            progress: config.progress,
            mix: config.mix.clone(),
            population,
        })
    }

    /// `request` as `tenant` sends it: its header, and its key when it has one.
    pub(crate) fn as_tenant(
        &self,
        request: reqwest::RequestBuilder,
        tenant: usize,
    ) -> reqwest::RequestBuilder {
        self.service.as_tenant(request, tenant)
    }

    /// How requests reach the service, for the checker's reads after the run.
    pub fn service(&self) -> &Service {
        &self.service
    }

    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    pub(crate) fn name(&self, tenant: usize) -> &str {
        self.service.name(tenant)
    }

    pub(crate) fn client(&self) -> &reqwest::Client {
        self.service.client()
    }

    /// `{base}/api/bookmarks`
    pub(crate) fn api(&self) -> &str {
        self.service.api()
    }

    pub(crate) fn population(&self) -> &Population {
        &self.population
    }

    /// Each tenant's latest token, where reads were served, and the stale ones.
    pub fn consistency(&self) -> &Consistency {
        &self.consistency
    }

    /// The writes recorded so far (`--verify`).
    pub fn history(&self) -> Option<&History> {
        self.history.as_ref()
    }

    /// What marks this run's data: the prefix of every URL its creates use (prefill
    /// excepted) and of every collection's name.
    pub fn run_marks(&self) -> RunMarks<'_> {
        RunMarks {
            urls: &self.run_urls,
            collections: &self.run_collections,
        }
    }

    fn run_urls(&self) -> &str {
        &self.run_urls
    }

    /// Notes one request for `--events` (a JSON line: when it was due, in Unix ms, what it
    /// was, how it ended and how long it took) and `--timeline` (a sample).
    fn note(&self, tenant: usize, answer: &Answer, at: Duration, latency: Option<Duration>) {
        if let Some(samples) = &self.samples {
            let sample = Sample {
                tenant,
                at,
                latency,
                error: answer.error_kind(),
            };
            samples
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(sample);
        }
        let Some(events) = &self.events else {
            return;
        };
        let due = self.born_unix_ms + (self.run_start_offset() + at).as_millis();
        let line = json!({
            "unix_ms": due as u64,
            "tenant": self.name(tenant),
            "op": answer.op.name(),
            "status": match answer.ending { Ending::Status(s) => Some(s), _ => None },
            "error": answer.ending.error_label(),
            "code": answer.code,
            "ms": latency.map(|l| l.as_secs_f64() * 1000.0),
            "shard": answer.shard,
        });
        let mut out = events.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "{line}");
    }

    /// When the measured load started, in Unix milliseconds.
    pub fn load_start_unix_ms(&self) -> u64 {
        (self.born_unix_ms + self.run_start_offset().as_millis()) as u64
    }

    /// Takes the samples noted so far (`--timeline`).
    pub fn take_samples(&self) -> Vec<Sample> {
        self.samples
            .as_ref()
            .map(|s| std::mem::take(&mut *s.lock().unwrap_or_else(|p| p.into_inner())))
            .unwrap_or_default()
    }

    /// Marks the start of the measured load (after prefill) and returns it.
    fn start_load(&self) -> Instant {
        let now = Instant::now();
        let us = u64::try_from((now - self.born).as_micros()).unwrap_or(u64::MAX);
        self.load_start_us.store(us, Ordering::Relaxed);
        now
    }

    /// Since `born`, when the measured load started (set by the loops).
    fn run_start_offset(&self) -> Duration {
        Duration::from_micros(self.load_start_us.load(Ordering::Relaxed))
    }

    /// Flushes `--events`.
    pub fn flush_events(&self) -> std::io::Result<()> {
        match &self.events {
            Some(e) => e.lock().unwrap_or_else(|p| p.into_inner()).flush(),
            None => Ok(()),
        }
    }

    fn record_write(
        &self,
        tenant: usize,
        viewer: bool,
        batched: bool,
        kind: WriteKind,
        sent: Instant,
        outcome: Outcome,
    ) {
        if let Some(h) = &self.history {
            h.push(Write {
                tenant,
                viewer,
                batched,
                kind,
                sent: sent - self.born,
                ended: self.born.elapsed(),
                outcome,
            });
        }
    }

    fn known(&self, tenant: usize) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.known[tenant].lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, tenant: usize, id: &str) {
        let mut ids = self.known(tenant);
        if ids.len() < KNOWN_IDS_CAP && !ids.iter().any(|k| k == id) {
            ids.push(id.to_owned());
        }
    }

    fn forget(&self, tenant: usize, id: &str) {
        self.known(tenant).retain(|k| k != id);
    }

    fn collections(&self, tenant: usize) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.collections[tenant]
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// One of the tenant's collections picked by `bits`, or none (a third of the time, and
    /// always while it has none).
    fn pick_collection(&self, tenant: usize, bits: u64) -> Option<String> {
        let ids = self.collections(tenant);
        if ids.is_empty() || bits.is_multiple_of(3) {
            return None;
        }
        Some(ids[((bits / 3) % ids.len() as u64) as usize].clone())
    }

    /// A known id of `tenant`, chosen by `choice`; `take` removes it (for a delete).
    fn pick_id(&self, tenant: usize, choice: u64, take: bool) -> Option<String> {
        let mut ids = self.known(tenant);
        if ids.is_empty() {
            return None;
        }
        let i = (choice % ids.len() as u64) as usize;
        Some(if take {
            ids.swap_remove(i)
        } else {
            ids[i].clone()
        })
    }

    /// Sends one request of kind `op` for `tenant` (a list when `op` needs an id, or a
    /// viewer key, that the tenant does not have); `choice` picks the id, the collection and
    /// the states. With `--verify` a write goes into the history with what its answer
    /// promised.
    async fn execute(&self, tenant: usize, op: Op, choice: u64) -> Answer {
        let id = match op {
            Op::Get | Op::Update | Op::Batch => self.pick_id(tenant, choice, false),
            Op::Delete => self.pick_id(tenant, choice, true),
            Op::List | Op::Create | Op::Collection | Op::Viewer => None,
        };
        let op = match op {
            Op::Get | Op::Update | Op::Delete if id.is_none() => Op::List,
            Op::Viewer if !self.service.has_viewer(tenant) => Op::List,
            op => op,
        };
        // Independent picks from one seeded number: the id used its low bits.
        let bits = choice.rotate_left(23);
        let states = States::from_bits(choice >> 61);
        let name = self.name(tenant);
        let one = || format!("{}/{}", self.api(), id.as_deref().unwrap_or(""));
        let create_body = |n: u64| {
            let url = format!("{}{name}/{n}", self.run_urls());
            let content = Content {
                title: format!("loadgen {n}"),
                collection: self.pick_collection(tenant, bits),
                states,
            };
            let body = json!({
                "url": url,
                "title": content.title,
                "tags": ["loadgen"],
                "collection_id": content.collection,
                "unread": states.unread,
                "archived": states.archived,
                "favorite": states.favorite,
            });
            (body, url, content)
        };
        let update_content = |bits: u64| {
            // Unique per run, so that the checker can tell which update a row shows.
            let n = self.updated.fetch_add(1, Ordering::Relaxed);
            Content {
                title: format!("updated {}-{n}", self.run_tag),
                collection: self.pick_collection(tenant, bits),
                states,
            }
        };
        let changes = |content: &Content| {
            json!({
                "title": content.title,
                "collection_id": content.collection,
                "unread": states.unread,
                "archived": states.archived,
                "favorite": states.favorite,
            })
        };
        let (request, writes) = match op {
            Op::List => {
                let mut url = format!("{}?limit=20", self.api());
                if bits.is_multiple_of(4)
                    && let Some(c) = self.pick_collection(tenant, bits / 4 * 3 + 1)
                {
                    url.push_str("&collection=");
                    url.push_str(&c);
                }
                (self.client().get(url), Vec::new())
            }
            Op::Get => (self.client().get(one()), Vec::new()),
            Op::Delete => {
                let id = id.clone().unwrap_or_default();
                self.consistency.deleting(tenant, &id);
                (self.client().delete(one()), vec![WriteKind::Delete { id }])
            }
            Op::Create | Op::Viewer => {
                let n = self.created.fetch_add(1, Ordering::Relaxed);
                let (body, url, content) = create_body(n);
                let request = self.client().post(self.api()).json(&body);
                let id = None;
                (request, vec![WriteKind::Create { url, content, id }])
            }
            Op::Update => {
                let content = update_content(bits);
                let request = self.client().patch(one()).json(&changes(&content));
                let id = id.clone().unwrap_or_default();
                (request, vec![WriteKind::Update { id, content }])
            }
            Op::Batch => {
                let n = self.created.fetch_add(1, Ordering::Relaxed);
                let (body, url, content) = create_body(n);
                let mut operations = vec![json!({"op": "create", "bookmark": body})];
                let mut writes = vec![WriteKind::Create {
                    url,
                    content,
                    id: None,
                }];
                if let Some(id) = &id {
                    let content = update_content(bits.rotate_left(17));
                    operations
                        .push(json!({"op": "update", "id": id, "changes": changes(&content)}));
                    let id = id.clone();
                    writes.push(WriteKind::Update { id, content });
                }
                let request = self
                    .client()
                    .post(self.service.batch_api())
                    .json(&json!({ "operations": operations }));
                (request, writes)
            }
            Op::Collection => {
                let n = self.collected.fetch_add(1, Ordering::Relaxed);
                let name = format!("{}{n}", self.run_collections);
                // Nested under one of the tenant's collections half the time: some trees
                // grow past the depth limit, and those creates are refused.
                let parent = self.pick_collection(tenant, bits).filter(|_| bits & 1 == 0);
                let request = self
                    .client()
                    .post(self.service.collections_api())
                    .json(&json!({ "name": name, "parent_id": parent }));
                let id = None;
                (request, vec![WriteKind::Collection { name, parent, id }])
            }
        };
        let request = match op {
            Op::Viewer => self
                .service
                .as_viewer(request, tenant)
                .expect("checked above"),
            _ => self.as_tenant(request, tenant),
        };
        // Reads bring the tenant's latest token: they see every write it was told was done.
        let request = match (op, self.consistency.token(tenant)) {
            (Op::List | Op::Get, Some(token)) => request.header("X-Consistency-Token", token),
            _ => request,
        };
        let verifying = self.history.is_some();
        let wants_body = matches!(op, Op::Create | Op::Collection | Op::Batch)
            || (verifying && !writes.is_empty())
            || (op == Op::List && !verifying && self.known(tenant).len() < LEARN_FROM_LISTS_BELOW);
        let sent = Instant::now();
        let (answer, body) = self.send(request, op, wants_body, tenant).await;
        if let (Op::Get, Ending::Status(404), Some(id), true) =
            (op, answer.ending, id.as_deref(), verifying)
        {
            let from = answer.read_from.as_deref().unwrap_or_default();
            self.consistency.not_found(tenant, name, id, from);
        }
        // A batch is all or nothing: its writes share one answer, each with its own result.
        for (i, kind) in writes.into_iter().enumerate() {
            let acked_at = match op {
                Op::Batch => format!("/results/{i}/bookmark/id"),
                _ => "/id".to_owned(),
            };
            let (outcome, acked_id) = promise(answer.ending, body.as_ref(), &acked_at);
            let kind = match kind {
                WriteKind::Create { url, content, .. } => WriteKind::Create {
                    url,
                    content,
                    id: acked_id,
                },
                WriteKind::Collection { name, parent, .. } => WriteKind::Collection {
                    name,
                    parent,
                    id: acked_id,
                },
                other => other,
            };
            self.record_write(
                tenant,
                op == Op::Viewer,
                op == Op::Batch,
                kind,
                sent,
                outcome,
            );
        }
        match answer.ending {
            Ending::Status(status) => self.learn(tenant, op, status, id.as_deref(), body),
            // Outcome unknown: the bookmark may still be there.
            _ if op == Op::Delete => {
                if let Some(id) = &id {
                    self.remember(tenant, id);
                }
            }
            _ => {}
        }
        answer
    }

    /// Sends and reads the whole body (so the connection can be reused); parses it as JSON
    /// when `wants_body`; notes `X-Shard`, and keeps `tenant`'s consistency token and where
    /// a read was served.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        op: Op,
        wants_body: bool,
        tenant: usize,
    ) -> (Answer, Option<Value>) {
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                let answer = Answer::without_response(op, Ending::Failed(failure_kind(&e)), None);
                return (answer, None);
            }
        };
        let status = response.status().as_u16();
        let shard = response
            .headers()
            .get("x-shard")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(token) = response.headers().get("x-consistency-token") {
            self.consistency.wrote(tenant, token);
        }
        let read_from = response
            .headers()
            .get("x-read-from")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        if let Some(from) = &read_from {
            self.consistency.read_from(from);
        }
        match response.bytes().await {
            Ok(body) => {
                // An error's body is read for its code too (errors are rare; the code says
                // which kind of 503 it was).
                let failed = !(200..300).contains(&status);
                let json = (wants_body || failed)
                    .then(|| serde_json::from_slice::<Value>(&body).ok())
                    .flatten();
                let code = json
                    .as_ref()
                    .filter(|_| failed)
                    .and_then(|v| v["error"]["code"].as_str())
                    .map(str::to_owned);
                let answer = Answer {
                    op,
                    ending: Ending::Status(status),
                    shard,
                    code,
                    read_from,
                };
                (answer, json.filter(|_| wants_body))
            }
            Err(e) => {
                let answer = Answer::without_response(op, Ending::Failed(failure_kind(&e)), shard);
                (answer, None)
            }
        }
    }

    /// Keeps the known ids in step with what the server said.
    fn learn(&self, tenant: usize, op: Op, status: u16, id: Option<&str>, body: Option<Value>) {
        match (op, status, body) {
            (Op::Create, 201, Some(v)) => {
                if let Some(id) = v["id"].as_str() {
                    self.remember(tenant, id);
                }
            }
            (Op::Collection, 201, Some(v)) => {
                if let Some(id) = v["id"].as_str() {
                    let mut ids = self.collections(tenant);
                    if ids.len() < KNOWN_IDS_CAP {
                        ids.push(id.to_owned());
                    }
                }
            }
            (Op::Create, 409, Some(v)) => {
                if let Some(id) = v["error"]["id"].as_str() {
                    self.remember(tenant, id);
                }
            }
            (Op::Batch, 200, Some(v)) => {
                if let Some(id) = v.pointer("/results/0/bookmark/id").and_then(Value::as_str) {
                    self.remember(tenant, id);
                }
            }
            // The update's bookmark was deleted meanwhile (the create was rolled back with it).
            (Op::Batch, 422, Some(v)) => {
                let refused = v["error"]["operations"].as_array().into_iter().flatten();
                if let Some(id) = id
                    && refused.into_iter().any(|r| r["code"] == "not_found")
                {
                    self.forget(tenant, id);
                }
            }
            (Op::List, 200, Some(v)) => {
                for id in v["items"].as_array().into_iter().flatten() {
                    if let Some(id) = id["id"].as_str() {
                        self.remember(tenant, id);
                    }
                }
            }
            (Op::Get | Op::Update, 404, _) => {
                if let Some(id) = id {
                    self.forget(tenant, id);
                }
            }
            (Op::Delete, s, _) if s >= 500 => {
                if let Some(id) = id {
                    self.remember(tenant, id);
                }
            }
            _ => {}
        }
    }

    /// Creates bookmark `k` of `tenant` (the same URL every run with this seed).
    async fn prefill_one(&self, tenant: usize, k: usize) -> (usize, Answer) {
        let name = self.name(tenant);
        let url = format!("{}/{name}/prefill-{k}", self.url_prefix);
        let title = format!("prefill {k}");
        let request = self
            .as_tenant(self.client().post(self.api()), tenant)
            .json(&json!({
                "url": url,
                "title": title,
                "tags": ["loadgen", "prefill"],
            }));
        let sent = Instant::now();
        let (answer, body) = self.send(request, Op::Create, true, tenant).await;
        // A 409 is an earlier run's bookmark: not this run's write.
        if answer.ending != Ending::Status(409) {
            let (outcome, id) = promise(answer.ending, body.as_ref(), "/id");
            let content = Content::titled(title);
            let kind = WriteKind::Create { url, content, id };
            self.record_write(tenant, false, false, kind, sent, outcome);
        }
        if let Ending::Status(status) = answer.ending {
            self.learn(tenant, Op::Create, status, None, body);
        }
        (tenant, answer)
    }

    /// The tenant, operation and id choice of one request.
    fn pick(&self, rng: &mut StdRng) -> (usize, Op, u64) {
        (self.population.pick(rng), self.mix.pick(rng), rng.random())
    }
}

/// What a write's answer promised, and the id an acknowledged create returned.
fn promise(ending: Ending, body: Option<&Value>, acked_id_at: &str) -> (Outcome, Option<String>) {
    let code = body.and_then(|b| b["error"]["code"].as_str());
    let outcome = classify(ending, code);
    let id = body
        .filter(|_| outcome == Outcome::Acked)
        .and_then(|b| b.pointer(acked_id_at))
        .and_then(Value::as_str)
        .map(str::to_owned);
    (outcome, id)
}

/// How many keys are created at once.
const PROVISION_CONCURRENCY: usize = 16;

/// Creates an API key for every tenant of `population` through the service's admin API
/// (`POST /admin/api/tenants/{tenant}/keys`, with the admin token), and returns each
/// tenant's `Authorization` value, in population order.
pub async fn provision_keys(
    config: &Config,
    population: &Population,
    admin_token: &str,
) -> Result<Vec<reqwest::header::HeaderValue>, String> {
    let client = reqwest::Client::builder()
        .timeout(config.timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let client = &client;
    let answers: Vec<Result<reqwest::header::HeaderValue, String>> =
        futures::stream::iter(population.names())
            .map(|name| async move {
                let url = format!("{}/admin/api/tenants/{name}/keys", config.base());
                // A busy control database answers 503 with Retry-After: set-up waits and
                // asks again a few times rather than failing the whole run (a key made
                // by an attempt whose answer was lost is only a spare).
                let (status, body) = send_json(
                    client
                        .post(&url)
                        .bearer_auth(admin_token)
                        .json(&json!({ "note": "loadgen" })),
                )
                .await
                .map_err(|e| format!("{url}: {e}"))?;
                let key = body["key"]
                    .as_str()
                    .filter(|_| (200..300).contains(&status))
                    .ok_or_else(|| format!("{url} answered {status}: {body}"))?;
                reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
                    .map_err(|e| e.to_string())
            })
            .buffered(PROVISION_CONCURRENCY)
            .collect()
            .await;
    answers.into_iter().collect()
}

/// Adds a viewer member to every tenant through the tenant's own members API (as its admin
/// key from [`provision_keys`]) and makes it a key; returns each viewer's `Authorization`
/// value, in population order. A viewer left by an earlier run is found by its email.
pub async fn provision_viewers(
    config: &Config,
    population: &Population,
    admin_keys: &[reqwest::header::HeaderValue],
) -> Result<Vec<reqwest::header::HeaderValue>, String> {
    let client = reqwest::Client::builder()
        .timeout(config.timeout)
        .build()
        .map_err(|e| e.to_string())?;
    let client = &client;
    let base = config.base();
    let base = &base;
    let answers: Vec<Result<reqwest::header::HeaderValue, String>> =
        futures::stream::iter(population.names().iter().zip(admin_keys))
            .map(|(name, key)| async move {
                let as_admin = |r: reqwest::RequestBuilder| {
                    r.header(reqwest::header::AUTHORIZATION, key.clone())
                        .header("x-tenant-id", name.as_str())
                };
                let members = format!("{base}/api/members");
                let added = send_json(as_admin(client.post(&members)).json(&json!({
                    "name": "loadgen viewer",
                    "email": VIEWER_EMAIL,
                    "role": "viewer",
                })))
                .await?;
                let id = match added {
                    (201, v) => v["id"].as_str().map(str::to_owned),
                    (409, _) => {
                        let (_, list) = send_json(as_admin(client.get(&members))).await?;
                        list["members"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .find(|m| m["email"] == VIEWER_EMAIL)
                            .and_then(|m| m["id"].as_str())
                            .map(str::to_owned)
                    }
                    (status, v) => return Err(format!("{members} answered {status}: {v}")),
                }
                .ok_or_else(|| format!("{name}: no viewer member id"))?;
                let keys = format!("{base}/api/members/{id}/keys");
                let (status, made) = send_json(
                    as_admin(client.post(&keys)).json(&json!({ "note": "loadgen viewer" })),
                )
                .await?;
                let key = made["key"]
                    .as_str()
                    .filter(|_| status == 201)
                    .ok_or_else(|| format!("{keys} answered {status}: {made}"))?;
                reqwest::header::HeaderValue::from_str(&format!("Bearer {key}"))
                    .map_err(|e| e.to_string())
            })
            .buffered(PROVISION_CONCURRENCY)
            .collect()
            .await;
    answers.into_iter().collect()
}

/// The email of the viewer member loadgen adds to each tenant.
const VIEWER_EMAIL: &str = "viewer@loadgen.invalid";

/// Sends a set-up request, asking again while the server answers 503 with `Retry-After`;
/// returns the status and the JSON body.
async fn send_json(request: reqwest::RequestBuilder) -> Result<(u16, Value), String> {
    let mut attempt = 1;
    loop {
        let again = request
            .try_clone()
            .ok_or_else(|| "a set-up request cannot be repeated".to_owned())?;
        let res = again.send().await.map_err(|e| e.to_string())?;
        let status = res.status().as_u16();
        let wait = retry_after(res.headers());
        let body: Value = res.json().await.unwrap_or_default();
        match wait {
            Some(wait) if status == 503 && attempt < PROVISION_ATTEMPTS => {
                attempt += 1;
                tokio::time::sleep(wait).await;
            }
            _ => return Ok((status, body)),
        }
    }
}

/// How many times set-up asks for a tenant's key while the server answers 503.
const PROVISION_ATTEMPTS: u32 = 4;

/// A `Retry-After` of whole seconds, at most 5.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers.get("retry-after")?.to_str().ok()?.parse().ok()?;
    Some(Duration::from_secs(seconds.min(5)))
}

/// Imports `config.whale_import` bookmarks into each whale, one `POST /api/imports` each
/// (a Netscape file; URLs under `https://import.example/`, outside this run's marks), and
/// waits for each import to finish. Says how each went on stderr.
pub async fn whale_imports(shared: &Shared, config: &Config) -> Result<(), String> {
    let n = config.whale_import;
    if n == 0 {
        return Ok(());
    }
    let base = config.base_url.trim_end_matches('/');
    for tenant in 0..shared.population.whales().len() {
        let name = shared.name(tenant).to_owned();
        let mut file = String::with_capacity(n * 120);
        file.push_str("<!DOCTYPE NETSCAPE-Bookmark-file-1>\n<DL><p>\n");
        for k in 0..n {
            file.push_str(&format!(
                "<DT><A HREF=\"https://import.example/{}/{name}/{k}\" TAGS=\"loadgen,import\">\
                 imported {k}</A>\n",
                config.seed
            ));
        }
        file.push_str("</DL><p>\n");
        let started = Instant::now();
        let res = shared
            .as_tenant(shared.client().post(format!("{base}/api/imports")), tenant)
            .header("content-type", "text/html")
            .timeout(Duration::from_secs(300))
            .body(file)
            .send()
            .await
            .map_err(|e| format!("--whale-import {name}: {e}"))?;
        let status = res.status();
        let body: Value = res.json().await.unwrap_or(Value::Null);
        if status != 202 {
            return Err(format!("--whale-import {name}: {status} {body}"));
        }
        let id = body["id"].as_str().unwrap_or_default().to_owned();
        let done = loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let res = shared
                .as_tenant(
                    shared.client().get(format!("{base}/api/imports/{id}")),
                    tenant,
                )
                .send()
                .await;
            let Ok(res) = res else { continue };
            let now: Value = res.json().await.unwrap_or(Value::Null);
            if matches!(now["state"].as_str(), Some("done" | "failed")) {
                break now;
            }
        };
        if done["state"] != "done" {
            return Err(format!("--whale-import {name}: the import failed: {done}"));
        }
        eprintln!(
            "loadgen: {name} imported {n} bookmarks ({} created, {} skipped as there) in {:.1} s, \
             {:.0} rows/s applied",
            done["counts"]["created"],
            done["counts"]["skipped"],
            started.elapsed().as_secs_f64(),
            done["rows_per_second"].as_f64().unwrap_or_default()
        );
    }
    Ok(())
}

/// Creates `config.prefill` bookmarks per tenant, at most `prefill_concurrency` at a time.
/// A 409 means the bookmark is there already (an earlier run with the same seed).
pub async fn prefill(shared: &Shared, config: &Config) -> PrefillSummary {
    let k = config.prefill;
    let mut summary = PrefillSummary {
        per_tenant: k,
        ..PrefillSummary::default()
    };
    if k == 0 {
        return summary;
    }
    let started = Instant::now();
    let tenants = shared.population.len();
    let line = Line::counter(shared.progress, (tenants * k) as u64, "prefill");
    let mut answers = futures::stream::iter((0..tenants).flat_map(|t| (0..k).map(move |j| (t, j))))
        .map(|(t, j)| shared.prefill_one(t, j))
        .buffer_unordered(config.prefill_concurrency);
    while let Some((tenant, answer)) = answers.next().await {
        summary.requests += 1;
        line.inc();
        if let Some(shard) = &answer.shard {
            shared.recorder.set_home_shard(tenant, shard);
        }
        match answer.ending {
            Ending::Status(201) => summary.created += 1,
            Ending::Status(409) => summary.existing += 1,
            other => {
                if let Some(e) = other.error_label() {
                    *summary.errors.entry(e).or_default() += 1;
                }
            }
        }
    }
    line.finish();
    summary.seconds = started.elapsed().as_secs_f64();
    summary
}

/// Open loop: request `i` is due at `start + i/rate` and its latency runs from then, even
/// when this loop or the in-flight requests are late. A due request that finds
/// `max_in_flight` outstanding is recorded as not sent. Returns the send window: the time
/// the due requests span at `rate`, or longer if sending them took longer.
pub async fn open_loop(
    shared: &Arc<Shared>,
    config: &Config,
    rate: f64,
    max_in_flight: usize,
) -> Duration {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let permits = Arc::new(Semaphore::new(max_in_flight));
    let line = Line::live(shared.progress, Arc::clone(&shared.recorder), "open loop");
    let limit = config.requests.unwrap_or(u64::MAX);
    let span = config.duration.as_secs_f64();
    let start = shared.start_load();
    let mut due_count = 0u64;
    while due_count < limit {
        let offset = due_count as f64 / rate;
        if offset >= span || config.stopped() {
            break;
        }
        let at = Duration::from_secs_f64(offset);
        let due = start + at;
        tokio::time::sleep_until(due).await;
        let (tenant, op, choice) = shared.pick(&mut rng);
        match Arc::clone(&permits).try_acquire_owned() {
            Ok(permit) => {
                let shared = Arc::clone(shared);
                tokio::spawn(async move {
                    let answer = shared.execute(tenant, op, choice).await;
                    let latency = due.elapsed();
                    shared.note(tenant, &answer, at, Some(latency));
                    shared.recorder.record(
                        tenant,
                        answer.op,
                        answer.shard.as_deref(),
                        answer.ending,
                        at,
                        Some(latency),
                    );
                    drop(permit);
                });
            }
            Err(_) => {
                let answer = Answer::without_response(op, Ending::NotSent, None);
                shared.note(tenant, &answer, at, None);
                shared
                    .recorder
                    .record(tenant, op, None, Ending::NotSent, at, None);
            }
        }
        due_count += 1;
    }
    let window = Duration::from_secs_f64(due_count as f64 / rate).max(start.elapsed());
    // Every request ends within the client timeout; then all permits are back.
    let all = u32::try_from(max_in_flight).unwrap_or(u32::MAX);
    let _ = permits.acquire_many(all).await;
    line.finish();
    window
}

/// Closed loop: `concurrency` workers, each sending its next request as soon as the last
/// one ended (latency from the actual send). Returns how long the run took.
pub async fn closed_loop(shared: &Arc<Shared>, config: &Config, concurrency: usize) -> Duration {
    let line = Line::live(shared.progress, Arc::clone(&shared.recorder), "closed loop");
    let limit = config.requests.unwrap_or(u64::MAX);
    let issued = Arc::new(AtomicU64::new(0));
    let start = shared.start_load();
    let end = start + config.duration;
    let mut workers = JoinSet::new();
    for w in 0..concurrency as u64 {
        let shared = Arc::clone(shared);
        let issued = Arc::clone(&issued);
        let stop = config.stop.clone();
        let mut rng = StdRng::seed_from_u64(config.seed.wrapping_add(w));
        workers.spawn(async move {
            loop {
                let sent = Instant::now();
                if sent >= end
                    || crate::config::stop_set(stop.as_deref())
                    || issued.fetch_add(1, Ordering::Relaxed) >= limit
                {
                    break;
                }
                let (tenant, op, choice) = shared.pick(&mut rng);
                let answer = shared.execute(tenant, op, choice).await;
                let latency = sent.elapsed();
                shared.note(tenant, &answer, sent - start, Some(latency));
                shared.recorder.record(
                    tenant,
                    answer.op,
                    answer.shard.as_deref(),
                    answer.ending,
                    sent - start,
                    Some(latency),
                );
            }
        });
    }
    while workers.join_next().await.is_some() {}
    line.finish();
    start.elapsed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_in_whole_seconds_and_capped() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after", "3600".parse().unwrap());
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(5)));
        headers.insert(
            "retry-after",
            "Wed, 21 Oct 2026 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&headers), None);
    }
}
