"""Admin for the sessions and events of the acting org (read from the org's own store).

Sessions: filter by status, search by agent and title; title, status, project and publication
can be changed, through `services.session_update`, so the admin obeys the API's rules (a
finished session never reopens, publishing needs a project) and the change is streamed.
Sessions cannot be added or deleted here; events are read-only: the log is append-only.
"""

from django import forms
from django.contrib import admin

from tenancy.admin_site import OrgModelAdmin
from agents_site.errors import ApiError
from sessions import services
from sessions.models import Event, Session

EDITABLE = ("title", "status", "project", "published")


class SessionAdminForm(forms.ModelForm):
    """Validate an admin edit by applying it with `session_update` inside the save."""

    class Meta:
        model = Session
        fields = EDITABLE


@admin.register(Session)
class SessionAdmin(OrgModelAdmin):
    editable = True
    form = SessionAdminForm
    list_display = ("id", "agent", "title", "status", "project", "published", "last_seq", "updated_at")
    list_filter = ("status", "published")
    search_fields = ("agent", "title")
    fields = ("id", "agent", "actor", *EDITABLE, "parent_id", "root_id", "repo", "host", "target", "last_seq", "started_at", "ended_at", "updated_at")
    readonly_fields = ("id", "agent", "actor", "parent_id", "root_id", "repo", "host", "target", "last_seq", "started_at", "ended_at", "updated_at")

    def has_add_permission(self, request):
        return False  # sessions are opened by the surfaces that run agents, through the API

    def has_delete_permission(self, request, obj=None):
        return False  # a session is a durable record: no route deletes one, subagents hang off it

    def save_model(self, request, obj, form, change):
        """Apply the changed fields through `session_update`; an ApiError becomes a form error."""
        changes = {name: form.cleaned_data[name] for name in form.changed_data if name in EDITABLE}
        if changes:
            services.session_update(session_id=obj.pk, **changes)

    def get_form(self, request, obj=None, **kwargs):
        form_class = super().get_form(request, obj, **kwargs)

        class Checked(form_class):
            def clean(self):
                cleaned = super().clean()
                changes = {name: cleaned.get(name) for name in self.changed_data if name in EDITABLE}
                if changes and self.instance.pk:
                    try:
                        services.validate_update(session_id=self.instance.pk, **changes)
                    except ApiError as exc:
                        raise forms.ValidationError(exc.message) from exc
                return cleaned

        return Checked


@admin.register(Event)
class EventAdmin(OrgModelAdmin):
    list_display = ("id", "session_id", "seq", "position", "kind", "actor", "created_at")
    list_filter = ("kind",)
    search_fields = ("session__id", "actor")
    readonly_fields = ("id", "session", "root_id", "seq", "position", "kind", "actor", "payload", "created_at")
