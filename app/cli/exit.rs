//! Exit codes every subcommand shares: 0 success, 1 runtime failure, 2 bad configuration or
//! arguments.

/// Bad configuration or arguments.
pub const EXIT_CONFIG: u8 = 2;
