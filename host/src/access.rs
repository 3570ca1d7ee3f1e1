//! Who may do what on the admin API, the console and the CLI: the roles ([`Role`]), a grant
//! of one (a project role names its project: [`Grant`]), what an endpoint needs ([`Need`]),
//! and whether a set of grants meets it. The store keeps roles as [`Role::as_str`] writes
//! them, the server decides with [`Grants::allows`] and shows a project role only its
//! projects ([`Grants::visible`]). Below the store and the server, using only the clock
//! (a personal token's expiry, [`token_expiry`]).

use std::fmt;

/// A role, as the config, the CLI, the store and the API name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Everything, including the config, the plugins, users and everyone's tokens.
    Owner,
    /// Projects, keys, limits, budgets, guards and tools; reads everything.
    Admin,
    /// Reads everything, changes nothing.
    Viewer,
    /// One project's keys, limits, budgets, usage and records; sees no other project.
    ProjectAdmin,
    /// One project's keys, usage and records, read only; sees no other project.
    ProjectViewer,
}

/// Every role, in the order tables list them.
pub const ROLES: [Role; 5] = [
    Role::Owner,
    Role::Admin,
    Role::Viewer,
    Role::ProjectAdmin,
    Role::ProjectViewer,
];

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Viewer => "viewer",
            Role::ProjectAdmin => "project_admin",
            Role::ProjectViewer => "project_viewer",
        }
    }

    /// The role `text` names, or why not (naming those there are).
    pub fn parse(text: &str) -> Result<Role, String> {
        ROLES
            .into_iter()
            .find(|role| role.as_str() == text)
            .ok_or_else(|| {
                let names: Vec<&str> = ROLES.iter().map(|role| role.as_str()).collect();
                format!("no role {text:?}: use {}", names.join(", "))
            })
    }

    /// Whether the role is held on one project (and a grant of it names the project).
    pub fn is_project_role(self) -> bool {
        matches!(self, Role::ProjectAdmin | Role::ProjectViewer)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role held: a project role on its project, the others everywhere. Made only by
/// [`Grant::new`], so that a project role always has its project and no other role one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grant {
    Owner,
    Admin,
    Viewer,
    ProjectAdmin(String),
    ProjectViewer(String),
}

impl Grant {
    /// `role`, on `project` for a project role (which needs one; the others take none).
    pub fn new(role: Role, project: Option<&str>) -> Result<Grant, String> {
        let project = project.map(str::trim).filter(|p| !p.is_empty());
        match (role, project) {
            (Role::Owner, None) => Ok(Grant::Owner),
            (Role::Admin, None) => Ok(Grant::Admin),
            (Role::Viewer, None) => Ok(Grant::Viewer),
            (Role::ProjectAdmin, Some(p)) => Ok(Grant::ProjectAdmin(p.to_owned())),
            (Role::ProjectViewer, Some(p)) => Ok(Grant::ProjectViewer(p.to_owned())),
            (role, Some(_)) => Err(format!(
                "the role {role} holds everywhere: give a project only with project_admin or \
                 project_viewer"
            )),
            (role, None) => Err(format!("the role {role} needs the project it holds on")),
        }
    }

    /// A grant as [`Grant`]'s `Display` writes it: `viewer`, `project_admin:ID`.
    pub fn parse(text: &str) -> Result<Grant, String> {
        match text.split_once(':') {
            Some((role, project)) => Grant::new(Role::parse(role)?, Some(project)),
            None => Grant::new(Role::parse(text)?, None),
        }
    }

    pub fn role(&self) -> Role {
        match self {
            Grant::Owner => Role::Owner,
            Grant::Admin => Role::Admin,
            Grant::Viewer => Role::Viewer,
            Grant::ProjectAdmin(_) => Role::ProjectAdmin,
            Grant::ProjectViewer(_) => Role::ProjectViewer,
        }
    }

    /// The project a project role holds on.
    pub fn project(&self) -> Option<&str> {
        match self {
            Grant::ProjectAdmin(p) | Grant::ProjectViewer(p) => Some(p),
            _ => None,
        }
    }

    /// Whether this grant alone meets `need` on `project` (the project an endpoint names;
    /// None for one that names none).
    fn meets(&self, need: Need, project: Option<&str>) -> bool {
        let on = |p: &String| project == Some(p.as_str());
        match (self, need) {
            (_, Need::Any) | (Grant::Owner, _) => true,
            (Grant::Admin, Need::Owner) => false,
            (Grant::Admin, _) => true,
            (Grant::Viewer, need) => need.reads(),
            // A list of projects or records: shown filtered to the grant's projects.
            (Grant::ProjectAdmin(_) | Grant::ProjectViewer(_), Need::ReadProjects) => true,
            (Grant::ProjectAdmin(p), Need::ReadProject | Need::ChangeProject) => on(p),
            (Grant::ProjectViewer(p), Need::ReadProject) => on(p),
            (Grant::ProjectAdmin(_) | Grant::ProjectViewer(_), _) => false,
        }
    }

