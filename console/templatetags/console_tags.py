"""Template filters of the console: status badges (colours from the one vocabulary), money and
date/times (one format everywhere: `console.js` rewrites every `<time data-local>` in the
viewer's local time; the ISO timestamp stays in its tooltip)."""

from datetime import UTC, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html

from agents_site.vocabulary import FinishReason, vocabulary_for_js

register = template.Library()


@register.simple_tag
def badge(word) -> str:
    """Render `word` as a status badge coloured by `vocabulary_for_js()["badge"]` (grey if absent)."""
    word = str(word or "")
    colour = vocabulary_for_js()["badge"].get(word, "#6b7280")
    return format_html('<span class="badge" data-status="{}" style="--badge:{}">{}</span>', word, colour, word)


@register.filter
def cents(value) -> str:
    """Render an amount in cents as dollars: `1050` → `$10.50`, `-100` → `−$1.00`."""
    try:
        amount = int(value)
    except (TypeError, ValueError):
        return "—"
    sign = "−" if amount < 0 else ""
    amount = abs(amount)
    return f"{sign}${amount // 100:,}.{amount % 100:02d}"


@register.simple_tag
def when(value, empty: str = "—") -> str:
    """Render a datetime (or an ISO 8601 string, as the API's presenters give) as
    `<time datetime="ISO" title="ISO" data-local>` (`empty` for None, "" or an unreadable text).

    The text before the script runs is the UTC time `2026-12-02 04:03 UTC`; `console.js`
    (`Console.localTime`) replaces it with the viewer's local date and time, the one format
    of every console page. The ISO 8601 timestamp (UTC, seconds) stays in the tooltip.
    """
    if isinstance(value, str) and value:
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return empty
    if not isinstance(value, datetime):
        return empty
    utc = value.astimezone(UTC) if timezone.is_aware(value) else value
    iso = utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    return format_html('<time datetime="{}" title="{}" data-local>{}</time>', iso, iso, utc.strftime("%Y-%m-%d %H:%M UTC"))


@register.simple_tag
def run_outcome(run) -> str:
    """Render a run's status badge, read with its `finish_reason`: a user's stop shows as
    "stopped" (not a red "error"), a reply cut by the token limit adds "✂ truncated"."""
    reason = getattr(run, "finish_reason", "") or ""
    word = FinishReason.STOPPED if reason == FinishReason.STOPPED else run.status
    html = badge(word)
    if reason == FinishReason.LENGTH:
        html += format_html(' <span class="cut-note" data-finish="{}" title="{}">✂ {}</span>', reason,
                            "The reply was cut off at the token limit (maxTokens).", FinishReason.LENGTH.label)
    return html


@register.filter
def stopped_by_user(run) -> bool:
    """Return True when `run` ended because a user stopped it (`finish_reason` `stopped`): its
    `error` ("stopped by …") is said in plain grey, never as a failure's red text."""
    return (getattr(run, "finish_reason", "") or "") == FinishReason.STOPPED


@register.filter
def indented_json(text) -> str:
    """Return JSON text `text` indented two spaces (non-ASCII kept as written), as the session page's
    turns show it; text that is not whole JSON (cut at its display limit, or plain words) unchanged."""
    import json

    if not isinstance(text, str):
        return "" if text is None else str(text)
    try:
        value = json.loads(text)
    except ValueError:
        return text
    if not isinstance(value, dict | list):
        return text
    return json.dumps(value, indent=2, ensure_ascii=False)
