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
    /// `Bearer <key>` per tenant (empty: requests carry no key).
    keys: Vec<HeaderValue>,
}

impl Service {
    pub fn new(
        config: &Config,
        names: Vec<String>,
        keys: Vec<HeaderValue>,
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
            names,
            keys,
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
}
