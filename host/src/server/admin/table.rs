//! The one table of the admin API: every endpoint, what it needs of its caller's roles
//! ([`Need`]), and the audit action a change through it is recorded as. Dispatch finds a
//! request's row here (a method not in the table is a 405 listing those that are), access is
//! decided from the row alone, and the end-to-end test walks every row with every role.

use crate::access::Need;

/// One endpoint: a method on a path pattern (`{id}` a project id, `{prefix}` a key's or a
/// token's prefix, `{invocation}` a record's id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub method: &'static str,
    pub path: &'static str,
    pub need: Need,
    /// What a change through it is recorded as in the audit log; None for a read.
    pub action: Option<&'static str>,
}

const fn read(path: &'static str, need: Need) -> Rule {
    Rule {
        method: "GET",
        path,
        need,
        action: None,
    }
}

const fn change(
    method: &'static str,
    path: &'static str,
    need: Need,
    action: &'static str,
) -> Rule {
    Rule {
        method,
        path,
        need,
        action: Some(action),
    }
}

/// Every endpoint of the admin API.
pub const RULES: &[Rule] = &[
    read("/admin/plugins", Need::Read),
    read("/admin/config", Need::Read),
    read("/admin/routes", Need::Read),
    read("/admin/audit", Need::Read),
    read("/admin/projects", Need::ReadProjects),
    change("POST", "/admin/projects", Need::Change, "project.create"),
    read("/admin/projects/{id}", Need::ReadProject),
    read("/admin/projects/{id}/keys", Need::ReadProject),
    change(
        "POST",
        "/admin/projects/{id}/keys",
        Need::ChangeProject,
        "key.create",
    ),
    change(
        "PUT",
        "/admin/projects/{id}/limits",
        Need::ChangeProject,
        "project.limits.set",
    ),
    read("/admin/projects/{id}/guards", Need::ReadProject),
    change(
        "PUT",
        "/admin/projects/{id}/guards",
        Need::Change,
        "project.guards.set",
    ),
    read("/admin/projects/{id}/tools", Need::ReadProject),
    change(
        "PUT",
        "/admin/projects/{id}/tools",
        Need::Change,
        "project.tools.set",
    ),
    read("/admin/projects/{id}/usage", Need::ReadProject),
    read("/admin/projects/{id}/batches", Need::ReadProject),
    change(
        "DELETE",
        "/admin/keys/{prefix}",
        Need::ChangeProject,
        "key.revoke",
    ),
    change(
        "PUT",
        "/admin/keys/{prefix}/limits",
        Need::ChangeProject,
        "key.limits.set",
    ),
    read("/admin/invocations", Need::ReadProjects),
    read("/admin/invocations.csv", Need::ReadProjects),
    read("/admin/invocations/{invocation}", Need::ReadProjects),
    read("/admin/usage", Need::ReadProjects),
    read("/admin/tokens", Need::Any),
    change("POST", "/admin/tokens", Need::Any, "token.create"),
    change(
        "DELETE",
        "/admin/tokens/{prefix}",
        Need::Any,
        "token.revoke",
    ),
    read("/admin/users", Need::Owner),
    change("POST", "/admin/users", Need::Owner, "user.add"),
    change("DELETE", "/admin/users/{email}", Need::Owner, "user.remove"),
];

/// The rule of `method` on `pattern`.
pub fn rule(method: &str, pattern: &str) -> Option<&'static Rule> {
    RULES
        .iter()
        .find(|rule| rule.path == pattern && rule.method == method)
}

/// What `Allow` may list: the combinations of methods the table's patterns answer.
const ALLOWS: [&str; 6] = ["GET", "POST", "PUT", "DELETE", "GET, POST", "GET, PUT"];

/// The methods `pattern` answers, as `Allow` lists them.
pub fn allowed(pattern: &str) -> &'static str {
    let methods: Vec<&str> = RULES
        .iter()
        .filter(|rule| rule.path == pattern)
        .map(|rule| rule.method)
        .collect();
    let methods = methods.join(", ");
    // Every pattern's is one of them (a test checks); GET is what most answer.
    ALLOWS
        .into_iter()
        .find(|allows| *allows == methods)
        .unwrap_or("GET")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_endpoint_is_in_the_table_once_and_every_change_is_audited() {
        for (i, rule) in RULES.iter().enumerate() {
            assert!(
                !RULES[..i]
                    .iter()
                    .any(|other| other.path == rule.path && other.method == rule.method),
                "{} {} twice",
                rule.method,
                rule.path
            );
            assert_eq!(rule.action.is_some(), rule.method != "GET", "{rule:?}");
        }
        assert_eq!(allowed("/admin/projects/{id}/guards"), "GET, PUT");
        for rule in RULES {
            let methods: Vec<&str> = RULES
                .iter()
                .filter(|other| other.path == rule.path)
                .map(|other| other.method)
                .collect();
            assert_eq!(allowed(rule.path), methods.join(", "), "{}", rule.path);
        }
    }
}
