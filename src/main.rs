//! The c2q command line. (Queue branch: the worker's subcommands; `prove` and friends come
//! from main.)

use clap::{Parser, Subcommand};

use c2q::cli_queue::{DlqArgs, StatusArgs, SubmitArgs};
use c2q::worker::WorkerArgs;

#[derive(Parser)]
#[command(name = "c2q", version, about = "Filecoin PoRep Commit2 proving worker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prove jobs from RabbitMQ until told to stop.
    Worker(WorkerArgs),
    /// Enqueue a C2 job (or a canary).
    Submit(SubmitArgs),
    /// Inspect, replay or purge dead-lettered jobs.
    Dlq(DlqArgs),
    /// Queue depths, jobs in flight, ledger counts.
    Status(StatusArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Worker(args) => c2q::worker::run(args),
        Command::Submit(args) => c2q::cli_queue::submit(args),
        Command::Dlq(args) => c2q::cli_queue::dlq(args),
        Command::Status(args) => c2q::cli_queue::status(args),
    }
}
