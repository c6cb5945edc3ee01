//! How the load reaches the service as one of its tenants: the HTTP client, the API's
//! address, and each tenant's header and key. The load's requests and the checker's reads
//! after the run go through the same one.

use reqwest::header::HeaderValue;

use crate::config::Config;

pub struct Service {
    client: reqwest::Client,
    /// `{base}/api/bookmarks`
    api: String,
    /// Tenant names by index, as the population numbers them.
    names: Vec<String>,
    /// `{base}/api/collections`
    collections_api: String,
    batch_api: String,
    /// `Bearer <key>` per tenant (empty: requests carry no key).
    keys: Vec<HeaderValue>,
    /// `Bearer <key>` of a viewer member per tenant (empty: no viewers were made).
    viewer_keys: Vec<HeaderValue>,
}

impl Service {
    pub fn new(
        config: &Config,
        names: Vec<String>,
        keys: Vec<HeaderValue>,
        viewer_keys: Vec<HeaderValue>,
    ) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .user_agent("bookmarks-loadgen")
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Service {
            client,
            api: format!("{}/api/bookmarks", config.base()),
            collections_api: format!("{}/api/collections", config.base()),
            batch_api: format!("{}/api/bookmarks/batch", config.base()),
            names,
            keys,
            viewer_keys,
        })
    }

    /// `request` as `tenant` sends it: its header, and its key when it has one.
    pub fn as_tenant(
        &self,
        request: reqwest::RequestBuilder,
        tenant: usize,
    ) -> reqwest::RequestBuilder {
        let request = request.header("x-tenant-id", self.name(tenant));
        match self.keys.get(tenant) {
            Some(key) => request.header(reqwest::header::AUTHORIZATION, key.clone()),
            None => request,
        }
    }

    /// Whether `tenant` has a viewer key.
    pub fn has_viewer(&self, tenant: usize) -> bool {
        tenant < self.viewer_keys.len()
    }

    /// `request` as `tenant`'s viewer sends it; `None` when the tenant has no viewer key.
    pub fn as_viewer(
        &self,
        request: reqwest::RequestBuilder,
        tenant: usize,
    ) -> Option<reqwest::RequestBuilder> {
        let key = self.viewer_keys.get(tenant)?;
        Some(
            request
                .header("x-tenant-id", self.name(tenant))
                .header(reqwest::header::AUTHORIZATION, key.clone()),
        )
    }

    pub fn name(&self, tenant: usize) -> &str {
        &self.names[tenant]
    }

    /// Every tenant's name, by index.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }

    /// `{base}/api/bookmarks`
    pub fn api(&self) -> &str {
        &self.api
    }

    /// `{base}/api/collections`
    pub fn collections_api(&self) -> &str {
        &self.collections_api
    }

    /// `{base}/api/bookmarks/batch`
    pub fn batch_api(&self) -> &str {
        &self.batch_api
    }
}
