//! The AMQP headers c2q reads and writes, and typed access to them.

use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;

/// Transient-failure retries so far (set by the worker when it sends a job to a delay queue).
pub const ATTEMPTS: &str = "x-c2q-attempts";
/// Why a job was dead-lettered: an `error.kind` string.
pub const REASON: &str = "x-c2q-reason";
pub const ERROR: &str = "x-c2q-error";
pub const WORKER: &str = "x-c2q-worker";
pub const MINER: &str = "x-c2q-miner";
pub const SECTOR: &str = "x-c2q-sector";
pub const DEAD_AT: &str = "x-c2q-dead-at-ms";
/// `REASON` of a job dead-lettered for too many unsettled deliveries: the reason RabbitMQ
/// itself gives (`x-first-death-reason`) when a quorum queue's delivery limit is reached.
pub const POISON_REASON: &str = "delivery_limit";
/// Set by RabbitMQ on messages it dead-lettered itself (e.g. `delivery_limit`).
pub const FIRST_DEATH_REASON: &str = "x-first-death-reason";
/// Set by quorum queues: earlier deliveries of this message that were not acked.
pub const DELIVERY_COUNT: &str = "x-delivery-count";
/// Unsettled deliveries of earlier copies of this job. The worker republishes a job instead of
/// returning it (a delay while another worker holds it, a retry, a hand-back), and a new copy
/// starts with a delivery count of zero: this header carries the count over, so a job that
/// keeps killing workers still reaches the delivery limit.
pub const RETURNS: &str = "x-c2q-returns";

pub fn get<'a>(props: &'a BasicProperties, key: &str) -> Option<&'a AMQPValue> {
    props.headers().as_ref()?.inner().get(key)
}

pub fn get_int(props: &BasicProperties, key: &str) -> Option<i64> {
    match get(props, key)? {
        AMQPValue::ShortShortInt(v) => Some(*v as i64),
        AMQPValue::ShortShortUInt(v) => Some(*v as i64),
        AMQPValue::ShortInt(v) => Some(*v as i64),
        AMQPValue::ShortUInt(v) => Some(*v as i64),
        AMQPValue::LongInt(v) => Some(*v as i64),
        AMQPValue::LongUInt(v) => Some(*v as i64),
        AMQPValue::LongLongInt(v) => Some(*v),
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).parse().ok(),
        _ => None,
    }
}

/// A non-negative integer header as [`uint`] writes it (or as any integer type holds it).
pub fn get_u64(props: &BasicProperties, key: &str) -> Option<u64> {
    match get(props, key)? {
        AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).parse().ok(),
        _ => u64::try_from(get_int(props, key)?).ok(),
    }
}

pub fn get_str(props: &BasicProperties, key: &str) -> Option<String> {
    match get(props, key)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

/// The reason of the most recent dead-lettering recorded by RabbitMQ (`x-death` lists the
/// most recent first).
pub fn last_death_reason(props: &BasicProperties) -> Option<String> {
    let AMQPValue::FieldArray(deaths) = get(props, "x-death")? else {
        return None;
    };
    let AMQPValue::FieldTable(last) = deaths.as_slice().first()? else {
        return None;
    };
    match last.inner().get("reason")? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

/// Transient retries recorded on a message (0 for a fresh job).
pub fn attempts(props: &BasicProperties) -> u32 {
    get_int(props, ATTEMPTS)
        .and_then(|v| u32::try_from(v).ok())
        .unwrap_or(0)
}

/// Deliveries of this job, over all its copies, that ended without being settled (the worker
/// died or its channel closed first).
pub fn returns(props: &BasicProperties) -> u32 {
    let carried = get_int(props, RETURNS).unwrap_or(0);
    let this_copy = get_int(props, DELIVERY_COUNT).unwrap_or(0);
    u32::try_from(carried.saturating_add(this_copy).max(0)).unwrap_or(u32::MAX)
}

/// Headers for a new copy of a delivered job: `set` applied and the unsettled deliveries so far
/// carried over (the broker's own count of the old copy does not follow it).
pub fn for_copy(props: &BasicProperties, mut set: Vec<(&str, AMQPValue)>) -> FieldTable {
    set.push((RETURNS, int(i64::from(returns(props)))));
    with(props.headers().as_ref(), set, &[DELIVERY_COUNT])
}

/// A copy of `headers` with `set` applied and the keys in `remove` dropped.
pub fn with(
    headers: Option<&FieldTable>,
    set: Vec<(&str, AMQPValue)>,
    remove: &[&str],
) -> FieldTable {
    let mut out = FieldTable::default();
    if let Some(h) = headers {
        for (k, v) in h.inner() {
            if !remove.contains(&k.as_str()) {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    for (k, v) in set {
        out.insert(ShortString::from(k), v);
    }
    out
}

pub fn string(s: &str) -> AMQPValue {
    AMQPValue::LongString(s.into())
}

pub fn int(v: i64) -> AMQPValue {
    AMQPValue::LongLongInt(v)
}

/// An unsigned 64-bit value: AMQP tables (as RabbitMQ reads them) have no unsigned 64-bit
/// type, so values above `i64::MAX` travel as their decimal string ([`get_u64`] reads both).
pub fn uint(v: u64) -> AMQPValue {
    match i64::try_from(v) {
        Ok(v) => int(v),
        Err(_) => string(&v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_carry_unsettled_deliveries_over() {
        let mut h = FieldTable::default();
        h.insert(DELIVERY_COUNT.into(), AMQPValue::LongLongInt(2));
        h.insert(RETURNS.into(), AMQPValue::LongLongInt(3));
        let props = BasicProperties::default().with_headers(h);
        assert_eq!(returns(&props), 5);
        let copy = BasicProperties::default().with_headers(for_copy(&props, vec![]));
        assert_eq!(get_int(&copy, DELIVERY_COUNT), None);
        assert_eq!(returns(&copy), 5);
        assert_eq!(returns(&BasicProperties::default()), 0);
    }

    #[test]
    fn unsigned_headers_round_trip_beyond_i64() {
        for v in [0, 1000, i64::MAX as u64, i64::MAX as u64 + 1, u64::MAX] {
            let mut h = FieldTable::default();
            h.insert(MINER.into(), uint(v));
            let props = BasicProperties::default().with_headers(h);
            assert_eq!(get_u64(&props, MINER), Some(v));
        }
        let mut h = FieldTable::default();
        h.insert(MINER.into(), int(-1));
        let props = BasicProperties::default().with_headers(h);
        assert_eq!(get_u64(&props, MINER), None, "negative is not a miner id");
    }
}
