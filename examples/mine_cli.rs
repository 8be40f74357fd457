//! Stand-in for `tayga mine` until the command is wired into `src/bin/tayga.rs`:
//! `cargo run --release --example mine_cli -- FILE [--format csv] [--stats]`.

use clap::Parser;
#[allow(unused_imports)]
use tayga::mine;

#[path = "../src/cmd/mine.rs"]
mod cmd_mine;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: cmd_mine::MineArgs,
    #[arg(long)]
    json: bool,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    cmd_mine::run(&cli.args, cli.json)
}
