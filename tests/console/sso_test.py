"""Single sign-on to the console in Chromium, through a real OpenID provider.

Run by tests/e2e/operations/sso.rs, which starts the provider (oidc-provider, tests/oidc) and
the gateway and passes the scenario as JSON in GATEWAY_SSO_SCENARIO. Phase "roles": alice (her
group is the owner's) signs in, sees every project, signs out at the provider too; bob (a
project viewer an owner gave the role) sees his project and nothing else, and is refused a
change; carol (no role) is refused at sign-in. Phase "rotated": the provider signs with a new
key since; alice signs in all the same.
"""

import json
import os
import re
import sys
import traceback
import urllib.error
import urllib.request

from playwright.sync_api import expect, sync_playwright

TIMEOUT_MS = 8000
expect.set_options(timeout=TIMEOUT_MS)


class Failure(Exception):
    pass


def step(msg):
    print("sso: " + msg, flush=True)


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def sign_in(page, base, login):
    """Through the console's single sign-on button and the provider's own login and consent."""
    page.goto(base + "/ui/")
    page.get_by_test_id("login-sso").click()
    page.locator("input[name=login]").fill(login)
    page.locator("input[name=password]").fill("any password")
    page.locator("button[type=submit]").first.click()
    # The provider asks each new session for consent to the gateway, then sends the browser
    # back: either the console (signed in, or saying why not) or the consent form comes next.
    consent = page.locator("form:has(input[name=prompt][value=consent]) button[type=submit]")
    landed = page.locator("[data-testid=app]:visible, [data-testid=login-error]:visible")
    consent.or_(landed).first.wait_for()
    if consent.count() > 0:
        consent.first.click()


def sign_out(page, base):
    page.get_by_test_id("signout").click()
    # The provider's end-session page asks, then sends the browser back to the console.
    page.locator("button[name=logout][value=yes]").click()
    page.wait_for_url(re.compile(re.escape(base) + r"/ui/"))
    expect(page.get_by_test_id("login-form")).to_be_visible()
    status = page.evaluate("async () => (await fetch('/ui/session', {credentials: 'same-origin'})).status")
    check(status == 401, "GET /ui/session after sign-out: %s, not 401" % status)


def roles(page, sc):
    base = sc["url"]
    tid = page.get_by_test_id

    sign_in(page, base, "alice")
    expect(tid("app")).to_be_visible()
    expect(tid("whoami")).to_contain_text("alice@example.com")
    expect(tid("whoami")).to_contain_text("owner")
    tid("nav-projects").click()
    expect(tid("projects-table")).to_contain_text(sc["projectName"])
    expect(tid("projects-table")).to_contain_text(sc["otherName"])
    expect(tid("new-project-form")).to_be_visible()
    expect(tid("nav-audit")).to_be_visible()
    step("alice (platform-admins) is the owner and sees every project")
    sign_out(page, base)
    step("alice signed out, at the provider too")

    sign_in(page, base, "bob")
    expect(tid("app")).to_be_visible()
    expect(tid("whoami")).to_contain_text("project_viewer:" + sc["projectId"])
    tid("nav-projects").click()
    expect(tid("projects-table")).to_contain_text(sc["projectName"])
    check(sc["otherName"] not in page.locator("#page").inner_text(), "bob sees the other project")
    expect(tid("new-project-form")).to_have_count(0)
    expect(tid("nav-audit")).to_be_hidden()
    page.goto(base + "/ui/#/projects/" + sc["projectId"])
    expect(tid("project-id")).to_have_text(sc["projectId"])
    expect(tid("limits-form")).to_have_count(0)
    # What the page does not offer, the API refuses: a change, another project.
    csrf = page.evaluate("async () => (await (await fetch('/ui/session')).json()).csrf")
    status = page.evaluate(
        """async ([id, csrf]) => (await fetch('/admin/projects/' + id + '/limits', {method: 'PUT',
            headers: {'content-type': 'application/json', 'x-csrf-token': csrf},
            body: JSON.stringify({rpm: 1})})).status""",
        [sc["projectId"], csrf])
    check(status == 403, "bob's change of limits: %s, not 403" % status)
    status = page.evaluate("async (id) => (await fetch('/admin/projects/' + id)).status", sc["otherId"])
    check(status == 404, "bob reading the other project: %s, not 404" % status)
    page.screenshot(path=os.path.join(sc["screenshots"], "sso-project-viewer.png"), full_page=True)
    step("bob (a project viewer) sees his project alone and may not change it")
    sign_out(page, base)

    sign_in(page, base, "carol")
    expect(tid("login-error")).to_contain_text("holds no role")
    status = page.evaluate("async () => (await fetch('/ui/session', {credentials: 'same-origin'})).status")
    check(status == 401, "carol has a session: %s" % status)
    step("carol (no role) is refused at sign-in")


def rotated(page, sc):
    base = sc["url"]
    sign_in(page, base, "alice")
    expect(page.get_by_test_id("whoami")).to_contain_text("alice@example.com")
    step("alice signed in again after the provider rotated its keys")


def main():
    sc = json.loads(os.environ["GATEWAY_SSO_SCENARIO"])
    sc["url"] = sc["url"].rstrip("/")
    os.makedirs(sc["screenshots"], exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=sc.get("chromium") or "/usr/bin/chromium",
                                     headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        # The provider's pages ask for a stylesheet on the internet, which holds their first
        # paint (and so every click) until it fails: at once when DNS answers, after the
        # resolver's timeout when it does not (a CI failure: "waiting for element to be
        # visible", 8 s). Nothing here may leave 127.0.0.1, so it is refused at once.
        context.route(lambda url: not url.startswith("http://127.0.0.1:"), lambda route: route.abort())
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        errors = []
        page.on("pageerror", lambda exc: errors.append("page error: %s" % exc))
        # Where the browser went, for a failure's message.
        visited = []
        page.on("framenavigated", lambda frame: frame == page.main_frame and visited.append(frame.url))
        page.on("requestfailed", lambda req: visited.append("failed: %s %s" % (req.url, req.failure)))
        try:
            {"roles": roles, "rotated": rotated}[sc["phase"]](page, sc)
            check(not errors, "the page raised:\n  " + "\n  ".join(errors))
        except Exception as e:  # noqa: BLE001 - report any failure the same way
            try:
                page.screenshot(path=os.path.join(sc["screenshots"], "sso-failure.png"), full_page=True)
            except Exception:  # noqa: BLE001
                pass
            if not isinstance(e, Failure):
                traceback.print_exc()
            print("sso: FAILED at %s: %s" % (page.url, e), file=sys.stderr)
            print("sso: the browser went to:\n  " + "\n  ".join(visited), file=sys.stderr)
            browser.close()
            return 1
        browser.close()
    step("phase %s passed" % sc["phase"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
