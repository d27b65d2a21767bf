//! The Grafana dashboard (`ops/grafana/c2q.json`) and the alert rules (`ops/prometheus/`) name
//! only metrics a real worker exports: every PromQL expression in them is tokenized, and each
//! metric name it selects must appear on the `/metrics` of a worker that has proved a canary
//! job (so that its histograms and labelled counters have samples), unless it is one of the
//! few series other exporters supply (`EXTERNAL`). A renamed metric thus breaks this test
//! instead of leaving a panel or an alert silently empty.

mod queue_support;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use c2q::schema::Status;
use queue_support::*;

/// Series the dashboard and alerts use that no c2q worker exports, with who supplies them.
const EXTERNAL: &[(&str, &str)] = &[
    ("up", "Prometheus itself, per scrape target"),
    ("probe_success", "the blackbox exporter probing /readyz"),
    (
        "rabbitmq_queue_messages_ready",
        "RabbitMQ's rabbitmq_prometheus plugin (per-object metrics)",
    ),
    (
        "rabbitmq_queue_messages_unacked",
        "RabbitMQ's rabbitmq_prometheus plugin (per-object metrics)",
    ),
    (
        "rabbitmq_queue_messages",
        "RabbitMQ's rabbitmq_prometheus plugin (per-object metrics)",
    ),
];

/// PromQL functions and aggregations: identifiers that are never metric names.
// One per line would bury the test under the list.
#[rustfmt::skip]
const FUNCTIONS: &[&str] = &[
    "abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "avg",
    "avg_over_time", "bottomk", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos",
    "cosh", "count", "count_over_time", "count_values", "day_of_month", "day_of_week",
    "day_of_year", "days_in_month", "deg", "delta", "deriv", "exp", "floor", "group",
    "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile",
    "histogram_stddev", "histogram_stdvar", "histogram_sum", "holt_winters", "hour", "idelta",
    "increase", "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2",
    "mad_over_time", "max", "max_over_time", "min", "min_over_time", "minute", "month", "pi",
    "predict_linear", "present_over_time", "quantile", "quantile_over_time", "rad", "rate",
    "resets", "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_desc", "sqrt", "stddev",
    "stddev_over_time", "stdvar", "stdvar_over_time", "sum", "sum_over_time", "tan", "tanh",
    "time", "timestamp", "topk", "vector", "year",
];

/// Keywords that are neither functions nor metric names.
const KEYWORDS: &[&str] = &[
    "and", "or", "unless", "bool", "offset", "atan2", "inf", "nan",
];

