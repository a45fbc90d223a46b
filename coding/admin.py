"""Admin for the acting org's repositories and coding runs (credential names only, never values)."""

from django.contrib import admin

from tenancy.admin_site import OrgModelAdmin
from coding.models import CodingRun, Repo


@admin.register(Repo)
class RepoAdmin(OrgModelAdmin):
    list_display = ("owner", "name", "clone_url", "default_branch", "credential", "updated_at")
    search_fields = ("owner", "name", "clone_url")
    readonly_fields = ("id", "created_by", "created_at", "updated_at")


@admin.register(CodingRun)
class CodingRunAdmin(OrgModelAdmin):
    list_display = ("run_id", "repo", "branch", "changed", "pushed", "head_sha", "target_id", "created_at")
    list_filter = ("changed", "pushed")
    search_fields = ("run_id", "session_id", "repo", "branch")
    readonly_fields = [f.name for f in CodingRun._meta.fields]
