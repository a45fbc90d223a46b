"""Who may do what: the one permission table of every route × role (issue 50 item 1; DESIGN §13).

Each `Row` names a route as the URL configuration serves it (`/v1/agents/sessions/{id}/stop`), the
methods it covers and, for every `Role`, the `Access` it is given. The table is

- **enforced** at one boundary, `server.middleware.PermissionBoundary`, after the principal
  is resolved and before any view runs: a refusal the table states for the caller's role is
  answered there (403/404 in the error shape under `/v1/`, the sign-in redirect or the 403 page in
  the console), so no view, service or store is reached. What depends on the object — `own` (a
  member acts only on the runs they started, the machines they own) and `404` for another org's
  object — is decided by the service with the rule the row names (`Row.rule`), because only it
  reads the object; the table states it and the generated test holds it;
- **tested** by tests/agents_site/test_permission_table.py, generated from the URL configuration:
  every route (a new route without a row fails it) with every role of two orgs, status and body
  compared with the table, nothing stored on a refusal;
- **rendered** into docs/guides/permission-table.md (`scripts/docs/generate.py permissions`).

Roles the boundary tells apart: `anonymous` (no credential), `member`/`admin` (a principal of the
org), `scoped key` (a key limited to a path). An `agent token`, a `machine key` or a refused
credential is judged by the route's own check (identity's token authentication, the claim's
two proofs), which answers what the row says.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agents_site.vocabulary import Access, Role

ALLOW, OWN, FORBIDDEN, NOT_FOUND, LOGIN = Access.ALLOW, Access.OWN, Access.FORBIDDEN, Access.NOT_FOUND, Access.LOGIN
ROLES = tuple(Role)

#: Sentences of the boundary's refusals (the views' own checks say the same).
NO_PRINCIPAL = "a validated principal is required"
ADMINS_ONLY = "only an org admin may do this"


@dataclass(frozen=True)
class Row:
    """One route: `methods` × `path` (`{param}` for a path parameter) → an `Access` per `Role`.

    `why`, `code`: the sentence and error code of a 403 to a principal of the org; `rule`: the function deciding an `own` verdict on the
    object (`module.function`), "" when the row has none; `note`: one line for the docs page.
    """

    methods: tuple[str, ...]
    path: str
    access: dict[Role, Access]
    why: str = ADMINS_ONLY
    code: str = "forbidden"
    rule: str = ""
    note: str = ""
    surface: str = field(default="", compare=False)

    @property
    def has_object(self) -> bool:
        """True when the path names an object (a `{param}`): another org's answer is then 404."""
        return "{" in self.path


def _profile(base: dict[Role, Access], **changes: Access) -> dict[Role, Access]:
    table = dict(base)
    for name, access in changes.items():
        table[Role[name.upper()]] = access
    return table


#: Public: anyone, no credential (gallery, share links, the public A2A directory, docs).
PUBLIC = {role: ALLOW for role in ROLES}
#: Any principal of the org; another org's object is 404; a credential of another kind is 403.
MEMBER = {Role.ANONYMOUS: FORBIDDEN, Role.MEMBER: ALLOW, Role.ADMIN: ALLOW, Role.OTHER_ORG: NOT_FOUND,
          Role.SCOPED_KEY: FORBIDDEN, Role.AGENT_TOKEN: FORBIDDEN, Role.MACHINE_KEY: FORBIDDEN}
#: A member acts on their own (runs they started, machines they own); an admin on all of the org's.
MEMBER_OWN = _profile(MEMBER, member=OWN)
#: Org admins only; a member may know the route exists (403).
ADMIN = _profile(MEMBER, member=FORBIDDEN)
#: The OpenAI-compatible endpoint: also a key of scope `openai`; no usable key is OpenAI's 401.
OPENAI = _profile(MEMBER, scoped_key=ALLOW, anonymous=Access.UNAUTHENTICATED, agent_token=Access.UNAUTHENTICATED,
                  machine_key=Access.UNAUTHENTICATED)
#: The MCP server: also a key of scope `mcp` (limited to its agents' tools).
MCP = _profile(MEMBER, scoped_key=ALLOW)
#: The identity agent's own token, for its own agent only (another agent, unknown or another org's: one 403).
AGENT_TOKEN = {Role.ANONYMOUS: FORBIDDEN, Role.MEMBER: FORBIDDEN, Role.ADMIN: FORBIDDEN, Role.OTHER_ORG: FORBIDDEN,
               Role.SCOPED_KEY: FORBIDDEN, Role.AGENT_TOKEN: OWN, Role.MACHINE_KEY: FORBIDDEN}
