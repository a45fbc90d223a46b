"""Run-target routes (spec 003: /v1/agents/targets…). Thin: parse, call one service, shape.

Ownership: the owner is the principal's subject; org admins act on every target. Non-owners
get the same 404 as an unknown id for PATCH/DELETE/key; claim and report failures are all the
same 403 `claim_rejected`. The claim route is async: it waits on the channel layer.
"""

from django.http import HttpResponse, JsonResponse
from ninja import Header, Router
from ninja.responses import Status

from agents.schemas import ErrorOut
from agents_site.pagination import cursor_param, limit_param
from targets import keys, longpoll, mailbox, selectors, services
from targets.presenters import routed_run_view, target_view
from targets.schemas import ClaimKeyOut, ReportIn, ReportOut, RoutedRunOut, TargetDeletedOut, TargetIn, TargetListOut, TargetOut
from targets.services import TargetInput

router = Router(tags=["targets"])


def _input(payload: TargetIn) -> TargetInput:
    return TargetInput(**payload.model_dump(exclude_unset=True))


def _view(target) -> dict:
    return target_view(target, load=selectors.session_load([target])[target.id])


@router.get("", response={200: TargetListOut, 400: ErrorOut}, summary="List the org's machines", exclude_none=True)
def list_targets(
    request,
    limit: int = limit_param(default=selectors.TARGETS_DEFAULT_LIMIT, maximum=selectors.TARGETS_MAX_LIMIT),
    cursor: str = cursor_param(),
):
    """Return one page of the caller org's machines, newest first, each with its session load;
    `nextCursor` reads the next page."""
    page = selectors.target_list(limit=limit, cursor=cursor)
    load = selectors.session_load(page.items)
    return {"targets": [target_view(t, load=load[t.id]) for t in page.items], "nextCursor": page.next_cursor}


@router.post("", response={200: TargetOut, 201: TargetOut}, summary="Register or re-link a machine", exclude_none=True)
def register_target(request, payload: TargetIn):
    """Register a machine (201) or re-link the caller's machine on the same host (200)."""
    target, created = services.target_register(owner=request.auth.subject, data=_input(payload))
    return Status(201 if created else 200, _view(target))


@router.get("/{target_id}", response=TargetOut, summary="Read one machine", exclude_none=True)
def get_target(request, target_id: str):
    """Return one machine of the caller's org with its session load (404 otherwise)."""
    return _view(selectors.target_get(target_id=target_id))


@router.patch("/{target_id}", response=TargetOut, summary="Change a machine (owner or org admin)", exclude_none=True)
def patch_target(request, target_id: str, payload: TargetIn):
    """Change a machine in place; a metrics patch is a heartbeat stamped by the server."""
    target = services.target_update(
        target_id=target_id, subject=request.auth.subject, is_org_admin=request.auth.is_org_admin, data=_input(payload)
    )
    return _view(target)


@router.delete("/{target_id}", response=TargetDeletedOut, summary="Deregister a machine (owner or org admin)")
def delete_target(request, target_id: str):
    """Deregister a machine → `{"deleted": true, "id"}`; 404 for everyone but its owner and org admins."""
    deleted = services.target_delete(target_id=target_id, subject=request.auth.subject, is_org_admin=request.auth.is_org_admin)
    return {"deleted": True, "id": deleted}


@router.post("/{target_id}/key", response=ClaimKeyOut, summary="Mint or rotate the machine's claim key")
def mint_key(request, target_id: str):
    """Return a new claim key once (only its SHA-256 is kept); the old daemon is superseded."""
    key = keys.claim_key_mint(target_id=target_id, subject=request.auth.subject, is_org_admin=request.auth.is_org_admin)
    return {"targetId": target_id, "claimKey": key}


@router.post("/{target_id}/claim", response={200: RoutedRunOut, 204: None}, summary="Long-poll for the next routed run")
async def claim(request, target_id: str, x_target_key: str = Header(default="", alias="X-Target-Key")):
    """Wait up to 25 s for the next run addressed to this machine: 200 with it, or 204."""
    offer = await longpoll.claim_wait(
        target_id=target_id, subject=request.auth.subject, is_org_admin=request.auth.is_org_admin, key=x_target_key
    )
    if offer is None:
        return HttpResponse(status=204)
    return JsonResponse(routed_run_view(offer))


@router.post("/{target_id}/runs/{run_id}/report", response=ReportOut, summary="Report a claimed run's result")
def report(request, target_id: str, run_id: str, payload: ReportIn, x_target_key: str = Header(default="", alias="X-Target-Key")):
    """Settle a run this machine claimed → `{"delivered": bool}` (false: unknown or finished)."""
    delivered = mailbox.routed_report(
        target_id=target_id,
        run_id=run_id,
        subject=request.auth.subject,
        is_org_admin=request.auth.is_org_admin,
        key=x_target_key,
        result=payload.model_dump(exclude_unset=True),
    )
    return {"delivered": delivered}
