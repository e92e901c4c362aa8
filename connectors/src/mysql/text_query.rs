//! Text-protocol queries on a [`ReplicaConn`]: the few reads the source needs before a dump
//! (version, settings, positions), run on the dump connection itself so that its TLS choice
//! (rustls, VERIFY_CA without a host-name check) covers them too. Every value is read as
//! text or NULL; column definitions are skipped.

use super::replica_conn::{parse_err, ReplicaConn, ServerOrIo};
use super::source_error::SourceError;

/// One result row: text values, `None` for NULL.
pub(crate) type TextRow = Vec<Option<String>>;

/// Runs `sql` and returns its rows (none for a statement without a result set).
pub(crate) async fn query_rows(
    conn: &mut ReplicaConn,
    sql: &str,
) -> Result<Vec<TextRow>, ServerOrIo> {
    let mut cmd = Vec::with_capacity(sql.len() + 1);
    cmd.push(0x03);
    cmd.extend_from_slice(sql.as_bytes());
    conn.command(&cmd).await?;
    let mut buf = Vec::new();
    conn.read(&mut buf).await?;
    let columns = match buf.first() {
        Some(0x00) => return Ok(Vec::new()),
        Some(0xFF) => return Err(ServerOrIo::Server(parse_err(&buf))),
        Some(0xFB) | None => return Err(unexpected()),
        Some(_) => {
            let (n, _) = lenenc_int(&buf).ok_or_else(unexpected)?;
            usize::try_from(n).map_err(|_| unexpected())?
        }
    };
    for _ in 0..columns {
        conn.read(&mut buf).await?;
    }
    conn.read(&mut buf).await?;
    if !is_eof(&buf) {
        return Err(unexpected());
    }
    let mut rows = Vec::new();
    loop {
        conn.read(&mut buf).await?;
        if is_eof(&buf) {
            return Ok(rows);
        }
        if buf.first() == Some(&0xFF) {
            return Err(ServerOrIo::Server(parse_err(&buf)));
        }
        rows.push(text_row(&buf, columns).ok_or_else(unexpected)?);
    }
}

/// One text-protocol row packet of `columns` values; `None` if a length overruns it.
fn text_row(packet: &[u8], columns: usize) -> Option<TextRow> {
    let mut row = Vec::with_capacity(columns.min(4096));
    let mut rest = packet;
    for _ in 0..columns {
        if rest.first() == Some(&0xFB) {
            row.push(None);
            rest = rest.get(1..).unwrap_or_default();
            continue;
        }
        let (len, used) = lenenc_int(rest)?;
        let len = usize::try_from(len).ok()?;
        let value = rest.get(used..used.checked_add(len)?)?;
        row.push(Some(String::from_utf8_lossy(value).into_owned()));
        rest = rest.get(used + len..).unwrap_or_default();
    }
    Some(row)
}

/// Runs `sql` and returns its first row with every value as text (NULL as empty).
pub(crate) async fn query_first(
    conn: &mut ReplicaConn,
    sql: &str,
) -> Result<Vec<String>, SourceError> {
    let rows = query_rows(conn, sql).await.map_err(|e| match e {
        ServerOrIo::Server(err) => SourceError::QueryFailed { code: err.code },
        ServerOrIo::Source(s) => s,
    })?;
    let row = rows
        .into_iter()
        .next()
        .ok_or(SourceError::PreconditionQueryFailed)?;
    Ok(row.into_iter().map(Option::unwrap_or_default).collect())
}

fn unexpected() -> ServerOrIo {
    ServerOrIo::Source(SourceError::UnexpectedPacket {
        site: "query response",
    })
}

/// An EOF packet (`0xFE`, shorter than a row that starts with an 8-byte length).
pub(crate) fn is_eof(packet: &[u8]) -> bool {
    packet.first() == Some(&0xFE) && packet.len() < 9
}

/// A length-encoded integer at the start of `b`: its value and how many bytes it took.
pub(crate) fn lenenc_int(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let wide = |n: usize| -> Option<(u64, usize)> {
        let bytes = b.get(1..=n)?;
        let mut v = 0u64;
        for (i, &x) in bytes.iter().enumerate() {
            v |= u64::from(x) << (8 * i);
        }
        Some((v, n + 1))
    };
    match first {
        0..=0xFA => Some((u64::from(first), 1)),
        0xFC => wide(2),
        0xFD => wide(3),
        0xFE => wide(8),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_encoded_integers() {
        assert_eq!(lenenc_int(&[5]), Some((5, 1)));
        assert_eq!(lenenc_int(&[0xFC, 0x10, 0x27]), Some((10_000, 3)));
        assert_eq!(lenenc_int(&[0xFD, 1, 0, 1]), Some((65_537, 4)));
        assert_eq!(lenenc_int(&[0xFE, 1, 0, 0, 0, 0, 0, 0, 0]), Some((1, 9)));
        assert_eq!(lenenc_int(&[0xFC, 1]), None);
        assert_eq!(lenenc_int(&[0xFB]), None);
        assert!(is_eof(&[0xFE, 0, 0, 2, 0]));
        assert!(!is_eof(&[0xFE, 0, 0, 0, 0, 0, 0, 0, 0, 0]));
    }

    #[test]
    fn text_rows_are_bounds_checked() {
        let row = text_row(&[1, b'a', 0xFB, 0], 3).unwrap();
        assert_eq!(row, vec![Some("a".into()), None, Some(String::new())]);
        assert_eq!(text_row(&[5, b'a'], 1), None);
        assert_eq!(text_row(&[1, b'a'], 2), None);
        assert_eq!(
            text_row(&[0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], 1),
            None
        );
        assert_eq!(text_row(&[0xFF], 1), None);
    }
}