#: A machine's claim and report: the machine's owner (or an admin) AND its current claim key; any
#: failing proof (another org's principal included) is the one 403 `claim_rejected`.
MACHINE = _profile(MEMBER, member=OWN, admin=OWN, other_org=FORBIDDEN, machine_key=FORBIDDEN)
#: Console pages: a login of the org; no login → the sign-in page.
PAGE = {Role.ANONYMOUS: LOGIN, Role.MEMBER: ALLOW, Role.ADMIN: ALLOW, Role.OTHER_ORG: NOT_FOUND,
        Role.SCOPED_KEY: LOGIN, Role.AGENT_TOKEN: LOGIN, Role.MACHINE_KEY: LOGIN}
PAGE_OWN = _profile(PAGE, member=OWN)
#: A page that is a shell: its script reads the object through the API (404 there for another org's).
PAGE_SHELL = _profile(PAGE, other_org=ALLOW)
#: An admin's form action: an id not of this org redirects back with "not found" (alike for unknown ids).
PAGE_ADMIN_ACTION = _profile(PAGE, member=FORBIDDEN, other_org=ALLOW)
PAGE_ADMIN = _profile(PAGE, member=FORBIDDEN)
#: The Django admin: org admins (it shows the org they act for).
DJANGO_ADMIN = _profile(PAGE, member=LOGIN, other_org=ALLOW)

GET, POST, PUT, PATCH, DELETE = ("GET",), ("POST",), ("PUT",), ("PATCH",), ("DELETE",)
READ_WRITE = ("GET", "POST")

_RUN_RULE = "runs.approvals.answer_allowed"



def _rows(surface: str, *rows: tuple) -> list[Row]:
    built = []
    for spec in rows:
        methods, path, access, *rest = spec
        options = rest[0] if rest else {}
        if "{" not in path and access[Role.OTHER_ORG] == NOT_FOUND:
            # No object in the path: another org's principal acts on its own org, as its admin would.
            access = _profile(access, other_org=access[Role.ADMIN])
        built.append(Row(methods=methods, path=path, access=access, surface=surface, **options))
    return built


API = "/v1/agents"
ID = "/v1/identity"

