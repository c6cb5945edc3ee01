//! `bookmarks openapi`: writes the API document the server serves at `/api/openapi.json`,
//! for `docs/openapi.json` and for tools that read a file. Needs no configuration and no
//! database.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct OpenApiArgs {
    /// Where to write it; `-` for standard output.
    #[arg(long, default_value = "docs/openapi.json")]
    pub out: PathBuf,
}

pub fn run(args: &OpenApiArgs) -> ExitCode {
    let text = document_text();
    if args.out.as_os_str() == "-" {
        print!("{text}");
        return ExitCode::SUCCESS;
    }
    match std::fs::write(&args.out, &text) {
        Ok(()) => {
            eprintln!("wrote {}", args.out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: --out {}: {e}", args.out.display());
            ExitCode::FAILURE
        }
    }
}

/// The document as committed: pretty JSON ending in a newline.
pub fn document_text() -> String {
    let mut text = crate::startup::api_document()
        .to_pretty_json()
        .expect("an OpenAPI document serializes");
    text.push('\n');
    text
}
