//! `[oidc]`: single sign-on to the admin console with an OpenID Connect provider (Keycloak,
//! Entra ID, Google, Okta, ...), and the roles its users' groups are given (`[oidc.roles]`).
//! What signs in is [`crate::sso`]'s; which roles a user holds is [`OidcConfig::grants`] plus
//! those an owner gave them (`gateway users add`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::access::{Grant, Role};

/// The path of the console the provider sends the browser back to: `redirect_url` must end
/// with it.
pub const CALLBACK_PATH: &str = "/ui/oidc/callback";

/// `[oidc]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcConfig {
    /// The provider's issuer URL; its discovery document is at
    /// `ISSUER/.well-known/openid-configuration`.
    pub issuer: String,
    pub client_id: String,
    /// The environment variable holding the client's secret; absent for a public client
    /// (PKCE alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret_env: Option<String>,
    /// The scopes asked for besides `openid`.
    #[serde(default = "default_scopes")]
    pub scopes: Vec<String>,
    /// Where the provider sends the browser back: the console's address with
    /// [`CALLBACK_PATH`], as registered with the provider.
    pub redirect_url: String,
    /// The ID token's claim listing the user's groups.
    #[serde(default = "default_groups_claim")]
    pub groups_claim: String,
    /// Which groups hold which role.
    #[serde(default)]
    pub roles: OidcRoles,
}

fn default_scopes() -> Vec<String> {
    vec!["email".into(), "profile".into()]
}

fn default_groups_claim() -> String {
    "groups".into()
}

/// `[oidc.roles]`: `owner`, `admin` and `viewer` each a list of groups, and per project
/// (`[oidc.roles.projects.ID]`) `project_admin` and `project_viewer`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OidcRoles {
    pub owner: Vec<String>,
    pub admin: Vec<String>,
    pub viewer: Vec<String>,
    pub projects: BTreeMap<String, ProjectRoles>,
}

/// `[oidc.roles.projects.ID]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProjectRoles {
    pub project_admin: Vec<String>,
    pub project_viewer: Vec<String>,
}

impl OidcConfig {
    /// The roles `groups` hold by `[oidc.roles]`.
    pub fn grants(&self, groups: &[String]) -> Vec<Grant> {
        let member = |of: &[String]| of.iter().any(|group| groups.contains(group));
        let mut grants = Vec::new();
        for (grant, of) in [
            (Grant::Owner, &self.roles.owner),
            (Grant::Admin, &self.roles.admin),
            (Grant::Viewer, &self.roles.viewer),
        ] {
            if member(of) {
                grants.push(grant);
            }
        }
        for (project, roles) in &self.roles.projects {
            for (role, of) in [
                (Role::ProjectAdmin, &roles.project_admin),
                (Role::ProjectViewer, &roles.project_viewer),
            ] {
                if member(of)
                    && let Ok(grant) = Grant::new(role, Some(project))
                {
                    grants.push(grant);
                }
            }
        }
        grants
    }

    /// Why the table cannot be used, if it cannot; `admin_token` is whether the config sets one
    /// (without it the console's sessions are signed with the client's secret).
    pub(super) fn problem(&self, admin_token: bool) -> Option<String> {
        if !admin_token && self.client_secret_env.is_none() {
            return Some(
                "oidc.client_secret_env: without an admin_token the console's sessions are \
                 signed with the client's secret: register a confidential client and name the \
                 variable holding its secret"
                    .into(),
            );
        }
        let url = |field: &str, text: &str| match url::Url::parse(text) {
            Err(e) => Some(format!("oidc.{field}: {text:?} is not a URL: {e}")),
            Ok(url) if url.scheme() == "https" => None,
            // Plain HTTP only to this machine (a provider in a test, a tunnel).
            Ok(url) if url.scheme() == "http" && is_loopback(&url) => None,
            Ok(_) => Some(format!(
                "oidc.{field}: {text:?} must be https (http only on localhost)"
            )),
        };
        if let Some(problem) = url("issuer", &self.issuer) {
            return Some(problem);
        }
        if let Some(problem) = url("redirect_url", &self.redirect_url) {
            return Some(problem);
        }
        if !self.redirect_url.ends_with(CALLBACK_PATH) {
            return Some(format!(
                "oidc.redirect_url: {:?} must be the console's address ending with {CALLBACK_PATH}",
                self.redirect_url
            ));
        }
        if self.client_id.trim().is_empty() {
            return Some("oidc.client_id: give the client id registered with the provider".into());
        }
        if self.groups_claim.trim().is_empty() {
            return Some("oidc.groups_claim: name the ID token's claim of groups".into());
        }
        if let Some(id) = self.roles.projects.keys().find(|id| id.trim().is_empty()) {
            return Some(format!("oidc.roles.projects: {id:?} is not a project id"));
        }
        None
    }
}

fn is_loopback(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(host)) => host == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> OidcConfig {
        toml::from_str(text).unwrap()
    }

    const BASE: &str = r#"
        issuer = "https://idp.example.com/realms/main"
        client_id = "gateway"
        redirect_url = "https://gateway.example.com/ui/oidc/callback"
    "#;

    #[test]
    fn groups_map_to_roles_and_projects() {
        let oidc = config(&format!(
            r#"{BASE}
            [roles]
            owner = ["platform"]
            viewer = ["sre", "platform"]
            [roles.projects.p1]
            project_admin = ["team-a-leads"]
            project_viewer = ["team-a"]
            "#
        ));
        assert_eq!(oidc.scopes, ["email", "profile"]);
        assert_eq!(oidc.groups_claim, "groups");
        let groups = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(
            oidc.grants(&groups(&["platform"])),
            [Grant::Owner, Grant::Viewer]
        );
        assert_eq!(
            oidc.grants(&groups(&["team-a", "other"])),
            [Grant::ProjectViewer("p1".into())]
        );
        assert!(oidc.grants(&groups(&["nobody"])).is_empty());
        assert_eq!(oidc.problem(true), None);
    }

    #[test]
    fn urls_must_be_https_but_on_this_machine() {
        let mut oidc = config(BASE);
        oidc.issuer = "http://idp.example.com".into();
        assert!(oidc.problem(true).unwrap().contains("must be https"));
        oidc.issuer = "http://127.0.0.1:4000".into();
        assert_eq!(oidc.problem(true), None);
        assert!(oidc.problem(false).unwrap().contains("client_secret_env"));
        oidc.redirect_url = "https://gateway.example.com/callback".into();
        assert!(oidc.problem(true).unwrap().contains(CALLBACK_PATH));
    }
}