TABLE: list[Row] = [
    *_rows(
        "API /v1/agents",
        (GET, f"{API}", MEMBER),
        (POST, f"{API}", MEMBER),
        (GET, f"{API}/{{ref}}", MEMBER),
        (PATCH, f"{API}/{{ref}}", MEMBER),
        (DELETE, f"{API}/{{ref}}", MEMBER),
        (POST, f"{API}/{{ref}}/run", MEMBER),
        (GET, f"{API}/{{ref}}/runs", MEMBER),
        (GET, f"{API}/runs", MEMBER),
        (GET, f"{API}/runs/{{run_id}}", MEMBER),
        (GET, f"{API}/activity", MEMBER_OWN, {"rule": "runs.approvals.answer_rule", "note": "a member sees the activity of their own runs"}),
        (GET, f"{API}/metrics", MEMBER_OWN, {"rule": "runs.approvals.answer_rule", "note": "a member's figures count their own runs"}),
        (GET, f"{API}/billing", ADMIN, {"why": "only an org admin reads the ledger", "note": "the ledger is admin-only"}),
        (GET, f"{API}/approvals", MEMBER_OWN, {"rule": "runs.approvals.answer_rule", "note": "a member lists the approvals of their own runs"}),
        (POST, f"{API}/sessions/{{id}}/approve", MEMBER_OWN, {"rule": _RUN_RULE, "note": "a member answers only runs they started"}),
        (POST, f"{API}/sessions/{{id}}/deny", MEMBER_OWN, {"rule": _RUN_RULE, "note": "a member answers only runs they started"}),
        (GET, f"{API}/sessions", MEMBER),
        (POST, f"{API}/sessions", MEMBER),
        (GET, f"{API}/sessions/stream", MEMBER),
        (GET, f"{API}/sessions/{{id}}", MEMBER),
        (PATCH, f"{API}/sessions/{{id}}", MEMBER),
        (GET, f"{API}/sessions/{{id}}/tree", MEMBER),
        (GET, f"{API}/sessions/{{id}}/events", MEMBER),
        (POST, f"{API}/sessions/{{id}}/events", MEMBER),
        (GET, f"{API}/sessions/{{id}}/control", MEMBER),
        (POST, f"{API}/sessions/{{id}}/pause", MEMBER),
        (POST, f"{API}/sessions/{{id}}/resume", MEMBER),
        (POST, f"{API}/sessions/{{id}}/stop", MEMBER_OWN, {"rule": _RUN_RULE, "note": "a member stops only runs they started"}),
        (POST, f"{API}/sessions/{{id}}/message", MEMBER),
        (GET, f"{API}/sessions/{{id}}/shares", MEMBER),
        (POST, f"{API}/sessions/{{id}}/shares", MEMBER_OWN, {"rule": "chat.shares.share_rule", "note": "the user who started it, or an admin"}),
        (GET, f"{API}/chat/conversations/{{conversation_id}}/shares", MEMBER),
        (POST, f"{API}/chat/conversations/{{conversation_id}}/shares", MEMBER_OWN, {"rule": "chat.shares.share_rule", "note": "the user who started it, or an admin"}),
        (GET, f"{API}/chat/shared", MEMBER),
        (DELETE, f"{API}/chat/shared/{{share_id}}", MEMBER_OWN, {"rule": "chat.shares.share_rule", "note": "the user who shared it, or an admin"}),
        (GET, f"{API}/chat/shares/read", PUBLIC, {"note": "a share link's token is the credential: unknown, revoked or expired is one 404; rate-limited per address"}),
        (GET, f"{API}/builds", PUBLIC, {"note": "the public gallery"}),
        (GET, f"{API}/builds/{{org}}/{{project}}", PUBLIC, {"note": "the public gallery"}),
        (GET, f"{API}/builds/{{org}}/{{project}}/{{session_id}}", PUBLIC, {"note": "the public gallery"}),
        (GET, f"{API}/targets", MEMBER),
        (POST, f"{API}/targets", ADMIN, {"why": "only an org admin registers machines", "note": "machines are registered by admins"}),
        (GET, f"{API}/targets/{{target_id}}", MEMBER),
        (PATCH, f"{API}/targets/{{target_id}}", MEMBER_OWN, {"rule": "targets.selectors.can_manage", "note": "the machine's owner or an admin; others get 404"}),
        (DELETE, f"{API}/targets/{{target_id}}", MEMBER_OWN, {"rule": "targets.selectors.can_manage", "note": "the machine's owner or an admin; others get 404"}),
        (POST, f"{API}/targets/{{target_id}}/key", MEMBER_OWN, {"rule": "targets.selectors.can_manage", "note": "the machine's owner or an admin"}),
        (POST, f"{API}/targets/{{target_id}}/claim", MACHINE, {"rule": "targets.selectors.can_manage", "note": "owner or admin AND the claim key (X-Target-Key); one 403", "why": "target claim rejected", "code": "claim_rejected"}),
        (POST, f"{API}/targets/{{target_id}}/runs/{{run_id}}/report", MACHINE, {"rule": "targets.selectors.can_manage", "note": "owner or admin AND the claim key", "why": "target claim rejected", "code": "claim_rejected"}),
        (GET, f"{API}/repos", MEMBER),
        (POST, f"{API}/repos", ADMIN, {"why": "only an org admin can manage repos"}),
        (GET, f"{API}/repos/{{owner}}/{{name}}", MEMBER),
        (PATCH, f"{API}/repos/{{owner}}/{{name}}", ADMIN, {"why": "only an org admin can manage repos"}),
        (DELETE, f"{API}/repos/{{owner}}/{{name}}", ADMIN, {"why": "only an org admin can manage repos"}),
        (POST, f"{API}/coding", MEMBER),
        (GET, f"{API}/coding/{{run_id}}", MEMBER),
        (POST, f"{API}/chat", MEMBER),
        (GET, f"{API}/chat/presets", PUBLIC, {"note": "the chat presets are public (what the console offers before sign-in)"}),
        (GET, f"{API}/chat/conversations", MEMBER),
        (POST, f"{API}/chat/conversations", MEMBER),
        (GET, f"{API}/chat/conversations/{{conversation_id}}", MEMBER),
        (DELETE, f"{API}/chat/conversations/{{conversation_id}}", MEMBER),
        (GET, f"{API}/webhooks", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (POST, f"{API}/webhooks", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (GET, f"{API}/webhooks/{{webhook_id}}", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (PATCH, f"{API}/webhooks/{{webhook_id}}", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (DELETE, f"{API}/webhooks/{{webhook_id}}", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (POST, f"{API}/webhooks/{{webhook_id}}/rotate", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (POST, f"{API}/webhooks/{{webhook_id}}/test", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (GET, f"{API}/webhooks/{{webhook_id}}/deliveries", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (POST, f"{API}/webhooks/{{webhook_id}}/deliveries/{{delivery_id}}/redeliver", ADMIN, {"why": "only an org admin manages webhook endpoints"}),
        (GET, f"{API}/openapi.json", PUBLIC, {"note": "the API's OpenAPI document"}),
        (GET, f"{API}/docs", PUBLIC, {"note": "the API's docs page"}),
        (GET, "/v1/", PUBLIC, {"note": "the API root (redirects to its docs page)"}),
    ),
    *_rows(
        "OpenAI-compatible /v1/agents/openai/v1",
        (GET, f"{API}/openai/v1/models", OPENAI),
        (GET, f"{API}/openai/v1/models/{{model}}", OPENAI),
        (POST, f"{API}/openai/v1/chat/completions", OPENAI),
        (POST, f"{API}/openai/v1/responses", OPENAI, {"note": "a key limited to some agents reaches only their responses"}),
        (GET, f"{API}/openai/v1/responses/{{response_id}}", OPENAI),
        (DELETE, f"{API}/openai/v1/responses/{{response_id}}", OPENAI),
        (POST, f"{API}/openai/v1/responses/{{response_id}}/cancel", OPENAI),
        (GET, f"{API}/openai/v1/responses/{{response_id}}/input_items", OPENAI),
    ),
    *_rows(
        "MCP server /v1/agents/mcp",
        (READ_WRITE + DELETE, f"{API}/mcp", MCP,
         {"note": "a bearer credential of the org (API key of scope all or mcp, or a gateway JWT), not a console login"}),
    ),
    *_rows(
        "A2A",
        (GET, f"{API}/a2a/public/{{org}}", PUBLIC, {"note": "the public directory: only agents the org listed"}),
        (GET, f"{API}/a2a/public/{{org}}/{{name}}/.well-known/agent-card.json", PUBLIC, {"note": "a listed agent's card"}),
        (POST, f"{API}/{{ref}}/a2a", MEMBER, {"note": "a bearer credential (API key or gateway JWT), not a console login"}),
        (GET, f"{API}/{{ref}}/a2a/.well-known/agent-card.json", MEMBER),
        (GET, f"{API}/{{ref}}/a2a/public", MEMBER),
        (PUT, f"{API}/{{ref}}/a2a/public", ADMIN, {"why": "only an org admin lists or unlists an agent in the public directory"}),
        (DELETE, f"{API}/{{ref}}/a2a/public", ADMIN, {"why": "only an org admin lists or unlists an agent in the public directory"}),
    ),
    *_rows(
        "Identity API /v1/identity",
        (GET, f"{ID}/openapi.json", PUBLIC),
        (GET, f"{ID}/docs", PUBLIC),
        (GET, f"{ID}/agents", MEMBER, {"note": "the agents the caller created"}),
        (POST, f"{ID}/agents", MEMBER),
        (GET, f"{ID}/agents/{{ref}}", MEMBER_OWN, {"rule": "identity.selectors.identity_get_related", "note": "its creator or a related user; else 404"}),
        (PATCH, f"{ID}/agents/{{ref}}", MEMBER_OWN, {"rule": "identity.selectors.identity_get_owned", "note": "its creator; else 404"}),
        (DELETE, f"{ID}/agents/{{ref}}", MEMBER_OWN, {"rule": "identity.selectors.identity_get_owned", "note": "its creator; else 404"}),
        (GET, f"{ID}/agents/{{ref}}/deletion-preview", MEMBER_OWN, {"rule": "identity.selectors.identity_get_owned"}),
        (POST, f"{ID}/agents/{{ref}}/token/regenerate", MEMBER_OWN, {"rule": "identity.selectors.identity_get_owned"}),
        (POST, f"{ID}/agents/{{ref}}/keys/register", AGENT_TOKEN, {"rule": "identity.api.AgentTokenView.own_agent", "note": "the agent's own token; any other id is one 403"}),
        (GET, f"{ID}/agents/{{ref}}/manifest", MEMBER),
        (POST, f"{ID}/agents/{{ref}}/manifest", AGENT_TOKEN, {"rule": "identity.api.AgentTokenView.own_agent"}),
        (POST, f"{ID}/agents/{{ref}}/relations", MEMBER),
        (DELETE, f"{ID}/agents/{{ref}}/relations", MEMBER),
        (GET, f"{ID}/agents/{{ref}}/user-context/{{user_id}}/agents", AGENT_TOKEN, {"rule": "identity.api.AgentTokenView.own_agent"}),
        (GET, f"{ID}/agents/{{ref}}/messages", MEMBER),
        (POST, f"{ID}/agents/{{ref}}/messages", MEMBER),
        (GET, f"{ID}/agents/{{ref}}/keys", MEMBER),
        (GET, f"{ID}/agents/{{ref}}/users/{{user_id}}/keys", AGENT_TOKEN, {"rule": "identity.api.AgentTokenView.own_agent"}),
        (GET, f"{ID}/agents/{{ref}}/deliveries", MEMBER_OWN, {"rule": "identity.selectors.identity_get_owned"}),
        (POST, f"{ID}/deliveries/{{delivery_id}}/replay", MEMBER_OWN, {"rule": "identity.selectors.identity_get_owned"}),
        (GET, f"{ID}/users/me/keys", MEMBER),
        (PUT, f"{ID}/users/me/keys", MEMBER),
        (POST, f"{ID}/users/{{user_id}}/messages", AGENT_TOKEN, {"note": "an agent writes to a related user"}),
        (GET, f"{ID}/relations", MEMBER),
        (GET, f"{ID}/inbox", MEMBER),
        (GET, f"{ID}/inbox/stream", MEMBER),
        (POST, f"{ID}/anomalies", MEMBER),
        (GET, f"{ID}/backup", MEMBER),
        (PUT, f"{ID}/backup", MEMBER),
        (DELETE, f"{ID}/backup", MEMBER),
    ),
    *_rows(
        "WebSocket",
        (("WEBSOCKET",), f"{ID}/ws", AGENT_TOKEN, {"note": "an identity agent's connection, by its token"}),
    ),
    *_rows(
        "Console /console",
        (GET, "/console/", PAGE),
        (READ_WRITE, "/console/login/", PUBLIC),
        (READ_WRITE, "/console/logout/", PUBLIC),
        (POST, "/console/org/", PAGE),
        (GET, "/console/agents/", PAGE),
        (READ_WRITE, "/console/agents/new/", PAGE_ADMIN),
        (GET, "/console/agents/{ref}/", PAGE),
        (READ_WRITE, "/console/agents/{ref}/edit/", PAGE_ADMIN),
        (READ_WRITE, "/console/agents/{ref}/delete/", PAGE_ADMIN),
        (GET, "/console/agents/{ref}/runs/", PAGE),
        (GET, "/console/runs/", PAGE),
        (READ_WRITE, "/console/chat/", PAGE),
        (READ_WRITE, "/console/chat/{conversation_id}/", PAGE_SHELL, {"note": "the page's script reads the conversation (404 for another org's)"}),
        (GET, "/console/sessions/", PAGE),
        (GET, "/console/sessions/{session_id}/", PAGE, {"note": "Stop, Approve and Deny shown only on runs the viewer may act on"}),
        (POST, "/console/sessions/{session_id}/publish/", PAGE),
        (GET, "/console/approvals/", PAGE_OWN, {"rule": _RUN_RULE, "note": "a member answers only runs they started"}),
        (GET, "/console/identity/", PAGE),
        (GET, "/console/identity/inbox/", PAGE),
        (GET, "/console/identity/anomalies/", PAGE_ADMIN),
        (GET, "/console/identity/keys/", PAGE),
        (GET, "/console/identity/talk/", PAGE),
        (GET, "/console/identity/talk/{ref}/", PAGE),
        (GET, "/console/identity/{ref}/deliveries/", PAGE),
        (POST, "/console/identity/{ref}/keys/register/", PAGE),
        (GET, "/console/coding/", PAGE),
        (GET, "/console/coding/{run_id}/", PAGE),
        (GET, "/console/machines/", PAGE, {"note": "registering a machine is shown to admins only"}),
        (READ_WRITE, "/console/keys/", PAGE_ADMIN),
        (POST, "/console/keys/{key_id}/revoke/", PAGE_ADMIN),
        (GET, "/console/billing/", PAGE_ADMIN),
        (READ_WRITE, "/console/backups/", PAGE_ADMIN),
        (READ_WRITE, "/console/webhooks/", PAGE_ADMIN),
        (READ_WRITE, "/console/webhooks/{endpoint_id}/", PAGE_ADMIN),
        (POST, "/console/webhooks/{endpoint_id}/{action}/", PAGE_ADMIN),
        (POST, "/console/webhooks/{endpoint_id}/deliveries/{delivery_id}/redeliver/", PAGE_ADMIN),
        (GET, "/console/members/", PAGE_ADMIN),
        (READ_WRITE, "/console/members/invite/", PAGE_ADMIN),
        (READ_WRITE, "/console/members/new/", PAGE_ADMIN),
        (POST, "/console/members/{user_id}/role/", PAGE_ADMIN_ACTION),
        (POST, "/console/members/{user_id}/remove/", PAGE_ADMIN_ACTION),
        (POST, "/console/members/{user_id}/password/", PAGE_ADMIN_ACTION),
        (POST, "/console/members/invitations/{invitation_id}/revoke/", PAGE_ADMIN_ACTION),
        (READ_WRITE, "/console/invite/{token}/", _profile(PAGE, other_org=ALLOW), {"note": "any signed-in user holding the link"}),
    ),
    *_rows(
        "Public pages",
        (GET, "/builds/", PUBLIC),
        (GET, "/builds/verify.py", PUBLIC),
        (GET, "/builds/{org}/{project}/", PUBLIC),
        (GET, "/builds/{org}/{project}/{session_id}/", PUBLIC),
        (GET, "/shared/{token}/", PUBLIC, {"note": "a share link's read-only page; an unknown or revoked token is 404"}),
        (GET, "/", PUBLIC, {"note": "redirects to /console/"}),
        (GET, "/favicon.ico", PUBLIC),
    ),
    *_rows(
        "Django admin",
        (READ_WRITE, "/admin/{path}", DJANGO_ADMIN, {"note": "org admins, judged by the admin site itself (its own sign-in page); it shows the org they act for"}),
    ),
]

DJANGO_ADMIN_PATH = "/admin/{path}"
_PARAM = re.compile(r"<(?:[^>:]+:)?([^>]+)>")


def route_path(route: str) -> str:
    """Return a Django route string as the table writes it: `v1/agents/sessions/<id>/stop` →
    `/v1/agents/sessions/{id}/stop`; `<runid:run_id>` → `{run_id}`; under `admin/` → `/admin/{path}`."""
    if route.startswith("admin/"):
        return DJANGO_ADMIN_PATH
    return "/" + _PARAM.sub(lambda m: "{" + m.group(1) + "}", route.lstrip("^").rstrip("$"))


_INDEX: dict[tuple[str, str], Row] = {}


def _index() -> dict[tuple[str, str], Row]:
    if not _INDEX:
        for row in TABLE:
            for method in row.methods:
                _INDEX[(method, row.path)] = row
    return _INDEX


def row_for(method: str, path: str) -> Row | None:
    """Return the row of `method` on table path `path` (`route_path`); HEAD reads as GET; None when unlisted."""
    method = "GET" if method == "HEAD" else method
    return _index().get((method, path)) or (_index().get(("GET", path)) if method == "OPTIONS" else None)


def routes_of(path: str) -> list[Row]:
    """Return the rows of table path `path`, any method."""
    return [row for row in TABLE if row.path == path]


def may(row: Row, role: Role) -> bool:
    """Return True when `role` is served on `row` at all (`allow` or `own`)."""
    return row.access[role] in (ALLOW, OWN)


# --- the object rule behind `own` --------------------------------------------------------------


def owner_rule(principal) -> dict:
    """Return whose runs `principal` may act on: `{"all": bool, "actor": str}` (DESIGN §13).

    `all` True for an org admin (every run of the org); else only runs whose `actor` (the billing
    actor `"<org>/<subject>"` recorded when the run started) is the principal's. The one rule behind
    every `own` verdict on a run: stop, approve and deny (`runs.approvals.answer_allowed`), and the
    activity, metrics and approvals lists a member reads. Example: member `acme/bob` →
    `{"all": False, "actor": "acme/bob"}`.
    """
    return {"all": bool(getattr(principal, "is_org_admin", False)), "actor": getattr(principal, "actor", "") or ""}


def owns(rule: dict, *, started_by: str) -> bool:
    """Return True when `rule` (`owner_rule`) lets its principal act on a run `started_by` started."""
    return bool(rule.get("all")) or (bool(started_by) and rule.get("actor") == started_by)


def own_actor(principal) -> str | None:
    """Return the actor a list must narrow to for `principal` (its own runs), or None for an admin (every run)."""
    rule = owner_rule(principal)
    return None if rule["all"] else rule["actor"]
