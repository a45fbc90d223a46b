"""`manage.py backup_status [--json]`: every org with its replica's lag and last snapshot."""



from django.core.management.base import BaseCommand

from tenancy.backups.status import all_statuses


def _when(value) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z" if value else "-"


class Command(BaseCommand):
    help = "List every org's backup: state, replica lag (seconds), last snapshot, newest shipped change."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="one JSON object per org")

    def handle(self, *args, json: bool = False, **options):
        rows = all_statuses()
        if json:
            import json as json_module

            for row in rows:
                self.stdout.write(json_module.dumps({
                    "org": row.slug, "state": row.state, "lagSeconds": row.lag_seconds,
                    "lastSnapshot": _when(row.last_snapshot) if row.last_snapshot else None,
                    "newestChange": _when(row.newest_change) if row.newest_change else None,
                    "replica": row.replica_url, "detail": row.detail}))
            return
        self.stdout.write(f"{'org':<24} {'state':<16} {'lag s':>7}  {'last snapshot':<24} {'newest change':<24} detail")
        for row in rows:
            lag = "-" if row.lag_seconds is None else f"{row.lag_seconds:.1f}"
            self.stdout.write(f"{row.slug:<24} {row.state:<16} {lag:>7}  {_when(row.last_snapshot):<24} "
                              f"{_when(row.newest_change):<24} {row.detail}")
