//! A real browser for the stack test: headless Chromium driven through chromedriver
//! (Debian's `chromium` and `chromium-driver`) over WebDriver, with screenshots saved
//! under `target/browser/` as test artifacts.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use crate::common::{eventually, free_port};

/// Where screenshots go; `cargo xtask admin-screenshot` copies the admin page's into docs/.
pub fn artifacts_dir() -> PathBuf {
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| format!("{}/target", env!("CARGO_MANIFEST_DIR")));
    PathBuf::from(target).join("browser")
}

/// A chromedriver process and one browser session; both end when this is dropped.
pub struct Browser {
    pub client: Client,
    driver: Child,
}

impl Browser {
    pub async fn start() -> Browser {
        let port = free_port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver runs (apt-get install chromium chromium-driver)");
        let up = eventually(Duration::from_secs(20), || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
        })
        .await;
        assert!(up, "chromedriver listens on {port}");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".to_owned(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new",
                    // CI runs as root, where Chromium's sandbox cannot start.
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--disable-gpu",
                    "--window-size=1280,1600",
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a browser session starts");
        std::fs::create_dir_all(artifacts_dir()).unwrap();
        Browser { client, driver }
    }

    /// Saves a screenshot of the current page as `target/browser/<name>.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("a screenshot");
        let path = artifacts_dir().join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {}", path.display());
    }

    /// Waits (up to 10 s) for an element to appear: clicks and form submissions return
    /// before the next page has loaded.
    pub async fn wait_for(&self, css: &str) {
        if let Err(e) = self
            .client
            .wait()
            .at_most(Duration::from_secs(10))
            .for_element(Locator::Css(css))
            .await
        {
            self.screenshot("failed-wait").await;
            panic!("{css} did not appear: {e}");
        }
    }

    /// Waits (up to 10 s) until the current URL contains `part`.
    pub async fn wait_for_url(&self, part: &str) {
        let arrived = eventually(Duration::from_secs(10), || async {
            self.client
                .current_url()
                .await
                .is_ok_and(|u| u.as_str().contains(part))
        })
        .await;
        assert!(arrived, "the browser went to a URL with {part}");
    }

    pub async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css} on the page: {e}"))
            .text()
            .await
            .unwrap()
    }

    /// The element's text if it is on the page now (a page that reloads itself may be
    /// between two loads).
    pub async fn text_now(&self, css: &str) -> Option<String> {
        let element = self.client.find(Locator::Css(css)).await.ok()?;
        element.text().await.ok()
    }

    /// Chooses `path` in a file input.
    pub async fn choose_file(&self, css: &str, path: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css} on the page: {e}"))
            .send_keys(path)
            .await
            .unwrap();
    }

    pub async fn count(&self, css: &str) -> usize {
        self.client.find_all(Locator::Css(css)).await.unwrap().len()
    }

    pub async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css} on the page: {e}"))
            .click()
            .await
            .unwrap();
    }

    pub async fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css} on the page: {e}"))
            .attr(name)
            .await
            .unwrap()
    }

    /// Fills a form's fields and submits it with its submit button.
    pub async fn submit(&self, form_css: &str, fields: &[(&str, &str)]) {
        let mut form = self.client.form(Locator::Css(form_css)).await.unwrap();
        for (name, value) in fields {
            form = form.set_by_name(name, value).await.unwrap();
        }
        form.submit().await.unwrap();
    }

    pub async fn close(mut self) {
        let _ = self.client.clone().close().await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}
