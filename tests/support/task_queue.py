"""The task queue as the tests see it, whichever broker the pass runs on (ORM or Redis).

On SQLite the queue is django-q2's ORM broker (`OrmQ` rows, rolled back with the test); in the
PostgreSQL + Redis pass it is a Redis list that outlives a test, so the `task_queue` fixture
empties it first. Import the fixture into a test module: `from tests.support.task_queue import task_queue`.
"""

from __future__ import annotations

import pytest


class TaskQueue:
    """The tasks waiting in the configured broker, decoded (`{"id", "func", "args", …}`)."""

    def tasks(self) -> list[dict]:
        """Return every queued task, oldest first."""
        from django_q.brokers import get_broker
        from django_q.conf import Conf
        from django_q.signing import SignedPackage

        if Conf.ORM:
            from django_q.models import OrmQ

            return [q.task for q in OrmQ.objects.order_by("id")]
        broker = get_broker()
        return [SignedPackage.loads(raw) for raw in broker.connection.lrange(broker.list_key, 0, -1)]

    def ids(self, func: str) -> list[str]:
        """Return the ids of the queued tasks calling `func` (a dotted path)."""
        return [t["id"] for t in self.tasks() if t.get("func") == func]

    def purge(self) -> None:
        from django_q.brokers import get_broker
        from django_q.conf import Conf

        if not Conf.ORM:
            get_broker().purge_queue()


@pytest.fixture
def task_queue(db) -> TaskQueue:
    """The broker's queue, empty at the start of the test."""
    queue = TaskQueue()
    queue.purge()
    return queue
