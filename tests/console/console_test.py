#!/usr/bin/env python3
"""The admin console in a real browser: sign in, a project and its key, traffic through the
OpenAI SDK, invocations, overview, plugins, limits, revocation, sign out.

Run by the Rust e2e test as `python tests/console/console_test.py` with the environment variable
GATEWAY_CONSOLE_SCENARIO = {"url", "adminToken", "model", "chromium", "screenshots"} (see README.md).
Prints one line per step; exits 1 with a message on the first failure (after a failure.png).
"""
import json
import os
import re
import sys
import time
import traceback
import urllib.error
import urllib.request
import uuid

import openai
from playwright.sync_api import expect, sync_playwright

TIMEOUT_MS = 5000
expect.set_options(timeout=TIMEOUT_MS)


class Failure(Exception):
    pass


CURRENT = ["start"]


def begin(name):
    """Names the step under way, for the failure message."""
    CURRENT[0] = name


def step(msg):
    print("console: " + msg, flush=True)


def check(cond, msg):
    if not cond:
        raise Failure(msg)


# Chromium logs a console error for every 4xx/5xx response the page gets ("Failed to load
# resource: the server responded with a status of 401"). These are the ones this test causes on
# purpose: the session check before sign-in and after sign-out, and the wrong token.
EXPECTED_HTTP_ERRORS = [
    (r"/ui/session$", 401),
    (r"/ui/login$", 401),
]


def expected_network_error(msg):
    text = msg.text
    m = re.search(r"Failed to load resource: the server responded with a status of (\d+)", text)
    if not m:
        return False
    status = int(m.group(1))
    url = (msg.location or {}).get("url", "")
    return any(re.search(pat, url) and status == st for pat, st in EXPECTED_HTTP_ERRORS)