    /// Whether this grant is at most `other`: what `other` may do includes all this may.
    /// A token is made only with grants its maker holds at least.
    pub fn within(&self, other: &Grant) -> bool {
        match (other, self) {
            (Grant::Owner, _) => true,
            (Grant::Admin, grant) => *grant != Grant::Owner,
            (Grant::Viewer, grant) => matches!(grant, Grant::Viewer | Grant::ProjectViewer(_)),
            (Grant::ProjectAdmin(p), Grant::ProjectAdmin(q) | Grant::ProjectViewer(q)) => p == q,
            (Grant::ProjectViewer(p), Grant::ProjectViewer(q)) => p == q,
            _ => false,
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.project() {
            Some(project) => write!(f, "{}:{project}", self.role()),
            None => f.write_str(self.role().as_str()),
        }
    }
}

/// What an endpoint or a verb needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Need {
    /// Reads what is no project's (plugins, routes, config, the audit log): viewer and up.
    Read,
    /// Reads a list of projects or of their records: every role, a project role seeing only
    /// its projects' ([`Grants::visible`]).
    ReadProjects,
    /// Reads one project's: viewer and up, or a project role on it.
    ReadProject,
    /// Changes one project's (its keys, limits): admin and up, or its project admin.
    ChangeProject,
    /// Changes what is no one project's (a new project, guards, tools): admin and up.
    Change,
    /// Users, everyone's tokens, the config: the owner only.
    Owner,
    /// Any role: what is the caller's own (their personal tokens).
    Any,
}

impl Need {
    fn reads(self) -> bool {
        matches!(self, Need::Read | Need::ReadProjects | Need::ReadProject)
    }
}

/// The projects a set of grants sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Visible {
    All,
    /// Only these (sorted, none twice): the others do not exist as far as it is shown.
    Only(Vec<String>),
}

impl Visible {
    pub fn contains(&self, project: &str) -> bool {
        match self {
            Visible::All => true,
            Visible::Only(projects) => projects.iter().any(|p| p == project),
        }
    }
}

/// Every role someone holds (a user's groups may map to several).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants(Vec<Grant>);

impl Grants {
    pub fn new(mut grants: Vec<Grant>) -> Grants {
        grants.sort();
        grants.dedup();
        Grants(grants)
    }

