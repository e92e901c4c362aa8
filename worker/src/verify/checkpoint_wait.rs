//! `--wait-for-checkpoint`: before comparing, wait until the pipeline's checkpoint (the
//! `position` of its REST status) covers the source's executed position, so everything the
//! source committed has been published. [`covers`] decides; [`wait_for_checkpoint`] polls.

use std::time::{Duration, Instant};

use capstan_core::position::Position;
use tracing::info;

use super::verify_error::VerifyError;
use crate::cli_client::ApiClient;

/// True when the checkpoint's text (`None`: no checkpoint yet) parses as a position of
/// `executed`'s flavour that holds all of `executed`.
pub fn covers(checkpoint: Option<&str>, executed: &Position) -> bool {
    checkpoint
        .and_then(|text| {
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            Position::parse(executed.flavor(), &compact).ok()
        })
        .is_some_and(|checkpoint| executed.is_subset(&checkpoint))
}

/// Polls the status of `pipeline` every half second until its checkpoint covers
/// `executed`, for at most `timeout`.
pub async fn wait_for_checkpoint(
    client: &ApiClient,
    pipeline: &str,
    executed: &Position,
    timeout: Duration,
) -> Result<(), VerifyError> {
    let deadline = Instant::now() + timeout;
    loop {
        let status = client.get(&format!("/pipelines/{pipeline}/status")).await;
        match status {
            Ok(status) => {
                let checkpoint = status.get("position").and_then(|p| p.as_str());
                if covers(checkpoint, executed) {
                    info!(
                        pipeline,
                        "verify: the checkpoint covers the source's executed position"
                    );
                    return Ok(());
                }
            }
            // a node between leaders: ask again
            Err(e) if e.is_transient() => {}
            Err(e) => return Err(e.into()),
        }
        if Instant::now() >= deadline {
            return Err(VerifyError::CheckpointTimeout {
                pipeline: pipeline.to_string(),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use capstan_core::position::Flavor;

    use super::*;

    const UUID: &str = "3e11fa47-71ca-11e1-9e33-c80aa9429562";

    #[test]
    fn the_checkpoint_must_hold_every_executed_transaction() {
        let executed = Position::parse(Flavor::Mysql, &format!("{UUID}:1-10")).unwrap();
        assert!(covers(Some(&format!("{UUID}:1-10")), &executed));
        assert!(covers(Some(&format!("{UUID}:1-12,\n{UUID}:20")), &executed));
        assert!(!covers(Some(&format!("{UUID}:1-9")), &executed));
        assert!(!covers(None, &executed));
        assert!(!covers(Some("not a position"), &executed));
        let mariadb = Position::parse(Flavor::Mariadb, "0-1-5").unwrap();
        assert!(covers(Some("0-1-5"), &mariadb));
        assert!(covers(Some("0-1-7"), &mariadb));
        assert!(!covers(Some("0-1-4"), &mariadb));
    }
}
