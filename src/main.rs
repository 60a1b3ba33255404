//! The `robots-guard` command line: `serve`, `check-config`, `check`, `ca init`,
//! `keys init`, `audit`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use robots_guard::admin::AdminServer;
use robots_guard::check::{self, CheckRequest};
use robots_guard::config::Config;
use robots_guard::proxy::{CaStatus, Server};
use robots_guard::robots::Purposes;

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
    /// Run the proxy (the default when no command is given).
    Serve {
        /// The configuration file.
        #[arg(long, value_name = "PATH", default_value = "config.toml")]
        config: PathBuf,
    },
    /// Check a configuration file without starting: parse it, and load the
    /// files it names (extra roots, the CA if it exists). Prints
    /// `config OK: PATH` and exits 0, or prints the error and exits 2.
    CheckConfig {
        /// The configuration file.
        #[arg(long, value_name = "PATH", default_value = "config.toml")]
        config: PathBuf,
    },
    /// Manage the local CA used for HTTPS interception.
    Ca {
        #[command(subcommand)]
        command: CaCommand,
    },
    /// Manage the key that signs requests (Web Bot Auth, `[signing]`).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Show the robots.txt copy a running proxy holds for an origin, with
    /// the fields its access log records (fetched at, ETag, Last-Modified,
    /// SHA-256) and its bytes, from the admin listener's `/audit`. Exit 0
    /// when shown, 1 when the proxy has no copy, 2 on error.
    Audit {
        /// The origin, `scheme://host[:port]` (a URL's path is ignored).
        #[arg(value_name = "ORIGIN")]
        origin: String,
        /// The configuration whose `admin.listen` to ask.
        #[arg(long, value_name = "PATH", default_value = "config.toml")]
        config: PathBuf,
        /// The admin listener to ask, instead of the configuration's.
        #[arg(long, value_name = "ADDR")]
        admin: Option<std::net::SocketAddr>,
        /// Print the endpoint's JSON instead.
        #[arg(long)]
        json: bool,
    },
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
        /// Judge as the proxy does: the URL's RFC 3986 normal form (what it
        /// forwards) and the forms servers read it as, naming the one that
        /// decided. Without it, Google's verdict for the URL as written.
        #[arg(long)]
        as_proxy: bool,
        /// With --as-proxy: the spellings judged, comma-separated
        /// (as robots.equivalent_spellings).
        #[arg(
            long,
            value_name = "LIST",
            requires = "as_proxy",
            default_value = "merge-slashes,decode-slash,strip-path-params,backslash"
        )]
        spellings: String,
        /// What the robot will use the content for: search, ai-input,
        /// ai-train (repeatable or comma-separated). A URL the site refuses
        /// for one of them (robots.txt Content-Signal or Content-Usage) is
        /// disallowed, naming the statement; a rule that disallows decides
        /// first.
        #[arg(long, value_name = "LIST")]
        purpose: Vec<Purposes>,
        /// URLs or paths to check, percent-encoded.
        #[arg(value_name = "URL", required_unless_present = "explain")]
        urls: Vec<String>,
    },
}

#[derive(Subcommand)]
enum CaCommand {
    /// Create the CA certificate (`ca.pem`) and key (`ca.key`, mode 0600).
    Init {
        /// Where to put the files.
        #[arg(long, default_value = "certs")]
        dir: PathBuf,
        /// Replace an existing CA (clients trusting the old one will reject the proxy).
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create the Ed25519 signing key (`signing.key`, mode 0600) and print
    /// its keyid and public JWK, to publish in the key directory.
    Init {
        /// Where to put the key.
        #[arg(long, default_value = "certs")]
        dir: PathBuf,
        /// Replace an existing key (sites that learned the old one stop
        /// recognising the robot until they fetch the directory again).
        #[arg(long)]
        force: bool,
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
            as_proxy,
            spellings,
            purpose,
            urls,
        }) => run_check(
            &robots,
            agent.as_deref(),
            user_agent.as_deref(),
            explain,
            as_proxy.then_some(spellings.as_str()),
            purpose.into_iter().fold(Purposes::NONE, Purposes::union),
            &urls,
        ),
        Some(Command::Serve { config }) => serve(&config),
        Some(Command::CheckConfig { config }) => check_config(&config),
        Some(Command::Ca {
            command: CaCommand::Init { dir, force },
        }) => ca_init(&dir, force),
        Some(Command::Keys {
            command: KeysCommand::Init { dir, force },
        }) => keys_init(&dir, force),
        Some(Command::Audit {
            origin,
            config,
            admin,
            json,
        }) => audit(&origin, &config, admin, json),
        None => serve(std::path::Path::new("config.toml")),
    }
}

