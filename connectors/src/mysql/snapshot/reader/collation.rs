//! [`SnapshotReader::weights`] and the collation canary: string keys ordered by the server's
//! `WEIGHT_STRING`, PAD SPACE weights padded in space units ([`Weighing`]).

use mysql_common::params::Params;

use super::super::canary::canary_values;
use super::super::error::{server_code, SnapshotError};
use super::super::key::{KeyColumn, KeyKind};
use super::super::sql::{canary_select, hex_param, space_weights_select, weights_select};
use super::super::weighing::Weighing;
use super::SnapshotReader;

/// Values per `WEIGHT_STRING` statement.
const WEIGHT_BATCH: usize = 500;

impl SnapshotReader {
    /// How `kind`'s values are weighed ([`Weighing`]): NO PAD bare; PAD SPACE as the server's
    /// weights of one and two spaces under the collation tell, asked once per kind.
    async fn weighing(&mut self, kind: &KeyKind) -> Result<Weighing, SnapshotError> {
        if let Some(w) = self.weighings.get(kind) {
            return Ok(w.clone());
        }
        let spaces = if Weighing::needs_spaces(kind) {
            let sql = space_weights_select(kind).ok_or(SnapshotError::WeightFailed { code: 0 })?;
            let row: Option<(Vec<u8>, Vec<u8>)> =
                self.conn
                    .query_first(sql)
                    .await
                    .map_err(|e| SnapshotError::WeightFailed {
                        code: server_code(&e),
                    })?;
            Some(row.ok_or(SnapshotError::WeightFailed { code: 0 })?)
        } else {
            None
        };
        let weighing = Weighing::of(kind, spaces.as_ref().map(|(a, b)| (&a[..], &b[..])))
            .ok_or(SnapshotError::WeightFailed { code: 0 })?;
        self.weighings.insert(kind.clone(), weighing.clone());
        Ok(weighing)
    }

    /// The comparable weight of each raw value under the column's character set and
    /// collation, in order: the server's `WEIGHT_STRING`, taken and encoded per [`Weighing`]
    /// (PAD SPACE: as if padded with spaces forever, as the server compares); one round trip
    /// per [`WEIGHT_BATCH`] values.
    pub async fn weights(
        &mut self,
        column: &KeyColumn,
        values: &[&[u8]],
    ) -> Result<Vec<Vec<u8>>, SnapshotError> {
        if !matches!(column.kind, KeyKind::Text { .. }) {
            return Err(SnapshotError::KeyValueInvalid {
                column: column.name.clone(),
                expected: "text",
                got: column.kind.name(),
            });
        }
        let weighing = self.weighing(&column.kind).await?;
        let mut out = Vec::with_capacity(values.len());
        for batch in values.chunks(WEIGHT_BATCH) {
            let sql = weights_select(&column.kind, &weighing, batch.len());
            let params: Vec<mysql_common::Value> = batch.iter().map(|v| hex_param(v)).collect();
            let row: Option<mysql_common::Row> = self
                .conn
                .exec_first(sql, Params::Positional(params))
                .await
                .map_err(|e| SnapshotError::WeightFailed {
                    code: server_code(&e),
                })?;
            let row = row.ok_or(SnapshotError::WeightFailed { code: 0 })?;
            for v in row.unwrap_raw() {
                match v {
                    Some(mysql_common::Value::Bytes(w)) => out.push(
                        weighing
                            .finish(w)
                            .ok_or(SnapshotError::WeightFailed { code: 0 })?,
                    ),
                    _ => return Err(SnapshotError::WeightFailed { code: 0 }),
                }
            }
        }
        if out.len() != values.len() {
            return Err(SnapshotError::WeightFailed { code: 0 });
        }
        Ok(out)
    }

    /// The order-contract canary: fixed values ([`canary_values`]) ranked by the column's
    /// collation (`<`, as the index compares) must order (and tie) exactly as their weights
    /// do, taken exactly as [`Self::weights`] takes them.
    pub async fn check_collation_order(&mut self, column: &KeyColumn) -> Result<(), SnapshotError> {
        let KeyKind::Text { collation, .. } = &column.kind else {
            return Ok(());
        };
        let violated = || SnapshotError::CollationContractViolated {
            collation: collation.clone(),
        };
        let weighing = self.weighing(&column.kind).await?;
        let canary = canary_values(&column.kind);
        let sql = canary_select(&column.kind, &weighing, canary.len());
        let params: Vec<mysql_common::Value> = canary.iter().map(|v| hex_param(v)).collect();
        let rows: Vec<(u64, u64, Vec<u8>)> = self
            .conn
            .exec(sql, Params::Positional(params))
            .await
            .map_err(|e| SnapshotError::WeightFailed {
                code: server_code(&e),
            })?;
        if rows.len() != canary.len() {
            return Err(violated());
        }
        let rows = rows
            .into_iter()
            .map(|(i, r, w)| weighing.finish(w).map(|w| (i, r, w)))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(violated)?;
        if !rank_matches_weights(&rows) {
            return Err(violated());
        }
        Ok(())
    }
}

/// True if, for every pair, `ORDER BY` rank and weight bytes order (and tie) alike.
pub(super) fn rank_matches_weights(rows: &[(u64, u64, Vec<u8>)]) -> bool {
    let mut sorted: Vec<&(u64, u64, Vec<u8>)> = rows.iter().collect();
    sorted.sort_by_key(|r| r.1);
    sorted
        .windows(2)
        .all(|w| w[0].1.cmp(&w[1].1) == w[0].2.cmp(&w[1].2))
}
