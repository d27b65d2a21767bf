//! Versioned SQL migrations from `migrations/`, applied at start-up in order, each once, under
//! an advisory lock so that workers starting together do not race.

use anyhow::{Context, Result};
use deadpool_postgres::Object;

/// `(version, name, sql)`, in order. A migration is never edited once released: add a new one.
const MIGRATIONS: &[(i32, &str, &str)] = &[
    (1, "jobs", include_str!("../../migrations/0001_jobs.sql")),
    (2, "lease", include_str!("../../migrations/0002_lease.sql")),
    (
        3,
        "workers",
        include_str!("../../migrations/0003_workers.sql"),
    ),
    (
        4,
        "gateway",
        include_str!("../../migrations/0004_gateway.sql"),
    ),
    (
        5,
        "kept params",
        include_str!("../../migrations/0005_kept_params.sql"),
    ),
    (
        6,
        "requests",
        include_str!("../../migrations/0006_requests.sql"),
    ),
];

/// Create `schema` if needed and bring it to the latest version.
pub async fn migrate(client: &mut Object, schema: &str) -> Result<()> {
    let tx = client.transaction().await.context("starting migration")?;
    tx.batch_execute(&format!(
        "SELECT pg_advisory_xact_lock(hashtext('c2q-migrate:{schema}'));
         CREATE SCHEMA IF NOT EXISTS \"{schema}\";
         SET LOCAL search_path TO \"{schema}\";
         CREATE TABLE IF NOT EXISTS schema_migrations (
             version integer PRIMARY KEY,
             name text NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT now());"
    ))
    .await
    .context("preparing the migration table")?;
    let applied: Vec<i32> = tx
        .query("SELECT version FROM schema_migrations", &[])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        tx.batch_execute(sql)
            .await
            .with_context(|| format!("applying migration {version} ({name})"))?;
        tx.execute(
            "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)",
            &[version, name],
        )
        .await?;
        tracing::info!(version, name, schema, "applied ledger migration");
    }
    tx.commit().await.context("committing migrations")?;
    Ok(())
}

/// Schema names are spliced into SQL: allow only plain identifiers.
pub fn check_schema_name(schema: &str) -> Result<()> {
    anyhow::ensure!(
        !schema.is_empty()
            && schema.len() <= 63
            && schema
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && !schema.starts_with(|c: char| c.is_ascii_digit()),
        "ledger schema {schema:?} must be a lower-case identifier"
    );
    Ok(())
}
