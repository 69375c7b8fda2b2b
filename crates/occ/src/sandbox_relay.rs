//! `occ sandbox-relay`: the relay on either side of a contained gateway's private network
//! ([`occ_host::sandbox::relay`]). occ's process Driver starts it; nobody else should.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Args;
use occ_host::sandbox::relay::{self, Forward, RelayEnd, RelayPlan};

/// Arguments of `occ sandbox-relay`.
#[derive(Debug, Args)]
pub struct SandboxRelayArgs {
    /// The directory of the relay's Unix sockets (their names are relative to it).
    #[arg(long, value_name = "DIR")]
    socket_dir: PathBuf,
    /// `FROM=TO`: listen on FROM, connect each connection to TO (`tcp:HOST:PORT`,
    /// `unix:NAME`).
    #[arg(long = "forward", value_name = "FROM=TO", value_parser = Forward::parse)]
    forwards: Vec<Forward>,
    /// `HOST:PORT` the egress proxy connects to even on this machine (the configuration
    /// names it).
    #[arg(long = "allow", value_name = "HOST:PORT", value_parser = allowed)]
    allow: Vec<(String, u16)>,
    /// The program the relay runs (and exits like), then its arguments.
    #[arg(required = true, last = true, value_name = "PROGRAM")]
    command: Vec<OsString>,
}

pub async fn run(args: SandboxRelayArgs) -> anyhow::Result<()> {
    let mut command = args.command.into_iter();
    let program = command
        .next()
        .ok_or_else(|| anyhow::anyhow!("no program to run"))?;
    let plan = RelayPlan {
        socket_dir: args.socket_dir,
        forwards: args.forwards,
        named: args.allow.into_iter().collect(),
        program,
        args: command.collect(),
    };
    match relay::run(plan).await {
        Ok(never) => match never {},
        Err(message) => anyhow::bail!("sandbox-relay: {message}"),
    }
}

fn allowed(text: &str) -> Result<(String, u16), String> {
    match Forward::parse(&format!("tcp:{text}=unix:x"))?.from {
        RelayEnd::Tcp(host, port) => Ok((host.to_ascii_lowercase(), port)),
        _ => Err(format!("`{text}`: expected HOST:PORT")),
    }
}
