"""The console's 403 and 404 pages (plain Django views, set as handler403/handler404)."""

from django.shortcuts import render


def forbidden(request, exception=None):
    """Render the 403 page: say why, and what the user can do instead."""
    reason = str(exception) if exception and str(exception) else "You do not have access to this page."
    return render(request, "403.html", {"reason": reason}, status=403)


def not_found(request, exception=None):
    """Render the 404 page (missing, or belonging to another org: never told apart)."""
    return render(request, "404.html", {}, status=404)