def admin_get(base, token, path):
    req = urllib.request.Request(base + path, headers={"Authorization": "Bearer " + token, "Accept": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.loads(res.read())


def admin_put(base, token, path, body):
    req = urllib.request.Request(base + path, method="PUT", data=json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Accept": "application/json",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as res:
        return json.loads(res.read())


def main():
    raw = os.environ.get("GATEWAY_CONSOLE_SCENARIO")
    if not raw:
        print("console: GATEWAY_CONSOLE_SCENARIO is not set", file=sys.stderr)
        return 1
    sc = json.loads(raw)
    base = sc["url"].rstrip("/")
    admin_token = sc["adminToken"]
    model = sc["model"]
    route_id = model.split("/", 1)[0]
    shots = sc["screenshots"]
    os.makedirs(shots, exist_ok=True)

    errors = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=sc.get("chromium") or "/usr/bin/chromium",
                                     headless=True, args=["--no-sandbox"])
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)

        def on_console(msg):
            if msg.type == "error" and not expected_network_error(msg):
                errors.append("console error: %s (at %s)" % (msg.text, (msg.location or {}).get("url", "")))

        page.on("console", on_console)
        page.on("pageerror", lambda exc: errors.append("page error: %s" % exc))

        def shot(name):
            page.screenshot(path=os.path.join(shots, name), full_page=True)

        tid = page.get_by_test_id
        try:
            run(page, tid, shot, base, admin_token, model, route_id)
            begin("console errors")
            check(not errors, "the page logged errors:\n  " + "\n  ".join(errors))
        except Exception as e:  # noqa: BLE001 - report any failure the same way
            try:
                shot("failure.png")
            except Exception as se:  # noqa: BLE001
                print("console: could not take failure.png: %s" % se, file=sys.stderr)
            if not isinstance(e, Failure):
                traceback.print_exc()
            print("console: FAILED in step '%s': %s" % (CURRENT[0], e), file=sys.stderr)
            if errors:
                print("console: the page also logged:\n  " + "\n  ".join(errors), file=sys.stderr)
            browser.close()
            return 1
        browser.close()
    step("all steps passed")
    return 0


def run(page, tid, shot, base, admin_token, model, route_id):
    # 2. Sign in: a wrong token first.
    begin("2 sign-in")
    page.goto(base + "/ui/")
    expect(tid("login-form")).to_be_visible()
    tid("login-token").fill("wrong-" + uuid.uuid4().hex)
    tid("login-submit").click()
    expect(tid("login-error")).to_be_visible()
    expect(tid("login-error")).not_to_be_empty()
    expect(tid("login-form")).to_be_visible()
    expect(tid("app")).to_be_hidden()
    shot("login.png")
    step("a wrong admin token is refused with an alert")
    tid("login-token").fill(admin_token)
    tid("login-submit").click()
    expect(tid("app")).to_be_visible()
    expect(tid("page-title")).to_have_text("Overview")
    check(page.url.endswith("#/overview"), "after sign-in the page is %s, not #/overview" % page.url)
    step("signed in; the overview is shown")

    # 3. A project and a key.
    begin("3 project and key")
    name = "console-" + uuid.uuid4().hex[:8]
    tid("nav-projects").click()
    expect(tid("page-title")).to_have_text("Projects")
    tid("new-project-name").fill(name)
    tid("new-project-submit").click()
    expect(tid("page-title")).to_have_text("Project: " + name)
    project_id = tid("project-id").inner_text().strip()
    check(project_id, "the project page shows no id")
    # It is listed too.
    tid("nav-projects").click()
    expect(tid("projects-table").get_by_role("link", name=name, exact=True)).to_be_visible()
    tid("projects-table").get_by_role("link", name=name, exact=True).click()
    expect(tid("page-title")).to_have_text("Project: " + name)
    # A new project may use every tool; its tools set through the admin API are shown.
    expect(tid("project-tools")).to_have_text("all")
    project_tools = ["calc__*", "github__*"]
    admin_put(base, admin_token, "/admin/projects/%s/tools" % project_id, {"tools": project_tools})
    page.reload()
    expect(tid("page-title")).to_have_text("Project: " + name)
    expect(tid("project-tools")).to_have_text(", ".join(project_tools))
    # A key limited to some tools (which do not limit its routes and models: step 4 uses it).
    key_tools = ["calc__add", "github__search"]
    tid("key-tools").fill(" calc__add, github__search ,")
    tid("new-key-submit").click()
    expect(tid("new-key-value")).to_be_visible()
    key = tid("new-key-value").input_value()
    check(len(key) >= 16, "the once-shown key looks wrong: %r" % key)
    expect(tid("new-key-panel")).to_contain_text("tools: " + ", ".join(key_tools))
    expect(tid("key-tools")).to_have_value("")
    expect(tid("key-row")).to_have_count(1)
    expect(tid("key-tools-cell")).to_have_text(", ".join(key_tools))
    prefix = tid("key-prefix").inner_text().strip()
    listed = admin_get(base, admin_token, "/admin/projects/%s/keys" % project_id).get("keys") or []
    check(len(listed) == 1 and listed[0].get("tools") == key_tools,
          "the API lists the key's tools as %r, not %r" % ([k.get("tools") for k in listed], key_tools))
    shot("project.png")
    step("project %s (%s) created, with tools %s and key %s… of tools %s"
         % (name, project_id, ", ".join(project_tools), prefix, ", ".join(key_tools)))

    # 4. Traffic through the OpenAI SDK.
    begin("4 SDK traffic")
    client = openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=30)
    for i in range(3):
        res = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello (%d)" % i}])
        check(res.choices and res.choices[0].message is not None, "completion %d has no message" % i)
    step("3 chat completions succeeded")

    # 5. Invocations of the project (written in batches: reapply the filter until they appear).
    begin("5 invocations")
    tid("nav-invocations").click()
    expect(tid("page-title")).to_have_text("Invocations")
    expect(tid("filter-project").locator("option", has_text=name)).to_have_count(1)
    tid("filter-project").select_option(value=project_id)
    rows = tid("invocation-row")
    deadline = time.monotonic() + 10
    count = -1
    while True:
        tid("filter-apply").click()
        expect(page.locator('[data-testid="invocations-results"][data-state="done"]')).to_have_count(1)
        expect(tid("filter-project")).to_have_value(project_id)
        count = rows.count()
        if count >= 3 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    check(count == 3, "the invocations of the project: %d rows, not 3" % count)
    for i in range(3):
        expect(rows.nth(i)).to_contain_text("success")
    shot("invocations.png")
    tid("invocation-link").first.click()
    expect(tid("page-title")).to_have_text("Invocation")
    expect(tid("invocation-status")).to_have_text("success")
    # The record may name the model as ROUTE/MODEL or as MODEL alone.
    expect(tid("invocation-model")).to_contain_text(model.split("/", 1)[-1])
    expect(tid("invocation-project")).to_have_text(name)
    expect(tid("invocation-request")).to_be_visible()
    shot("invocation.png")
    step("3 invocations listed; one shows success and %s" % model)

    # 5b. A batch of the key's, shown on its project's page with its progress.
    begin("5b batches")
    lines = "".join(json.dumps({"custom_id": "b-%d" % i, "method": "POST", "url": "/v1/chat/completions",
                                "body": {"model": model, "messages": [{"role": "user", "content": "Batch %d" % i}]}}) + "\n"
                    for i in range(4))
    batch_file = client.files.create(file=("batch.jsonl", lines.encode()), purpose="batch")
    batch = client.batches.create(input_file_id=batch_file.id, endpoint="/v1/chat/completions", completion_window="24h")
    deadline = time.monotonic() + 30
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        check(time.monotonic() < deadline, "the batch never ended: %s" % batch.status)
        time.sleep(0.2)
        batch = client.batches.retrieve(batch.id)
    check(batch.status == "completed", "the batch ended %s" % batch.status)
    page.goto(base + "/ui/#/projects/" + project_id)
    expect(tid("page-title")).to_have_text("Project: " + name)
    row = page.locator('[data-testid="batch-row"][data-id="%s"]' % batch.id)
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("batch-status")).to_have_text("completed")
    expect(row.get_by_test_id("batch-progress")).to_contain_text("4 of 4")
    expect(row.locator("progress")).to_have_attribute("value", "4")
    shot("batches.png")
    step("a batch of 4 lines completed; the project page shows it, 4 of 4")

    # 6. Overview.
    begin("6 overview")
    tid("nav-overview").click()
    expect(tid("page-title")).to_have_text("Overview")
    tid("period-24h").click()
    expect(tid("total-requests")).to_have_text(re.compile(r"^\d+$"))
    total = int(tid("total-requests").inner_text())
    check(total >= 3, "total requests over 24 h: %d, fewer than 3" % total)
    expect(tid("top-projects")).to_contain_text(name)
    expect(tid("total-cost")).to_have_text(re.compile(r"^\$\d"))
    expect(page.locator(".chart .uplot")).to_have_count(4)
    shot("overview.png")
    step("overview: %d requests in 24 h; the project is among the top projects" % total)

    # 7. Plugins and routes.
    begin("7 plugins and routes")
    tid("nav-plugins").click()
    expect(tid("page-title")).to_have_text("Plugins and routes")
    openai_row = page.locator('[data-testid="plugin-row"][data-plugin="openai"]')
    expect(openai_row).to_have_count(1)
    expect(openai_row.get_by_test_id("plugin-status")).to_have_text("serving")
    expect(page.locator('[data-testid="route-row"][data-route="%s"]' % route_id)).to_have_count(1)
    shot("plugins.png")
    step("plugins: openai is serving; route %s is listed" % route_id)

    # 8. A daily budget, persisted.
    begin("8 daily budget")
    page.goto(base + "/ui/#/projects/" + project_id)
    expect(tid("page-title")).to_have_text("Project: " + name)
    tid("limit-daily").fill("5")
    tid("limits-save").click()
    expect(tid("limits-status")).to_have_text("Saved.")
    page.reload()
    expect(tid("page-title")).to_have_text("Project: " + name)
    expect(tid("limit-daily")).to_have_value(re.compile(r"^5(\.0+)?$"))
    api_limits = admin_get(base, admin_token, "/admin/projects/" + project_id).get("limits") or {}
    check(api_limits.get("dailyBudgetUsd") == 5, "the API says the daily budget is %r, not 5" % api_limits.get("dailyBudgetUsd"))
    expect(tid("spend-day")).to_contain_text("budget")
    step("daily budget 5 saved and persisted")

    # 9. Revoke the key through the confirmation dialog; the SDK is then refused.
    begin("9 revocation")
    expect(tid("key-revoke")).to_have_count(1)
    tid("key-revoke").click()
    expect(tid("confirm-dialog")).to_be_visible()
    tid("confirm-ok").click()
    expect(tid("confirm-dialog")).to_be_hidden()
    expect(tid("key-revoked")).to_contain_text("revoked")
    expect(tid("key-revoke")).to_have_count(0)
    try:
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Still there?"}])
    except openai.AuthenticationError:
        pass
    else:
        raise Failure("a request with the revoked key succeeded")
    step("key revoked; the SDK gets 401")

    # 10. A personal admin token, made in the console (shown once), works on the API with its
    # role only, and is revoked there; the audit log shows what was done, with before and after.
    begin("10 admin tokens and the audit log")
    tid("nav-tokens").click()
    expect(tid("page-title")).to_have_text("Admin tokens")
    tid("token-name").fill("dashboards")
    page.locator("#token-role").select_option("viewer")
    tid("new-token-submit").click()
    expect(tid("new-token-panel")).to_be_visible()
    secret = tid("new-key-value").input_value()
    check(secret.startswith("gwa_"), "the token shown is %r" % secret[:8])
    row = page.locator('[data-testid="token-row"][data-prefix="%s"]' % secret[:16])
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("token-state")).to_contain_text("live")
    check(secret not in page.locator("#page").inner_text(), "the token is shown outside its one field")
    projects = admin_get(base, secret, "/admin/projects").get("projects") or []
    check(any(p.get("id") == project_id for p in projects), "the viewer token does not list the project")
    try:
        admin_put(base, secret, "/admin/projects/%s/limits" % project_id, {"rpm": 1})
    except urllib.error.HTTPError as e:
        check(e.code == 403, "a viewer's change: %s, not 403" % e.code)
    else:
        raise Failure("a viewer token changed a project's limits")
    shot("tokens.png")
    row.get_by_test_id("token-revoke").click()
    tid("confirm-ok").click()
    expect(row.get_by_test_id("token-state")).to_contain_text("revoked")
    try:
        admin_get(base, secret, "/admin/projects")
    except urllib.error.HTTPError as e:
        check(e.code == 401, "a revoked token: %s, not 401" % e.code)
    else:
        raise Failure("a revoked token still opens the admin API")
    # A role given to someone who signs in with single sign-on, and taken back.
    tid("nav-users").click()
    expect(tid("page-title")).to_have_text("Users")
    tid("user-email").fill("Dana@Example.com")
    page.locator("#user-role").select_option("project_viewer")
    page.locator("#user-project").select_option(project_id)
    tid("new-user-submit").click()
    user_row = page.locator('[data-testid="user-row"][data-email="dana@example.com"]')
    expect(user_row.get_by_test_id("user-role")).to_contain_text("project_viewer of " + project_id)
    given = admin_get(base, admin_token, "/admin/users").get("users") or []
    check([u.get("email") for u in given] == ["dana@example.com"], "the API lists %r" % given)
    user_row.get_by_test_id("user-remove").click()
    tid("confirm-ok").click()
    expect(user_row).to_have_count(0)
    tid("nav-audit").click()
    expect(tid("page-title")).to_have_text("Audit log")
    for action in ("sign_in", "key.create", "project.limits.set", "key.revoke", "token.create", "token.revoke",
                   "user.add", "user.remove"):
        expect(page.locator('[data-testid="audit-row"][data-action="%s"]' % action).first).to_be_visible()
    expect(page.locator('[data-testid="audit-row"][data-action="project.limits.set"][data-outcome="refused"]')).to_have_count(1)
    tid("audit-action").fill("project.limits.set")
    tid("audit-apply").click()
    expect(page.locator('[data-testid="audit-row"]')).to_have_count(2)
    done = page.locator('[data-testid="audit-row"][data-outcome="ok"]')
    expect(done.get_by_test_id("audit-change")).to_contain_text("limits.dailyBudgetUsd: null → 5")
    done.locator("summary").click()
    expect(done.get_by_test_id("audit-after")).to_contain_text('"dailyBudgetUsd": 5')
    shot("audit.png")
    step("a viewer token made, refused a change, revoked; a user's role given and taken back; the audit log shows each change")

    # 11. Sign out.
    begin("11 sign-out")
    tid("signout").click()
    expect(tid("login-form")).to_be_visible()
    expect(tid("app")).to_be_hidden()
    status = page.evaluate("async () => (await fetch('/ui/session', {credentials: 'same-origin'})).status")
    check(status == 401, "GET /ui/session after sign-out: %s, not 401" % status)
    step("signed out; /ui/session is 401")


if __name__ == "__main__":
    sys.exit(main())
