//! The harness's own connections to the servers, beside those of the dispatcher processes: to
//! cut the processes' connections and to stall the stores.

/// A Redis connection.
pub(crate) type Redis = redis::aio::MultiplexedConnection;

/// A session on PostgreSQL at `pg_url` (its connection driven by a task of its own) and, when
/// `redis_url` is given, a connection to Redis.
pub(crate) async fn connect(
    pg_url: &str,
    redis_url: Option<&str>,
) -> Result<(tokio_postgres::Client, Option<Redis>), String> {
    let (pg, connection) = tokio_postgres::connect(pg_url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("postgres: {e}"))?;
    tokio::spawn(connection);
    let redis = match redis_url {
        Some(url) => Some(
            redis::Client::open(url)
                .map_err(redis_error)?
                .get_multiplexed_async_connection()
                .await
                .map_err(redis_error)?,
        ),
        None => None,
    };
    Ok((pg, redis))
}

/// A Redis error as the harness reports it.
pub(crate) fn redis_error(e: redis::RedisError) -> String {
    format!("redis: {e}")
}
