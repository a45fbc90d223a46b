"""The public gallery pages: published builds only, no login, no org store created by a visit."""

from django.test import Client

from sessions.services import session_append_event, session_create
from tenancy import stores


def _build(handle, *, project, published, text="Made the cart", commit="", subject=""):
    with handle.context():
        session = session_create(agent="builder", actor="a/b", title=f"{project} story", project=project, published=published)
        payload = {"text": text}
        if commit:
            payload.update(commit=commit, subject=subject)
        session_append_event(session_id=session.id, kind="message", payload=payload, actor="a/b")
        return session


def test_gallery_lists_published_builds_to_anonymous_visitors(org_a, org_b):
    _build(org_a, project="shop", published=True)
    _build(org_b, project="draft", published=False)
    response = Client().get("/builds/")
    assert response.status_code == 200
    html = response.content.decode()
    assert f'data-build="{org_a.slug}/shop"' in html
    assert "draft" not in html


def test_build_page_shows_turns_commits_and_the_verify_command(org_a):
    from sessions.provenance import VERIFY_COMMAND

    _build(org_a, project="shop", published=True, text="Add checkout", commit="abc1234", subject="Checkout page")
    response = Client().get(f"/builds/{org_a.slug}/shop/")
    assert response.status_code == 200
    html = response.content.decode()
    assert "Add checkout" in html and "abc1234" in html and "Checkout page" in html
    assert response.context["build"]["verify"] == VERIFY_COMMAND


def test_an_unpublished_build_is_a_404_for_everyone(org_a):
    _build(org_a, project="secret", published=False, text="hidden words")
    for client in (Client(), Client(HTTP_AUTHORIZATION=f"Bearer {org_a.key}")):
        response = client.get(f"/builds/{org_a.slug}/secret/")
        assert response.status_code == 404
        assert "hidden words" not in response.content.decode()


def test_visiting_an_unknown_org_creates_no_store(db):
    response = Client().get("/builds/never-made/shop/")
    assert response.status_code == 404
    assert not stores.store_exists("never-made")


def test_empty_gallery_says_how_to_publish(db):
    html = Client().get("/builds/").content.decode()
    assert "No published builds yet" in html
