//! `pipeline status NAME --watch`: the status polled every `--interval` and redrawn in place,
//! with a progress bar per snapshot table still being read (rows done of the estimate, rate,
//! time left). It ends on ctrl-c, with `--wait` when the wait is over, or on an error that
//! asking again cannot mend (an unknown pipeline, a refused token); a node that cannot be
//! reached or answers 5xx is shown and asked again. Where standard output is no terminal (or
//! with `--json`) each changed status is printed instead.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::cli_client::ApiClient;
use crate::cli_error::CliError;
use crate::cli_status_view::{header_lines, status_lines, table_bars, TableBar};
use crate::cli_wait::{is_pending_error, wait_error, wait_outcome, WaitGoal, WaitOutcome};

/// A table bar: name, status, the bar, rows done of the estimate, rows per second, time left.
const BAR: &str =
    "  {prefix:<32} {msg:<11} [{bar:30}] {human_pos}/{human_len} rows  {per_sec:0}  eta {eta}";
/// A table without an estimate (or not begun): no bar, rate or time left.
const NO_BAR: &str = "  {prefix:<32} {msg:<11} {human_pos} rows";

/// Watches `name` until ctrl-c, or until `goal` holds (an error when it fails or times out).
pub async fn watch(
    api: &ApiClient,
    name: &str,
    interval: Duration,
    goal: Option<&WaitGoal>,
    json: bool,
) -> Result<(), CliError> {
    let path = format!("/pipelines/{}/status", crate::cli_pipeline::encode(name));
    let mut screen = if std::io::stdout().is_terminal() && !json {
        Screen::terminal()
    } else {
        Screen::Plain { json, last: None }
    };
    let deadline = goal.map(|g| Instant::now() + g.timeout);
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let mut last: Option<Value> = None;
    let end = loop {
        let polled = tokio::select! {
            _ = &mut interrupted => break Ok(()),
            polled = api.get(&path) => polled,
        };
        match polled {
            Ok(status) => {
                screen.show(&status);
                if let Some(goal) = goal {
                    match wait_outcome(&status, goal) {
                        WaitOutcome::Pending => {}
                        WaitOutcome::Reached => break Ok(()),
                        failed => break Err(wait_error(name, goal, failed, Some(&status))),
                    }
                }
                last = Some(status);
            }
            Err(e) if goal.is_some_and(|g| is_pending_error(&e, g)) => {}
            // a node restarting or an election: shown, and polled again
            Err(e) if e.is_transient() => screen.show_error(&e),
            // an unknown pipeline, a refused token: asking again changes nothing
            Err(e) => break Err(e),
        }
        let now = Instant::now();
        let pause = match (goal, deadline) {
            (Some(goal), Some(deadline)) if now >= deadline => {
                break Err(wait_error(name, goal, WaitOutcome::Pending, last.as_ref()));
            }
            (Some(_), Some(deadline)) => interval.min(deadline - now),
            _ => interval,
        };
        tokio::select! {
            _ = &mut interrupted => break Ok(()),
            () = tokio::time::sleep(pause) => {}
        }
    };
    screen.finish();
    end
}

/// Where the watch draws.
#[derive(Debug)]
enum Screen {
    /// Redrawn in place: the status lines, then one bar per table still read.
    Terminal {
        multi: MultiProgress,
        header: ProgressBar,
        /// The status lines last drawn, to show an error beneath.
        shown: String,
        bars: BTreeMap<String, ProgressBar>,
    },
    /// Printed when changed: the status lines (blank-line separated), or each status as one
    /// line of JSON.
    Plain { json: bool, last: Option<String> },
}

impl Screen {
    fn terminal() -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stdout());
        let header = multi.add(ProgressBar::new_spinner().with_style(text_style()));
        Screen::Terminal {
            multi,
            header,
            shown: String::new(),
            bars: BTreeMap::new(),
        }
    }

    fn show(&mut self, status: &Value) {
        match self {
            Screen::Terminal {
                multi,
                header,
                shown,
                bars,
            } => {
                *shown = header_lines(status).join("\n");
                header.set_message(shown.clone());
                let wanted = table_bars(status);
                bars.retain(|table, bar| {
                    let keep = wanted.iter().any(|w| &w.table == table);
                    if !keep {
                        bar.finish_and_clear();
                        multi.remove(bar);
                    }
                    keep
                });
                for spec in wanted {
                    let bar = bars
                        .entry(spec.table.clone())
                        .or_insert_with(|| multi.add(new_bar(&spec)));
                    update_bar(bar, &spec);
                }
            }
            Screen::Plain { json, last } => {
                if let Some(text) = plain_text(status, *json, last.as_deref()) {
                    println!("{text}");
                    *last = Some(text);
                }
            }
        }
    }

    fn show_error(&mut self, e: &CliError) {
        let line = format!("(the last poll failed: {}: {e})", e.code());
        match self {
            Screen::Terminal { header, shown, .. } => {
                header.set_message(format!("{shown}\n{line}"));
            }
            Screen::Plain { .. } => eprintln!("{line}"),
        }
    }

    /// Leaves the last drawing on the terminal.
    fn finish(self) {
        if let Screen::Terminal { header, bars, .. } = self {
            header.abandon();
            for bar in bars.values() {
                bar.abandon();
            }
        }
    }
}

/// What plain output prints for `status`, if anything: a JSON line every time, the status
/// lines when they differ from `last` (a blank line before all but the first).
fn plain_text(status: &Value, json: bool, last: Option<&str>) -> Option<String> {
    if json {
        return Some(status.to_string());
    }
    let text = status_lines(status);
    match last {
        Some(previous) if previous.trim_start() == text => None,
        Some(_) => Some(format!("\n{text}")),
        None => Some(text),
    }
}

fn text_style() -> ProgressStyle {
    ProgressStyle::with_template("{msg}").unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn bar_style(spec: &TableBar) -> ProgressStyle {
    let template = if spec.total == 0 || spec.status == "pending" {
        NO_BAR
    } else {
        BAR
    };
    ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

fn new_bar(spec: &TableBar) -> ProgressBar {
    let bar = ProgressBar::new(spec.total)
        .with_style(bar_style(spec))
        .with_prefix(spec.table.clone())
        .with_message(spec.status.clone())
        .with_position(spec.done);
    // rows read before the watch began are no part of its rate
    bar.reset_eta();
    bar
}

fn update_bar(bar: &ProgressBar, spec: &TableBar) {
    bar.set_style(bar_style(spec));
    bar.set_length(spec.total);
    bar.set_position(spec.done);
    bar.set_message(spec.status.clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_output_prints_changes() {
        let s = json!({"name": "p", "desired_state": "running", "state": "streaming",
            "epoch": 2, "owner": 1, "position": "u:1-3", "lag_ms": 4, "snapshot": []});
        let first = plain_text(&s, false, None).unwrap();
        assert!(first.starts_with("pipeline:      p\n"), "{first}");
        assert_eq!(plain_text(&s, false, Some(&first)), None);
        let mut t = s.clone();
        t["lag_ms"] = json!(9);
        let second = plain_text(&t, false, Some(&first)).unwrap();
        assert!(second.starts_with("\npipeline:      p\n"), "{second}");
        assert!(second.ends_with("lag:           9 ms"), "{second}");
        assert_eq!(plain_text(&t, false, Some(&second)), None);
        assert_eq!(plain_text(&s, true, Some("x")), Some(s.to_string()));
    }

    #[test]
    fn the_templates_parse() {
        for template in [BAR, NO_BAR] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }
}
