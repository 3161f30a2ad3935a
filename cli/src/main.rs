//! `settle`: look at a database's queues, put dead letters back or purge
//! them, show the statements a queue runs, register a queue, and serve a web
//! dashboard.
//! docs/operations.md documents every command.
//!
//! Exit codes: 0 done, 1 a failure (one line on stderr), 2 bad usage.

mod dashboard;
mod describe;
mod output;

use clap::{ArgGroup, Parser, Subcommand};
use settle::Admin;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "settle",
    version,
    about = "Operate settle queues: counts, dead letters, statements, registration, a dashboard"
)]
struct Cli {
    /// The database: postgres://… (or libpq key=value pairs; TLS by sslmode, PG* variables
    /// for what it leaves out), mysql://…, mariadb://… or sqlite://…
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    url: Option<String>,
    /// A queue the portable path serves (it has no registry):
    /// NAME[=TABLE][,form=lease|row_lock|advisory][,dead_letter=TABLE_OR_GROUP][,max_attempts=N].
    /// Repeat it for several. Not needed with the PostgreSQL extension.
    #[arg(long = "queue", value_name = "SPEC", global = true)]
    queues: Vec<String>,
    /// Print JSON for scripts instead of a table
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Every queue with its counts: ready, delayed, in flight, dead, oldest ready age;
    /// with the extension also its table's dead row versions, and a warning on stderr
    /// when something has held the xmin horizon back for long
    Queues {
        /// Warn when the xmin horizon has been held at least this long
        #[arg(long, default_value = "1m", value_parser = humantime::parse_duration)]
        horizon_warn: Duration,
    },
    /// A queue's dead letters
    Dead {
        #[command(subcommand)]
        command: Dead,
    },
    /// The statements settle runs for a queue
    Sql {
        /// the queue
        queue: String,
    },
    /// Register a queue, or change its registration (the table's owner's action;
    /// PostgreSQL with the extension): prints created, changed (with what differed)
    /// or unchanged
    Register {
        /// NAME[=TABLE][,form=lease|row_lock|advisory][,dead_letter=TABLE_OR_GROUP,max_attempts=N]
        spec: String,
    },
    /// Serve the web dashboard
    Dashboard {
        /// Address to listen on; a non-loopback address needs --token
        #[arg(long, default_value = "127.0.0.1:7433")]
        listen: std::net::SocketAddr,
        /// Required of every request (Authorization: Bearer T, or ?token=T once, which sets a cookie)
        #[arg(long, env = "SETTLE_DASHBOARD_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Show only: no requeue or purge
        #[arg(long)]
        read_only: bool,
        /// How often the queues' counts are sampled for the sparklines
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        sample_every: Duration,
    },
}

#[derive(Subcommand)]
enum Dead {
    /// The dead rows: id, attempt, a short payload
    List {
        queue: String,
        /// at most this many, in id order
        #[arg(long, default_value_t = 20)]
        limit: i64,
    },
    /// One dead row, whole
    Show { queue: String, id: String },
    /// Move dead rows back into the queue (attempt reset); prints how many moved
    #[command(group(ArgGroup::new("which").required(true).args(["all", "ids"])))]
    Requeue {
        queue: String,
        /// every dead row of the queue
        #[arg(long)]
        all: bool,
        /// these rows
        ids: Vec<String>,
    },
    /// Delete dead rows created longer ago than a duration (and/or with these ids)
    #[command(group(ArgGroup::new("which").required(true).multiple(true).args(["older_than", "ids"])))]
    Purge {
        queue: String,
        /// e.g. 7d, 12h, 30m (by the row's created_at column); 0s: every one
        #[arg(long, value_parser = humantime::parse_duration)]
        older_than: Option<Duration>,
        /// only these rows
        ids: Vec<String>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("settle: {}", e.replace('\n', " "));
            ExitCode::from(1)
        }
    }
}

async fn connect(cli: &Cli, pool: usize) -> Result<Admin, String> {
    let Some(url) = cli.url.as_deref() else {
        return Err("no database: give --url or set DATABASE_URL".into());
    };
    let described = cli
        .queues
        .iter()
        .map(|s| describe::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let admin = Admin::connect(url, pool, described)
        .await
        .map_err(|e| e.to_string())?;
    eprintln!("settle: {}", admin.backend());
    Ok(admin)
}

async fn run(cli: Cli) -> Result<(), String> {
    let out = output::Out { json: cli.json };
    match &cli.command {
        Command::Queues { horizon_warn } => {
            let a = connect(&cli, 2).await?;
            let qs = a.queues().await.map_err(|e| e.to_string())?;
            // the extension's queue_health (0.7.0); without it, counts only
            let health = a.health().await.unwrap_or_default();
            out.queues(&qs, &health);
            if let Some(w) = output::horizon_warning(&health, *horizon_warn) {
                eprintln!("{w}");
            }
        }
        Command::Sql { queue } => {
            let a = connect(&cli, 2).await?;
            out.statements(&a.statements(queue).await.map_err(|e| e.to_string())?);
        }
        Command::Register { spec } => {
            let queue = describe::parse_for_register(spec)?;
            let a = connect(&cli, 1).await?;
            out.registered(&a.register(&queue).await.map_err(|e| e.to_string())?);
        }
        Command::Dead { command } => {
            let a = connect(&cli, 2).await?;
            match command {
                Dead::List { queue, limit } => out.dead_list(
                    &a.dead_rows(queue, *limit, None)
                        .await
                        .map_err(|e| e.to_string())?,
                ),
                Dead::Show { queue, id } => {
                    let rows = a
                        .dead_rows(queue, 1, Some(std::slice::from_ref(id)))
                        .await
                        .map_err(|e| e.to_string())?;
                    let Some(row) = rows.first() else {
                        return Err(format!("queue \"{queue}\" has no dead row with id {id}"));
                    };
                    out.dead_show(row);
                }
                Dead::Requeue { queue, all, ids } => {
                    let ids = (!*all).then_some(ids.as_slice());
                    let n = a
                        .requeue_dead(queue, ids)
                        .await
                        .map_err(|e| e.to_string())?;
                    out.count("requeued", n);
                }
                Dead::Purge {
                    queue,
                    older_than,
                    ids,
                } => {
                    let ids = (!ids.is_empty()).then_some(ids.as_slice());
                    let n = a
                        .purge_dead(queue, *older_than, ids)
                        .await
                        .map_err(|e| e.to_string())?;
                    out.count("purged", n);
                }
            }
        }
        Command::Dashboard {
            listen,
            token,
            read_only,
            sample_every,
        } => {
            if let Some(t) = token {
                dashboard::check_token(t)?;
            }
            if !listen.ip().is_loopback() && token.is_none() {
                return Err(format!(
                    "refusing to listen on {listen} without a token: anyone who can reach it could requeue and purge (give --token or SETTLE_DASHBOARD_TOKEN, or listen on 127.0.0.1)"
                ));
            }
            let a = connect(&cli, 4).await?;
            let cfg = dashboard::Config {
                listen: *listen,
                token: token.clone(),
                read_only: *read_only,
                sample_every: *sample_every,
            };
            dashboard::serve(a, cfg).await?;
        }
    }
    Ok(())
}