    pub fn one(grant: Grant) -> Grants {
        Grants(vec![grant])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Grant> {
        self.0.iter()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether any grant meets `need` on `project`.
    pub fn allows(&self, need: Need, project: Option<&str>) -> bool {
        self.0.iter().any(|grant| grant.meets(need, project))
    }

    /// The projects these grants see: all with any role held everywhere, else those of their
    /// project roles.
    pub fn visible(&self) -> Visible {
        if self.0.iter().any(|grant| grant.project().is_none()) {
            return Visible::All;
        }
        let mut projects: Vec<String> = self
            .0
            .iter()
            .filter_map(|grant| grant.project().map(str::to_owned))
            .collect();
        projects.sort();
        projects.dedup();
        Visible::Only(projects)
    }

    /// The role audit events name: the highest held (a project role with its project).
    pub fn summary(&self) -> String {
        let names: Vec<String> = self.0.iter().map(Grant::to_string).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(" ")
        }
    }

    /// Whether `grant` is within one of these.
    pub fn covers(&self, grant: &Grant) -> bool {
        self.0.iter().any(|held| grant.within(held))
    }
}

/// How long a personal admin token lasts when its maker does not say.
pub const DEFAULT_TOKEN_DAYS: i64 = 90;

/// When a personal admin token made at `now_ms` expires: `text` as a key's expiry is read
/// ([`crate::clock::parse_expiry`]: `30d`, a date, a time), [`DEFAULT_TOKEN_DAYS`] when not
/// given, or never for `never` (for automation that rotates its own).
pub fn token_expiry(text: Option<&str>, now_ms: i64) -> Result<Option<i64>, String> {
    match text.map(str::trim) {
        None | Some("") => Ok(Some(
            now_ms.saturating_add(DEFAULT_TOKEN_DAYS * 24 * 3600 * 1000),
        )),
        Some("never") => Ok(None),
        Some(text) => crate::clock::parse_expiry(text, now_ms).map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(role: Role, project: Option<&str>) -> Grants {
        Grants::one(Grant::new(role, project).unwrap())
    }

    #[test]
    fn a_token_expires_in_90_days_unless_told() {
        let day = 24 * 3600 * 1000;
        assert_eq!(token_expiry(None, 0), Ok(Some(90 * day)));
        assert_eq!(token_expiry(Some("7d"), 0), Ok(Some(7 * day)));
        assert_eq!(token_expiry(Some("never"), 0), Ok(None));
        assert!(token_expiry(Some("soon"), 0).is_err());
    }

    #[test]
    fn roles_read_back_and_unknown_ones_are_named() {
        for role in ROLES {
            assert_eq!(Role::parse(role.as_str()), Ok(role));
        }
        let error = Role::parse("root").unwrap_err();
        assert!(
            error.contains("owner, admin, viewer, project_admin"),
            "{error}"
        );
    }

    #[test]
    fn a_project_role_needs_its_project_and_no_other_role_takes_one() {
        assert!(Grant::new(Role::ProjectAdmin, None).is_err());
        assert!(Grant::new(Role::ProjectViewer, Some("  ")).is_err());
        assert!(Grant::new(Role::Admin, Some("p")).is_err());
        let grant = Grant::new(Role::ProjectViewer, Some("p")).unwrap();
        assert_eq!(grant.to_string(), "project_viewer:p");
        assert_eq!(Grant::parse("project_viewer:p"), Ok(grant));
        assert_eq!(Grant::parse("owner"), Ok(Grant::Owner));
        assert!(Grant::parse("owner:p").is_err() && Grant::parse("project_admin").is_err());
    }

    #[test]
    fn each_role_meets_what_it_should() {
        use Need::*;
        let needs = [
            Read,
            ReadProjects,
            ReadProject,
            ChangeProject,
            Change,
            Owner,
            Any,
        ];
        let expected: [(Grants, [bool; 7]); 5] = [
            (grant(Role::Owner, None), [true; 7]),
            (
                grant(Role::Admin, None),
                [true, true, true, true, true, false, true],
            ),
            (
                grant(Role::Viewer, None),
                [true, true, true, false, false, false, true],
            ),
            (
                grant(Role::ProjectAdmin, Some("a")),
                [false, true, true, true, false, false, true],
            ),
            (
                grant(Role::ProjectViewer, Some("a")),
                [false, true, true, false, false, false, true],
            ),
        ];
        for (grants, allowed) in expected {
            for (need, allowed) in needs.into_iter().zip(allowed) {
                assert_eq!(
                    grants.allows(need, Some("a")),
                    allowed,
                    "{grants:?} {need:?}"
                );
            }
            // Another project's: a project role neither reads nor changes it.
            if grants.visible() != Visible::All {
                assert!(!grants.allows(ReadProject, Some("b")));
                assert!(!grants.allows(ChangeProject, Some("b")));
                assert!(!grants.allows(ReadProject, None));
            }
        }
    }

    #[test]
    fn a_project_role_sees_only_its_projects() {
        let grants = Grants::new(vec![
            Grant::new(Role::ProjectViewer, Some("b")).unwrap(),
            Grant::new(Role::ProjectAdmin, Some("a")).unwrap(),
            Grant::new(Role::ProjectViewer, Some("a")).unwrap(),
        ]);
        assert_eq!(
            grants.visible(),
            Visible::Only(vec!["a".into(), "b".into()])
        );
        assert!(grants.allows(Need::ChangeProject, Some("a")));
        assert!(!grants.allows(Need::ChangeProject, Some("b")));
        assert_eq!(grant(Role::Viewer, None).visible(), Visible::All);
        assert_eq!(Grants::default().visible(), Visible::Only(vec![]));
        assert!(!Grants::default().allows(Need::ReadProjects, None));
    }

    #[test]
    fn a_grant_is_within_those_that_may_do_all_it_may() {
        let g = |role, project| Grant::new(role, project).unwrap();
        let owner = g(Role::Owner, None);
        let admin = g(Role::Admin, None);
        let viewer = g(Role::Viewer, None);
        let pa = g(Role::ProjectAdmin, Some("a"));
        let pv = g(Role::ProjectViewer, Some("a"));
        let pb = g(Role::ProjectViewer, Some("b"));
        for held in [&owner, &admin, &viewer, &pa, &pv] {
            assert!(held.within(held), "{held}");
            assert!(held.within(&owner), "{held}");
        }
        assert!(!owner.within(&admin));
        assert!(pa.within(&admin) && !pa.within(&viewer));
        assert!(pv.within(&viewer) && pv.within(&pa) && !pb.within(&pa));
        assert!(!admin.within(&viewer) && !viewer.within(&pa));
    }
}
