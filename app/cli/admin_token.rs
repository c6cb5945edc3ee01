//! `bookmarks admin-token`: prints the admin token the control migrations generated for this
//! deployment, for its operator (`docker compose exec web1 bookmarks admin-token`).

use std::process::ExitCode;

use crate::configuration::Settings;
use crate::configuration::secret::{self, GeneratedSecret};

pub async fn run(settings: &Settings) -> ExitCode {
    let mut control = match super::control::connect(&settings.topology).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: cannot reach the control database: {e}");
            return ExitCode::FAILURE;
        }
    };
    match secret::generated(&mut control, GeneratedSecret::AdminToken).await {
        Ok(token) => {
            println!("{token}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
