//! The documentation sections whose shell snippets a test runs verbatim. The stack test runs
//! every one of them and fails if one was left out; the docs contract test refuses a shell
//! snippet anywhere else, so a command on a page is either run or marked as illustrative.

/// (page, section): the snippets between `<!-- SECTION:start -->` and `<!-- SECTION:end -->`.
pub const RUN_SECTIONS: &[(&str, &str)] = &[
    ("README.md", "quickstart"),
    ("docs/walkthrough.md", "walkthrough"),
    ("docs/deploys.md", "add-shard"),
];

/// The page holding `section`.
pub fn page_of(section: &str) -> &'static str {
    RUN_SECTIONS
        .iter()
        .find(|(_, s)| *s == section)
        .unwrap_or_else(|| panic!("{section} is not a run section"))
        .0
}

/// The body of each ```` ```sh ```` block between the section's markers in `text`; `None` when
/// the markers are missing or out of order.
pub fn sh_blocks(text: &str, section: &str) -> Option<Vec<String>> {
    let start = text.find(&format!("<!-- {section}:start -->"))?;
    let end = text.find(&format!("<!-- {section}:end -->"))?;
    (start < end).then(|| {
        text[start..end]
            .split("```sh\n")
            .skip(1)
            .map(|block| block.split("```").next().unwrap_or_default().to_owned())
            .collect()
    })
}
