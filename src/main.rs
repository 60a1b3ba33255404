//! The `robots-guard` command line (DESIGN.md §8).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use robots_guard::check::{self, CheckRequest};

#[derive(Parser)]
#[command(
    name = "robots-guard",
    version,
    about = "A forward HTTP(S) proxy that makes any HTTP client a polite robot"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Test URLs against a robots.txt file: one line per URL, exit 0 if all
    /// are allowed, 1 if any is disallowed, 2 on error.
    Check {
        /// The robots.txt file to read.
        #[arg(long, value_name = "FILE")]
        robots: PathBuf,
        /// The robot's product token (e.g. `Googlebot`), matched as given.
        #[arg(long, value_name = "TOKEN", required_unless_present = "user_agent")]
        agent: Option<String>,
        /// A full User-Agent header; its product token is used (see README).
        #[arg(long, value_name = "HEADER", conflicts_with = "agent")]
        user_agent: Option<String>,
        /// Also print the parse diagnostics, groups and pacing for the agent.
        #[arg(long)]
        explain: bool,
        /// URLs or paths to check, percent-encoded.
        #[arg(value_name = "URL", required_unless_present = "explain")]
        urls: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Check {
            robots,
            agent,
            user_agent,
            explain,
            urls,
        }) => run_check(
            &robots,
            agent.as_deref(),
            user_agent.as_deref(),
            explain,
            &urls,
        ),
        None => {
            eprintln!("robots-guard: no command given; see `robots-guard --help`");
            ExitCode::from(2)
        }
    }
}

fn run_check(
    robots: &std::path::Path,
    agent: Option<&str>,
    user_agent: Option<&str>,
    explain: bool,
    urls: &[String],
) -> ExitCode {
    let body = match std::fs::read(robots) {
        Ok(body) => body,
        Err(e) => {
            eprintln!("robots-guard: cannot read {}: {e}", robots.display());
            return ExitCode::from(2);
        }
    };
    let Some(agent) = check::agent_token(agent, user_agent) else {
        eprintln!("robots-guard: give --agent TOKEN or --user-agent HEADER");
        return ExitCode::from(2);
    };
    let request = CheckRequest {
        robots: &body,
        agent,
        urls,
        explain,
    };
    let mut stdout = std::io::stdout().lock();
    match check::run(&request, &mut stdout) {
        Ok(true) => ExitCode::from(1),
        Ok(false) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("robots-guard: {e}");
            ExitCode::from(2)
        }
    }
}