fn ca_init(dir: &std::path::Path, force: bool) -> ExitCode {
    match robots_guard::tls::init_ca(dir, force) {
        Ok(files) => {
            println!(
                "created {} and {} (mode 0600)\n\
                 trust it in clients: curl --cacert {cert}, REQUESTS_CA_BUNDLE={cert}, \
                 SSL_CERT_FILE={cert}, or the system store (see README)",
                files.cert.display(),
                files.key.display(),
                cert = files.cert.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("robots-guard: {e}");
            ExitCode::from(2)
        }
    }
}

fn keys_init(dir: &std::path::Path, force: bool) -> ExitCode {
    use robots_guard::signing::{DIRECTORY_MEDIA_TYPE, DIRECTORY_PATH};
    match robots_guard::signing::init_key(dir, force) {
        Ok(key) => {
            println!(
                "created {path} (mode 0600)\n\
                 keyid: {keyid}\n\
                 public JWK: {jwk}\n\
                 publish the key directory at https://YOUR-HOST{DIRECTORY_PATH}\n\
                 (the admin listener serves it, as {DIRECTORY_MEDIA_TYPE}, once [signing] is \
                 configured) and set in config.toml:\n\
                 [signing]\n\
                 key = \"{path}\"\n\
                 signature_agent = \"https://YOUR-HOST{DIRECTORY_PATH}\"",
                path = key.path.display(),
                keyid = key.keyid,
                jwk = key.jwk,
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("robots-guard: {e}");
            ExitCode::from(2)
        }
    }
}

fn serve(config_path: &std::path::Path) -> ExitCode {
    let config = match Config::load(config_path) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("robots-guard: {e}");
            return ExitCode::from(2);
        }
    };
    // Dropped last, after the runtime: flushes the access log.
    let _telemetry = match robots_guard::telemetry::init(&config.log) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("robots-guard: {e}");
            return ExitCode::from(2);
        }
    };
    // Before any socket is opened: the connection caps need more
    // descriptors than the usual soft limit.
    robots_guard::fd_limit::raise_and_check(&config);
    // The control runtime: admin listener, signals, reloads and the drain.
    // Clients are served on the proxy's own worker threads (`Server::run`).
    let Some(runtime) = control_runtime() else {
        return ExitCode::FAILURE;
    };
    runtime.block_on(async {
        let server = match Server::bind(&config).await {
            Ok(server) => server,
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("robots-guard: {e}");
                return ExitCode::FAILURE;
            }
        };
        let admin = match AdminServer::bind(config.admin.listen, server.live()).await {
            Ok(admin) => admin,
            Err(e) => {
                tracing::error!("{e}");
                eprintln!("robots-guard: {e}");
                return ExitCode::FAILURE;
            }
        };
        tracing::info!(
            listen = %server.local_addr(),
            admin = %admin.local_addr(),
            workers = server.workers().get(),
            config = %config_path.display(),
            "robots-guard proxy ready; set HTTP_PROXY=http://{}; status page http://{}/",
            server.local_addr(),
            admin.local_addr()
        );
        let admin = tokio::spawn(admin.run());
        #[cfg(unix)]
        tokio::spawn(reload_on_hangup(server.live(), config_path.to_path_buf()));
        let served = server.run(shutdown_signal()).await;
        admin.abort();
        match served {
            Ok(()) => {
                tracing::info!("robots-guard stopped");
                ExitCode::SUCCESS
            }
            Err(e) => {
                tracing::error!("robots-guard stopped: {e}");
                eprintln!("robots-guard: {e}");
                ExitCode::FAILURE
            }
        }
    })
}

