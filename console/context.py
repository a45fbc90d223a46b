"""Template context shared by every console page: the principal, the org switcher."""

from __future__ import annotations

from django.conf import settings

from chat.shares import share_rule
from runs.approvals import answer_rule
from tenancy.models import Membership


def console_context(request) -> dict:
    """Return `{principal, memberships, acting_org, demo_gateway, answer_rule, share_rule}` for the console's templates.

    The scripts read the vocabulary from the one generated module `static/console/vocabulary.js`
    (`console/base.html` loads it first), so JS never holds its own copy. `memberships` lists only the
    signed-in user's own orgs (the org switcher offers nothing else); anonymous visitors get
    an empty list. `demo_gateway` is true under `make demo` (the notice in the top bar).
    `answer_rule` (`runs.approvals.answer_rule`: `{all, actor}`) is whose approval
    requests the viewer may answer; `console/base.html` puts it in the page as JSON
    (`agents-answer-rule`) and the scripts offer Approve/Deny only where it allows; `share_rule`
    (`chat.shares.share_rule`, `agents-share-rule`) is the same for the Share controls.
    """
    user = getattr(request, "user", None)
    memberships = []
    if user is not None and user.is_authenticated:
        memberships = list(Membership.objects.filter(user_id=user.pk).select_related("org").order_by("org__slug"))
    principal = getattr(request, "principal", None)
    return {
        "principal": principal,
        "memberships": memberships,
        "acting_org": principal.org_slug if principal is not None else None,
        "demo_gateway": settings.AGENTS_DEMO_GATEWAY,
        "answer_rule": answer_rule(principal) if principal is not None and principal.org_slug else None,
        "share_rule": share_rule(principal) if principal is not None and principal.org_slug else None,
    }
