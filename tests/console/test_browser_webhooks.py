"""The webhook endpoints page in a real browser (issue 32 item 4): create, test send, rotate the
secret, deliveries with status, attempts and response code, redeliver; at 1280 and 390 px."""

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from tests.webhooks.conftest import Receiver
from webhooks.models import Endpoint, EventDelivery

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def hook():
    server = Receiver().start()
    yield server
    server.stop()


def test_admin_creates_tests_rotates_and_redelivers(page, make_org, login, shoot, hook):
    org = make_org("bw")
    login(page, org)
    page.click(".sidebar >> text=Webhooks")
    assert "No endpoints yet" in page.inner_text("main")
    page.fill("#id_url", "https://10.0.0.1/h")  # a private address: refused, nothing stored
    page.click("button:has-text('Create endpoint')")
    assert "url" in page.inner_text("#webhook-form-error")
    with org.context():
        assert Endpoint.objects.count() == 0
    page.fill("#id_url", hook.url)
    page.fill("#id_description", "ops receiver")
    page.check("input[name=events][value='coding.pushed']")
    page.click("button:has-text('Create endpoint')")
    first_secret = page.inner_text("#new-secret").strip()
    assert first_secret.startswith("whsec_")
    with org.context():
        endpoint = Endpoint.objects.get()
    assert endpoint.events == ["coding.pushed", "run.finished"] and endpoint.description == "ops receiver"
    shoot(page, "webhooks")
    hook.secret = first_secret
    row = f"tr[data-endpoint='{endpoint.public_id}']"
    page.click(f"{row} button:has-text('Test')")
    page.wait_for_url(f"**/console/webhooks/{endpoint.public_id}/")
    assert "Test event delivered (204)" in page.inner_text(".flash")
    assert hook.received[0].error is None and hook.received[0].verified["type"] == "webhook.test"
    first = page.locator("#deliveries-table tbody tr").first
    assert first.locator(".delivery-status").inner_text() == "succeeded"
    assert first.locator(".delivery-attempts").inner_text() == "1" and "204" in first.locator(".delivery-code").inner_text()
    shoot(page, "webhook-deliveries")

    # Rotate: the new secret verifies, the old one verifies nothing after.
    page.goto("/console/webhooks/")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click(f"{row} button:has-text('Rotate secret')")
    second_secret = page.inner_text("#new-secret").strip()
    assert second_secret.startswith("whsec_") and second_secret != first_secret
    hook.secret = second_secret
    page.click(f"{row} button:has-text('Test')")
    page.wait_for_url(f"**/console/webhooks/{endpoint.public_id}/")
    got = hook.received[-1]
    assert got.error is None
    with pytest.raises(WebhookVerificationError):
        Webhook(first_secret).verify(got.body, got.headers)

    # Redeliver a finished delivery: queued again under its own webhook-id.
    newest = page.locator("#deliveries-table tbody tr").first
    delivery_id = newest.get_attribute("data-delivery")
    newest.locator("button:has-text('Redeliver')").click()
    assert f"Delivery {delivery_id} queued again." in page.inner_text(".flash")
    with org.context():
        assert EventDelivery.objects.get(public_id=delivery_id).status == "pending"
    assert page.locator(f"tr[data-delivery='{delivery_id}'] .delivery-status").inner_text() == "pending"

    # A phone: nothing overflows the page.
    for path in ["/console/webhooks/", f"/console/webhooks/{endpoint.public_id}/"]:
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(path)
        assert page.evaluate("document.documentElement.scrollWidth") <= 390, path
    shoot(page, "webhook-deliveries-390")
