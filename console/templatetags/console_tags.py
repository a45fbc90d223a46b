"""Template filters of the console: status badges (colours from the one vocabulary) and money."""

from django import template
from django.utils.html import format_html

from agents_site.vocabulary import vocabulary_for_js

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
