//! `capstan cluster …`: the cluster as any node sees it.

use clap::Subcommand;
use reqwest::Method;
use serde_json::{json, Value};

use crate::cli_client::{print_json, ApiArgs, ApiClient, CliError};

/// Cluster subcommands.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Members, leader, term and the pipelines each member owns.
    Status,
    /// Add a running worker (started without initial members) to the cluster: first a
    /// learner that catches up, then a voter.
    AddMember {
        /// The new worker's node id (positive, unused).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        id: u64,
        /// Its Raft address, as the other workers dial it.
        #[arg(long = "raft", value_name = "HOST:PORT")]
        raft: String,
        /// Its REST API address.
        #[arg(long = "api", value_name = "HOST:PORT")]
        api: String,
    },
    /// Remove a member from the cluster (it is told, and stops).
    RemoveMember {
        /// The member's node id.
        id: u64,
    },
    /// Print the fewest pipeline moves that even out the live workers' loads (within one);
    /// with `--apply`, start them. Nothing moves without this.
    Rebalance {
        /// Start the planned moves (without it, a dry run).
        #[arg(long)]
        apply: bool,
    },
}

/// Runs one cluster subcommand.
pub async fn run(args: &ApiArgs, command: ClusterCommand) -> Result<(), CliError> {
    let client = ApiClient::new(args)?;
    let (answer, summary) = match command {
        ClusterCommand::Status => {
            let v = client.get("/cluster").await?;
            let lines = cluster_lines(&v);
            (v, lines)
        }
        ClusterCommand::AddMember { id, raft, api } => {
            let body = json!({"id": id, "raft_addr": raft, "api_addr": api});
            let v = client
                .send(Method::POST, "/cluster/members", Some(body))
                .await?;
            (
                v,
                format!("added member {id} (raft {raft}, api {api}) as a voter"),
            )
        }
        ClusterCommand::Rebalance { apply } => {
            let body = json!({ "dry_run": !apply });
            let v = client
                .send(Method::POST, "/cluster/rebalance", Some(body))
                .await?;
            let lines = rebalance_lines(&v);
            (v, lines)
        }
        ClusterCommand::RemoveMember { id } => {
            let v = client
                .send(Method::DELETE, &format!("/cluster/members/{id}"), None)
                .await?;
            (v, format!("removed member {id}"))
        }
    };
    if args.json {
        print_json(&answer);
    } else {
        println!("{summary}");
    }
    Ok(())
}

/// The plan: each move, then each worker's load before and after.
fn rebalance_lines(v: &Value) -> String {
    let num = |x: &Value| x.as_u64().map_or("-".to_string(), |n| n.to_string());
    let moves = v["moves"].as_array().map(Vec::as_slice).unwrap_or_default();
    let dry_run = v["dry_run"].as_bool() != Some(false);
    let mut lines = vec![match (moves.len(), dry_run) {
        (0, _) => "balanced: no move needed".to_string(),
        (n, true) => {
            format!("{n} moves planned (dry run; `capstan cluster rebalance --apply` starts them)")
        }
        (n, false) => {
            format!("{n} moves started (each pipeline's owner stops it, then hands it over)")
        }
    }];
    for m in moves {
        lines.push(format!(
            "  {} node {} -> node {}",
            m["pipeline"].as_str().unwrap_or("-"),
            num(&m["from"]),
            num(&m["to"])
        ));
    }
    lines.push(format!("{:<6} {:>6} {:>6}", "NODE", "BEFORE", "AFTER"));
    for w in v["workers"].as_array().into_iter().flatten() {
        lines.push(format!(
            "{:<6} {:>6} {:>6}",
            num(&w["node"]),
            num(&w["before"]),
            num(&w["after"])
        ));
    }
    lines.join("\n")
}

fn cluster_lines(v: &Value) -> String {
    let num = |x: &Value| x.as_u64().map_or("-".to_string(), |n| n.to_string());
    let mut lines = vec![format!(
        "node {} answered: leader {}, term {}, last applied {}",
        num(&v["node_id"]),
        num(&v["leader"]),
        num(&v["term"]),
        num(&v["last_applied"])
    )];
    lines.push(format!(
        "{:<4} {:<6} {:<9} {:<22} {:<22} PIPELINES",
        "ID", "ROLE", "HEALTH", "RAFT", "API"
    ));
    for m in v["members"].as_array().into_iter().flatten() {
        let id = m["id"].as_u64();
        let role = if id.is_some() && id == v["leader"].as_u64() {
            "leader"
        } else if m["voter"].as_bool() == Some(true) {
            "voter"
        } else {
            "learner"
        };
        let owned: Vec<&str> = m["owned_pipelines"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        lines.push(format!(
            "{:<4} {:<6} {:<9} {:<22} {:<22} {}",
            num(&m["id"]),
            role,
            m["health"].as_str().unwrap_or("-"),
            m["raft_addr"].as_str().unwrap_or("-"),
            m["api_addr"].as_str().unwrap_or("-"),
            if owned.is_empty() {
                "-".to_string()
            } else {
                owned.join(",")
            }
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebalance_plan_lists_moves_and_loads() {
        let v = serde_json::json!({"dry_run": true,
            "moves": [{"pipeline": "a", "from": 1, "to": 2}, {"pipeline": "b", "from": 1, "to": 3}],
            "workers": [{"node": 1, "before": 3, "after": 1}, {"node": 2, "before": 0, "after": 1},
                        {"node": 3, "before": 0, "after": 1}]});
        assert_eq!(
            rebalance_lines(&v),
            "2 moves planned (dry run; `capstan cluster rebalance --apply` starts them)\n\
             \x20 a node 1 -> node 2\n\
             \x20 b node 1 -> node 3\n\
             NODE   BEFORE  AFTER\n\
             1           3      1\n\
             2           0      1\n\
             3           0      1"
        );
        let none = serde_json::json!({"dry_run": false, "moves": [], "workers": []});
        assert!(rebalance_lines(&none).starts_with("balanced: no move needed"));
    }

    #[test]
    fn members_are_tabulated() {
        let v = serde_json::json!({"node_id": 1, "leader": 2, "term": 3, "last_applied": 9,
        "members": [
            {"id": 1, "raft_addr": "h:1", "api_addr": "h:2", "voter": true, "health": "member", "owned_pipelines": []},
            {"id": 2, "raft_addr": "h:3", "api_addr": "h:4", "voter": true, "health": "member", "owned_pipelines": ["a", "b"]}
        ]});
        let s = cluster_lines(&v);
        assert!(
            s.starts_with("node 1 answered: leader 2, term 3, last applied 9"),
            "{s}"
        );
        assert!(
            s.lines()
                .any(|l| l.starts_with("2    leader") && l.ends_with("a,b")),
            "{s}"
        );
    }
}
