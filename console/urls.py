"""Console routes, mounted at /console/ (namespace `console`)."""

from django.urls import path

from console.views import admin, agents, auth, chat, coding, dashboard, identity, members, runs, sessions, webhooks

app_name = "console"

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("login/", auth.LoginView.as_view(), name="login"),
    path("logout/", auth.LogoutView.as_view(), name="logout"),
    path("org/", auth.org_switch, name="org-switch"),
    path("agents/", agents.agent_list, name="agents"),
    path("agents/new/", agents.agent_create, name="agent-create"),
    path("agents/<str:ref>/", agents.agent_detail, name="agent"),
    path("agents/<str:ref>/edit/", agents.agent_edit, name="agent-edit"),
    path("agents/<str:ref>/delete/", agents.agent_delete, name="agent-delete"),
    path("agents/<str:ref>/runs/", agents.agent_runs, name="agent-runs"),
    path("runs/", runs.run_list, name="runs"),
    path("chat/", chat.chat, name="chat"),
    path("chat/<str:conversation_id>/", chat.chat, name="chat-conversation"),
    path("sessions/", sessions.session_list, name="sessions"),
    path("sessions/<str:session_id>/", sessions.session_detail, name="session"),
    path("sessions/<str:session_id>/publish/", sessions.session_publish, name="session-publish"),
    path("approvals/", sessions.approvals, name="approvals"),
    path("identity/", identity.identity_agents, name="identity"),
    path("identity/inbox/", identity.identity_inbox, name="identity-inbox"),
    path("identity/anomalies/", identity.identity_anomalies, name="identity-anomalies"),
    path("identity/keys/", identity.identity_keys, name="identity-keys"),
    path("identity/talk/", identity.identity_talk_list, name="identity-talk-list"),
    path("identity/talk/<str:ref>/", identity.identity_talk, name="identity-talk"),
    path("identity/<str:ref>/deliveries/", identity.identity_deliveries, name="identity-deliveries"),
    path("identity/<str:ref>/keys/register/", identity.identity_keys_register, name="identity-keys-register"),
    path("coding/", coding.coding_run_list, name="coding"),
    path("coding/<str:run_id>/", coding.coding_run_detail, name="coding-run"),
    path("machines/", coding.machine_list, name="machines"),
    path("keys/", admin.api_keys, name="keys"),
    path("keys/<int:key_id>/revoke/", admin.api_key_revoke_view, name="key-revoke"),
    path("billing/", admin.billing, name="billing"),
    path("backups/", admin.backups, name="backups"),
    path("webhooks/", webhooks.webhook_list, name="webhooks"),
    path("webhooks/<str:endpoint_id>/", webhooks.webhook_detail, name="webhook"),
    path("webhooks/<str:endpoint_id>/<str:action>/", webhooks.webhook_action, name="webhook-action"),
    path("webhooks/<str:endpoint_id>/deliveries/<str:delivery_id>/redeliver/", webhooks.webhook_redeliver, name="webhook-redeliver"),
    path("members/", members.members, name="members"),
    path("members/invite/", members.member_invite, name="member-invite"),
    path("members/new/", members.member_create, name="member-create"),
    path("members/<int:user_id>/role/", members.member_role, name="member-role"),
    path("members/<int:user_id>/remove/", members.member_remove, name="member-remove"),
    path("members/<int:user_id>/password/", members.member_password, name="member-password"),
    path("members/invitations/<int:invitation_id>/revoke/", members.invitation_revoke, name="invitation-revoke"),
    path("invite/<str:token>/", members.invite_accept, name="invite"),
]