/// Reloads the configuration file on each SIGHUP. A refused reload is
/// logged by `reload_from` and changes nothing.
#[cfg(unix)]
async fn reload_on_hangup(handle: robots_guard::proxy::Live, path: PathBuf) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut hangups = match signal(SignalKind::hangup()) {
        Ok(hangups) => hangups,
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGHUP; config reload is unavailable");
            return;
        }
    };
    while hangups.recv().await.is_some() {
        tracing::info!(config = %path.display(), "SIGHUP: reloading the configuration");
        let (handle, path) = (handle.clone(), path.clone());
        // Building the new state reads files (CA, roots): off the async
        // worker threads.
        let _ = tokio::task::spawn_blocking(move || handle.reload_from(&path)).await;
    }
}

/// A single-threaded runtime for the command's own async work, or `None`
/// (said on stderr) when the OS refuses one.
fn control_runtime() -> Option<tokio::runtime::Runtime> {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => Some(runtime),
        Err(e) => {
            eprintln!("robots-guard: cannot start the async runtime: {e}");
            None
        }
    }
}

/// `audit ORIGIN`: the proxy's copy of the origin's robots.txt.
fn audit(
    origin: &str,
    config: &std::path::Path,
    admin: Option<std::net::SocketAddr>,
    json: bool,
) -> ExitCode {
    use robots_guard::admin::audit_cli::{self, AuditError};
    let admin = match admin {
        Some(admin) => admin,
        None => match Config::load(config) {
            Ok(config) => config.admin.listen,
            Err(e) => {
                eprintln!("robots-guard: {e} (or name the admin listener with --admin)");
                return ExitCode::from(2);
            }
        },
    };
    let Some(runtime) = control_runtime() else {
        return ExitCode::from(2);
    };
    match runtime.block_on(audit_cli::fetch(admin, origin)) {
        Ok(audit) if json => {
            println!("{audit:#}");
            ExitCode::SUCCESS
        }
        Ok(audit) => {
            print!("{}", audit_cli::render(&audit));
            ExitCode::SUCCESS
        }
        Err(AuditError::NotCached(reason)) => {
            eprintln!("robots-guard: {reason}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("robots-guard: {e}");
            ExitCode::from(2)
        }
    }
}

/// `check-config`: what `serve` would refuse, without starting it.
fn check_config(path: &std::path::Path) -> ExitCode {
    let config = match Config::load(path) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("robots-guard: {e}");
            return ExitCode::from(2);
        }
    };
    let checked = robots_guard::proxy::preflight(&config)
        .map_err(|e| e.to_string())
        .and_then(|ca| {
            robots_guard::telemetry::check(&config.log).map_err(|e| e.to_string())?;
            Ok(ca)
        });
    match checked {
        Ok(ca) => {
            println!("config OK: {}", path.display());
            if ca == CaStatus::WillBeCreated {
                println!(
                    "note: the CA ({}, {}) does not exist yet; serve creates it on first start",
                    config.tls.ca_cert.display(),
                    config.tls.ca_key.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("robots-guard: config {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}

/// Completes on ctrl-c or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

fn run_check(
    robots: &std::path::Path,
    agent: Option<&str>,
    user_agent: Option<&str>,
    explain: bool,
    as_proxy: Option<&str>,
    purposes: Purposes,
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
    let as_proxy = match as_proxy.map(check::parse_spellings).transpose() {
        Ok(spellings) => spellings,
        Err(e) => {
            eprintln!("robots-guard: --spellings: {e}");
            return ExitCode::from(2);
        }
    };
    let request = CheckRequest {
        robots: &body,
        agent,
        urls,
        explain,
        as_proxy,
        purposes,
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
