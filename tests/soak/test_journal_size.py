"""``python -m soak.journal_size`` on real journals of both layouts."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from events.envelope import NewEvent
from runtime.journal.store import Journal
from soak.journal_size import main, measure
from tests.runtime.journal.old_format import to_layout_1


def _turn(n: int) -> list[NewEvent]:
    return [
        NewEvent(
            event_id=str(uuid.uuid4()),
            type=kind,
            at="2026-11-27T08:00:00.000Z",
            project_id="p1",
            conversation_id="c1",
            correlation_id=f"corr-{n}",
            data={"content": f"turn {n}"},
        )
        for kind in ("user.message", "assistant.message")
    ]


def _journal(tmp_path: Path) -> str:
    path = str(tmp_path / "journal.sqlite")
    with Journal("sqlite", sqlite_path=path) as journal:
        for n in range(20):
            journal.append(_turn(n), key=f"k{n}")
    return path


def test_a_journal_of_layout_2_is_measured_per_turn(tmp_path: Path) -> None:
    report = measure(_journal(tmp_path))
    assert (report["layout"], report["turns"], report["events"]) == (2, 20, 40)
    assert report["types"]["assistant.message"]["events"] == 20
    names = {t["name"] for t in report["tables"]}
    assert {"stored_events", "roost_events_by_conversation", "roost_batches_0"} <= names
    assert report["state_bytes_per_turn"] < report["format_1_state_bytes_per_turn"]
    assert abs(report["file_bytes_per_turn"] * 20 - report["file_bytes"]) <= 20


def test_a_journal_of_layout_1_is_measured_and_the_report_written(tmp_path: Path) -> None:
    path = _journal(tmp_path)
    to_layout_1(path)
    out = tmp_path / "size.json"
    assert main([str(tmp_path), "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert (report["layout"], report["turns"]) == (1, 20)
    assert report["state_bytes_per_turn"] == report["format_1_state_bytes_per_turn"]
    assert main([str(tmp_path / "nowhere")]) == 2