/// Keywords whose parenthesized list that follows names labels, not series.
const LABEL_LISTS: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// The index just past the matching `close` of the `open` at `s[i]`, skipping quoted strings.
fn skip_group(s: &[char], mut i: usize, open: char, close: char) -> usize {
    let mut depth = 0;
    while i < s.len() {
        match s[i] {
            '"' | '\'' | '`' => {
                i = skip_string(s, i);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    panic!(
        "unbalanced {open}{close} in {:?}",
        s.iter().collect::<String>()
    );
}

/// The index just past the string literal opened at `s[i]` (backslash escapes, except in
/// backquoted raw strings).
fn skip_string(s: &[char], i: usize) -> usize {
    let quote = s[i];
    let mut j = i + 1;
    while j < s.len() {
        if s[j] == '\\' && quote != '`' {
            j += 2;
            continue;
        }
        if s[j] == quote {
            return j + 1;
        }
        j += 1;
    }
    panic!("unterminated string in {:?}", s.iter().collect::<String>());
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Metric names the PromQL expression `expr` selects. Label matchers (`{…}`), ranges (`[…]`,
/// where Grafana's `$__rate_interval` lives), strings, numbers, durations, Grafana variables
/// and the label lists of `by`, `without`, `on`, `ignoring`, `group_left` and `group_right`
/// are skipped; so are functions and keywords. An unknown identifier called like a function
/// is refused rather than taken for a metric.
fn metric_names(expr: &str) -> Vec<String> {
    let s: Vec<char> = expr.chars().collect();
    let mut names = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(&s, i);
        } else if c == '{' {
            i = skip_group(&s, i, '{', '}');
        } else if c == '[' {
            i = skip_group(&s, i, '[', ']');
        } else if c.is_ascii_digit() || c == '.' || c == '$' {
            // A number or a duration (`1e3`, `0.95`, `5m`), or a Grafana variable.
            i += 1;
            while i < s.len() && (is_ident(s[i]) || s[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < s.len() && is_ident(s[i]) {
                i += 1;
            }
            let ident: String = s[start..i].iter().collect();
            let mut next = i;
            while next < s.len() && s[next].is_whitespace() {
                next += 1;
            }
            let called = next < s.len() && s[next] == '(';
            if LABEL_LISTS.contains(&ident.as_str()) {
                if called {
                    i = skip_group(&s, next, '(', ')');
                }
            } else if !FUNCTIONS.contains(&ident.as_str()) && !KEYWORDS.contains(&ident.as_str()) {
                assert!(
                    !called,
                    "{ident:?} is called like a function in {expr:?}: add it to FUNCTIONS if PromQL has it"
                );
                names.push(ident);
            }
        } else {
            i += 1;
        }
    }
    names
}

fn repo_path(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn dashboard() -> serde_json::Value {
    let path = repo_path("ops/grafana/c2q.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every panel, rows' nested panels included.
fn panels(dash: &serde_json::Value) -> Vec<&serde_json::Value> {
    fn walk<'a>(list: &'a serde_json::Value, out: &mut Vec<&'a serde_json::Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            walk(&p["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dash["panels"], &mut out);
    out
}

/// `(where, expr)` for every panel target's `expr` and every query variable's series.
fn dashboard_exprs(dash: &serde_json::Value) -> Vec<(String, String)> {
    let mut exprs = Vec::new();
    for p in panels(dash) {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap_or_else(|| {
                panic!("panel {:?} has a target without a PromQL expr", p["title"])
            });
            exprs.push((format!("panel {}", p["title"]), expr.to_string()));
        }
    }
    for v in dash["templating"]["list"].as_array().into_iter().flatten() {
        if v["type"] != "query" {
            continue;
        }
        let q = v["query"]["query"]
            .as_str()
            .or(v["query"].as_str())
            .unwrap();
        // Grafana's `label_values(series, label)`: the series is PromQL, the label is not.
        let series = q
            .strip_prefix("label_values(")
            .and_then(|rest| rest.rsplit_once(','))
            .map(|(series, _label)| series)
            .unwrap_or_else(|| panic!("variable {:?}: unexpected query {q:?}", v["name"]));
        exprs.push((format!("variable {}", v["name"]), series.to_string()));
    }
    exprs
}

/// `(where, expr)` for every rule's `expr:` in `ops/prometheus/*.yml`, read line by line
/// (single-line and `|`/`>` block values) so the test needs no YAML parser.
fn alert_exprs() -> Vec<(String, String)> {
    let mut exprs = Vec::new();
    let dir = repo_path("ops/prometheus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yml" | "yaml")))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut alert = String::from("?");
        for (n, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            if let Some(name) = t
                .strip_prefix("- alert:")
                .or(t.strip_prefix("alert:"))
                .or(t.strip_prefix("- record:"))
                .or(t.strip_prefix("record:"))
            {
                alert = name.trim().to_string();
            }
            let Some(value) = t.strip_prefix("expr:") else {
                continue;
            };
            let value = value.trim();
            let expr = if value.starts_with('|') || value.starts_with('>') {
                let indent = line.len() - t.len();
                lines[n + 1..]
                    .iter()
                    .take_while(|l| l.trim().is_empty() || l.len() - l.trim_start().len() > indent)
                    .map(|l| l.trim())
                    .collect::<Vec<_>>()
                    .join(" ")
            } else {
                value.trim_matches(|c| c == '\'' || c == '"').to_string()
            };
            exprs.push((
                format!(
                    "{} alert {alert}",
                    file.file_name().unwrap().to_string_lossy()
                ),
                expr,
            ));
        }
    }
    exprs
}

#[test]
fn tokenizer_finds_metric_names_and_nothing_else() {
    assert_eq!(
        metric_names(
            r#"histogram_quantile(0.9, sum by (le, stage) (rate(c2q_stage_seconds_bucket{instance=~"$instance", stage!="x{"}[$__rate_interval])))"#
        ),
        ["c2q_stage_seconds_bucket"]
    );
    assert_eq!(
        metric_names(
            r#"sum(c2q_jobs_in_flight) == 0 and on() rabbitmq_queue_messages_ready{queue=~".*\\.jobs"} > 0"#
        ),
        ["c2q_jobs_in_flight", "rabbitmq_queue_messages_ready"]
    );
    assert_eq!(
        metric_names(
            "sum without (instance) (a_total offset 5m) / ignoring (x) group_left b * 1e3 > bool c:rule"
        ),
        ["a_total", "b", "c:rule"]
    );
    assert_eq!(
        metric_names("c2q_rss_bytes > 0.95 * (c2q_gate_budget_bytes + 268435456)"),
        ["c2q_rss_bytes", "c2q_gate_budget_bytes"]
    );
    assert!(std::panic::catch_unwind(|| metric_names("not_a_function(c2q_rss_bytes)")).is_err());
}

#[test]
fn dashboard_is_importable_with_a_prometheus_input() {
    let dash = dashboard();
    let inputs = dash["__inputs"].as_array().unwrap();
    assert!(
        inputs
            .iter()
            .any(|i| i["name"] == "DS_PROMETHEUS" && i["pluginId"] == "prometheus"),
        "{inputs:?}"
    );
    assert!(dash["uid"].is_string() && dash["title"].is_string());
    let mut ids = BTreeSet::new();
    for p in panels(&dash) {
        assert!(ids.insert(p["id"].as_u64().unwrap()), "duplicate id: {p}");
        if p["type"] == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", p["title"]);
        for t in p["targets"].as_array().unwrap() {
            assert_eq!(t["datasource"]["uid"], "${DS_PROMETHEUS}", "{}", p["title"]);
        }
        // Panels fed by RabbitMQ's exporter say so, so an empty one points at the right
        // scrape job.
        let from_rabbitmq = p["targets"].as_array().unwrap().iter().any(|t| {
            metric_names(t["expr"].as_str().unwrap())
                .iter()
                .any(|m| m.starts_with("rabbitmq_"))
        });
        if from_rabbitmq {
            assert!(
                p["title"].as_str().unwrap().contains("[RabbitMQ exporter]"),
                "{}",
                p["title"]
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_metric_the_dashboard_and_alerts_name_is_exported() {
    let uses: Vec<(String, String)> = dashboard_exprs(&dashboard())
        .into_iter()
        .chain(alert_exprs())
        .flat_map(|(at, expr)| {
            let names = metric_names(&expr);
            assert!(!names.is_empty(), "{at}: no metric in {expr:?}");
            names.into_iter().map(move |n| (at.clone(), n))
        })
        .collect();

    let env = Env::new("dash");
    let worker = env.spawn_worker("w1");
    let addr = worker.telemetry_addr().await;
    let b = env.broker().await;
    publish_job(&b, &canary_job("dash-1", 2, 7)).await;
    let r = result_for(&b, "dash-1", Duration::from_secs(60)).await;
    assert_eq!(r.status, Status::Ok, "{r:?}");
    let (code, scrape) = http_get(&addr, "/metrics").await;
    assert_eq!(code, 200);
    env.cleanup().await;

    // Sample names, and the families `# TYPE` declares (a histogram's samples are its
    // `_bucket`, `_sum` and `_count`).
    let mut exported = BTreeSet::new();
    let mut families = BTreeSet::new();
    let mut histograms = BTreeSet::new();
    for line in scrape.lines() {
        if let Some(decl) = line.strip_prefix("# TYPE ") {
            let mut it = decl.split_whitespace();
            let (name, kind) = (it.next().unwrap(), it.next().unwrap());
            exported.insert(name.to_string());
            families.insert(name.to_string());
            if kind == "histogram" {
                histograms.insert(name.to_string());
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            exported.insert(line[..end].to_string());
        }
    }
    let is_exported = |name: &str| {
        exported.contains(name)
            || ["_bucket", "_sum", "_count"].iter().any(|suffix| {
                name.strip_suffix(suffix)
                    .is_some_and(|family| histograms.contains(family))
            })
    };

    let mut missing = Vec::new();
    for (at, name) in &uses {
        if EXTERNAL.iter().any(|(n, _)| n == name) {
            continue;
        }
        if !is_exported(name.as_str()) {
            missing.push(format!("{at}: {name}"));
        }
    }
    assert!(
        missing.is_empty(),
        "metrics the worker does not export:\n{}\n\nscrape:\n{scrape}",
        missing.join("\n")
    );
    // The exceptions stay honest: each is used, and none is something c2q exports.
    for &(name, source) in EXTERNAL {
        assert!(
            uses.iter().any(|(_, n)| n == name),
            "{name} ({source}) is listed as external but nothing uses it"
        );
        assert!(
            !is_exported(name),
            "{name} is exported by the worker itself"
        );
    }
    // The dashboard and alerts between them show every metric family the worker exports.
    for family in families.iter().filter(|n| n.starts_with("c2q_")) {
        let shown = uses.iter().any(|(_, n)| {
            n == family
                || (histograms.contains(family)
                    && ["_bucket", "_sum", "_count"]
                        .iter()
                        .any(|s| n.strip_suffix(s) == Some(family.as_str())))
        });
        assert!(
            shown,
            "{family} is exported but neither the dashboard nor an alert shows it"
        );
    }
}
