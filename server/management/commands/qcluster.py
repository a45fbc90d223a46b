"""`manage.py qcluster`: django-q2's cluster, stopping within a grace on SIGTERM / Ctrl-C.

Overrides django-q2's command (this app is listed before `django_q`). On SIGTERM or SIGINT the
cluster first tells its workers to stop (`runs.shutdown`: no new run, the run in flight gets
`AGENTS_SHUTDOWN_GRACE_SECONDS`, then ends "worker stopped"), then stops as django-q2 does.
"""

from __future__ import annotations

import os
import signal
import threading

from django.conf import settings
from django_q.cluster import Cluster
from django_q.management.commands.qcluster import Command as QClusterCommand

from server.heap import settle as settle_heap
from runs.shutdown import STOP_SIGNAL, signal_workers


#: Seconds past the grace after which the cluster's remaining processes are killed.
KILL_MARGIN_SECONDS = 3.0


class Command(QClusterCommand):
    """Start a django-q2 cluster whose workers stop within a grace."""

    help = "Starts a django-q2 cluster; SIGTERM/SIGINT give a run in flight AGENTS_SHUTDOWN_GRACE_SECONDS, then end it."

    def handle(self, *args, **options):
        settings.SECRET_KEY  # noqa: B018 — the cluster signs tasks with it (as django-q2 checks)
        if options.get("cluster_name"):
            os.environ["Q_CLUSTER_NAME"] = options["cluster_name"]
        cluster = Cluster()

        def stop(signum, frame) -> None:
            signal_workers(os.getpid())
            # django-q2's own stop waits for each worker to take a stop pill from a bounded
            # queue; a worker that gave up its run exits without taking it. Past the grace
            # (plus a margin for the run's record to be written) what is left is killed.
            watchdog = threading.Timer(float(settings.AGENTS_SHUTDOWN_GRACE_SECONDS) + KILL_MARGIN_SECONDS,
                                       signal_workers, args=(os.getpid(), signal.SIGKILL))
            watchdog.daemon = True
            watchdog.start()
            Cluster.sig_handler(cluster, signum, frame)

        signal.signal(signal.SIGTERM, stop)  # Cluster() installed its own handler; ours wraps it
        signal.signal(signal.SIGINT, stop)
        # The sentinel, pusher and monitor inherit "ignore" for the workers' stop signal; only
        # workers answer it (`runs.shutdown.install_worker_handler`, on django-q2's post_spawn).
        signal.signal(STOP_SIGNAL, signal.SIG_IGN)
        settle_heap()  # before the workers fork: they inherit a frozen start-up heap (server.heap)
        cluster.start()
        if options.get("run_once", False):
            cluster.stop()
