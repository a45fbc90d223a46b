"""Run-target routes (spec 003: /v1/agents/targets…). Thin: parse, call one service, shape.

Ownership: the owner is the principal's subject; org admins act on every target. Non-owners
get the same 404 as an unknown id for PATCH/DELETE/key; claim and report failures are all the
same 403 `claim_rejected`. The claim route is async: it waits on the channel layer.
"""

from django.http import HttpResponse, JsonResponse
from ninja import Header, Router
from ninja.responses import Status

from targets import keys, longpoll, mailbox, selectors, services
from targets.presenters import routed_run_view, target_view
from agents_site.pagination import cursor_param, limit_param
from agents_site.schemas import ErrorOut
from targets.schemas import ClaimKeyOut, ReportIn, ReportOut, RoutedRunOut, TargetCreateIn, TargetDeletedOut, TargetIn, TargetListOut, TargetOut
from targets.services import TargetInput

router = Router(tags=["targets"])


def _input(payload: TargetIn | TargetCreateIn) -> TargetInput:
    return TargetInput(**payload.model_dump(exclude_unset=True))


def _view(target) -> dict:
    return target_view(target, load=selectors.session_load([target])[target.id])


# Route docstrings are the operation descriptions of the OpenAPI document: written for users.


@router.get("", response=TargetListOut, summary="List the org's machines", exclude_none=True)
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


@router.post("", response={200: TargetOut, 201: TargetOut, 409: ErrorOut}, summary="Register or re-link a machine", exclude_none=True)
def register_target(request, payload: TargetCreateIn):
    """Register a machine (201) or re-link the caller's machine on the same host (200). 409
    when the same host was registered at the same moment: retry."""
    target, created = services.target_register(owner=request.auth.subject, data=_input(payload))
    return Status(201 if created else 200, _view(target))


@router.get("/{target_id}", response=TargetOut, summary="Read one machine", exclude_none=True)
def get_target(request, target_id: str):
    """Return one machine of the caller's org with its session load."""
    return _view(selectors.target_get(target_id=target_id))


@router.patch("/{target_id}", response={200: TargetOut, 409: ErrorOut}, summary="Change a machine (owner or org admin)", exclude_none=True)
def patch_target(request, target_id: str, payload: TargetIn):
    """Change a machine in place; a `metrics` change is a heartbeat stamped by the server. A
    machine that is not the caller's (unless an org admin) answers 404 like an unknown one; 409
    when another of the owner's machines already has the `host` asked for."""
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


_CLAIM_REJECTED = "`claim_rejected`: not the machine's owner (or an org admin), or not its current claim key"


@router.post("/{target_id}/claim", response={200: RoutedRunOut, 204: None, 403: ErrorOut}, summary="Long-poll for the next routed run", openapi_extra={"responses": {403: {"description": _CLAIM_REJECTED}}})
async def claim(request, target_id: str, x_target_key: str = Header(default="", alias="X-Target-Key", description="The machine's claim key.")):
    """Wait up to 25 s for the next run addressed to this machine: 200 with it, or 204 when
    none came. Both proofs are needed: the caller owns the machine (or is an org admin) and
    `X-Target-Key` is its current claim key; either failing is the same 403."""
    offer = await longpoll.claim_wait(
        target_id=target_id, subject=request.auth.subject, is_org_admin=request.auth.is_org_admin, key=x_target_key
    )
    if offer is None:
        return HttpResponse(status=204)
    return JsonResponse(routed_run_view(offer))


@router.post("/{target_id}/runs/{run_id}/report", response={200: ReportOut, 403: ErrorOut}, summary="Report a claimed run's result", openapi_extra={"responses": {403: {"description": _CLAIM_REJECTED}}, "x-unscanned": True})
def report(request, target_id: str, run_id: str, payload: ReportIn, x_target_key: str = Header(default="", alias="X-Target-Key", description="The machine's claim key.")):
    """Record the result of a run this machine claimed → `{"delivered": bool}` (`false`: the
    run is unknown or already finished). Same two proofs as the claim; either failing is 403."""
    delivered = mailbox.routed_report(
        target_id=target_id,
        run_id=run_id,
        subject=request.auth.subject,
        is_org_admin=request.auth.is_org_admin,
        key=x_target_key,
        result=payload.model_dump(exclude_unset=True),
    )
    return {"delivered": delivered}
