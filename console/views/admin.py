"""Org-admin pages: API keys (created once-shown, listed, revoked), billing, and the org's backup."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from agents import selectors as agent_selectors
from agents_site.errors import InvalidRequest
from billing import selectors as billing_selectors
from console.access import org_admin_required
from agents_site.vocabulary import ApiKeyScope
from console.forms import ApiKeyForm
from tenancy import selectors as tenancy_selectors
from tenancy.models import Org
from tenancy.services import api_key_create, api_key_revoke
from tenancy.backups.litestream import hide_passwords, redacted
from tenancy.backups.status import org_status

LEDGER_ROWS = 100
RESTORE_ROWS = 20


def _acting_org(request) -> Org:
    return tenancy_selectors.org_get(slug=request.principal.org_slug)


@org_admin_required
@require_http_methods(["GET", "POST"])
def api_keys(request):
    """List the org's API keys; on POST mint one for the signed-in user and show it once.

    The form names the key and its limits (scope; the agents an `openai` key may call); a
    limit the service refuses is shown on the form and no key is minted. The new key is
    rendered only in the answer to the POST (`Cache-Control: no-store`) and never stored in
    the session: after this page it exists only as its SHA-256 hash.
    """
    org = _acting_org(request)
    agent_names = sorted(agent.name for agent in agent_selectors.agent_list())
    form = ApiKeyForm(request.POST or None, agent_names=agent_names)
    new_key = None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            _, new_key = api_key_create(org=org, user=request.user, name=data.get("name") or "",
                                        scope=data.get("scope") or ApiKeyScope.ALL, allowed_agents=data.get("allowed_agents") or [])
        except InvalidRequest as exc:
            form.add_error(None, exc.message)
        else:
            form = ApiKeyForm(agent_names=agent_names)
    keys = tenancy_selectors.api_key_list(org=org)
    response = render(request, "console/keys.html", {"keys": keys, "form": form, "new_key": new_key, "nav": "keys"})
    if new_key:
        response["Cache-Control"] = "no-store"
    return response


@org_admin_required
@require_POST
def api_key_revoke_view(request, key_id: int):
    """Revoke one of the org's API keys (idempotent); another org's key is a 404."""
    row = api_key_revoke(org=_acting_org(request), key_id=key_id)
    messages.success(request, f"API key {row.prefix}… revoked: it no longer authenticates, and its open connections are closed.")
    return redirect("console:keys")


@org_admin_required
def billing(request):
    """Show the org's balance and its newest ledger rows (credits +, run debits −), in cents."""
    org = _acting_org(request)
    return render(
        request,
        "console/billing.html",
        {
            "balance_cents": billing_selectors.balance_cents(org=org),
            "ledger": billing_selectors.ledger_recent(org=org, limit=LEDGER_ROWS),
            "ledger_limit": LEDGER_ROWS,
            "nav": "billing",
        },
    )


@org_admin_required
def backups(request):
    """Show the org's backup as `manage.py backup_status` reports it (state, replica lag, last
    snapshot, newest shipped change, replica) and its newest restores (issue 35)."""
    from django.conf import settings


    slug = request.principal.org_slug
    status = org_status(slug)
    # An org admin never sees the server's replica password: not in the URL, the state's
    # sentence or a restore's error (rows stored before errors were cleaned included).
    status.replica_url = redacted(status.replica_url)
    status.detail = hide_passwords(status.detail)
    restores = tenancy_selectors.org_restores(slug=slug, limit=RESTORE_ROWS)
    for restore in restores:
        restore.error = hide_passwords(restore.error)
    return render(
        request,
        "console/backups.html",
        {
            "status": status,
            "restores": restores,
            "restore_limit": RESTORE_ROWS,
            "retention_days": settings.AGENTS_BACKUP_RETENTION_DAYS,
            "postgres_mode": settings.AGENTS_ORG_DATABASE == "postgres",
            "nav": "backups",
        },
    )
