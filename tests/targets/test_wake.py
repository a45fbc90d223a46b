"""targets.wake on Redis: a waiting claim's subscription when the layer's receive fails."""

from __future__ import annotations

import asyncio
import uuid

import redis

from agents_site.settings import redis_channel_layer
from targets import wake

REDIS_URL = "redis://127.0.0.1:6379/3"  # the sessions tests' database (never flushed); keys under a prefix of its own


def test_a_subscription_whose_receive_failed_sleeps_out_its_window_and_still_leaves_the_group(settings):
    # A failed receive (here a 0.5 s socket timeout under channels-redis's 5 s blocking pop)
    # degrades the wait to a sleep. It forgot its channel, so it never left the group: a member
    # for a day, its buffer filling with wake-ups no one reads.
    prefix = f"wake{uuid.uuid4().hex[:8]}"
    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(REDIS_URL, socket_timeout=0.5, prefix=prefix)}
    client = redis.Redis.from_url(REDIS_URL)

    async def scenario():
        loop = asyncio.get_running_loop()
        async with wake.Subscription(org="acme", target_id="tgt_1") as subscription:
            group_key, channel = f"{prefix}:group:{subscription.group}", subscription.channel
            assert channel is not None and client.zscore(group_key, channel) is not None
            started = loop.time()
            woken = await subscription.wait(1.5)
            waited = loop.time() - started
            assert subscription.degraded is True
            assert await subscription.wait(0.2) is False  # later waits sleep
        return woken, waited, group_key, channel

    woken, waited, group_key, channel = asyncio.run(scenario())
    assert woken is False and waited >= 1.4  # the whole window, not an early return
    assert client.zscore(group_key, channel) is None  # it left the group
