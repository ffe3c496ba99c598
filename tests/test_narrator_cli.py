"""`loopx story`, `loopx board` (and `--serve`) and `loopx preview` as a user runs them: real
processes on a file workspace, JSON output, exit codes, and nothing written on a refusal."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from helpers import head_seq as head
from helpers import research_workspace, served_board
from helpers import run_loopx as loopx

from loopx.research.decisions import decide
from loopx.testing.research import CONTRACT, ResearchLoop
from loopx.work.agents import register_agent
from loopx.workspace import find_workspace

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


@pytest.fixture
def ws(tmp_path: Path) -> dict[str, Any]:
    root = tmp_path / "ws"
    r = research_workspace(root, "narr-cli")
    ledger, owner = r.ledger, r.owner
    r.contract(CONTRACT)
    r.supported("h1", [0.93, 0.94, 0.95], [0.92, 0.93, 0.94], title="Wider hidden layer")
    decide(ledger, r.agents["ev"], "h1", "promoted", decision_id="d1")
    _, narrator = register_agent(ledger, owner, "narr", "product_narrator")
    ledger.store.close()
    return {"root": root, "out": tmp_path, "owner": owner.token, "narr": narrator,
            "r": r}


def test_story_prints_and_records_nothing(ws: dict[str, Any]) -> None:
    before = head(ws["root"])
    result = loopx(ws["root"], "story")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("# Research case\n")
    assert "## What was promoted, and why" in result.stdout
    assert "first screen held back" in result.stderr
    as_json = json.loads(loopx(ws["root"], "story", "--format", "html", "--json").stdout)
    assert as_json["text"].startswith("<!DOCTYPE html>")
    assert as_json["head"]["seq"] == before
    assert as_json["first_screen"]["status"] == "held_back"
    assert {"value": 0.9, "record_id": as_json["numbers"][0]["record_id"],
            "field": "metric.baseline"} == as_json["numbers"][0]
    logged = [n for n in as_json["numbers"] if "derived" not in n]
    derived = [n for n in as_json["numbers"] if "derived" in n]
    assert all(n["record_id"].startswith("rec_") for n in logged)
    # The figures the story computes are listed with their formula and recorded inputs.
    assert {n["derived"] for n in derived} == {"expected_false_promotions",
                                               "benjamini_hochberg_passes"}
    assert all(i["record_id"].startswith("rec_") for n in derived for i in n["inputs"])
    assert head(ws["root"]) == before


def test_publish_preview_approve_publish_and_verify_the_anchor(ws: dict[str, Any]) -> None:
    root, out = ws["root"], ws["out"]
    story = out / "story.md"
    first = loopx(root, "story", "--out", str(story), "--agent-id", "narr", "--json",
                  token=ws["narr"])
    assert first.returncode == 0, first.stdout + first.stderr
    published = json.loads(first.stdout)
    assert published["first_screen"]["status"] == "held_back"
    assert published["output_sha256"] == __import__("hashlib").sha256(
        story.read_bytes()).hexdigest()

    shown = loopx(root, "preview", "--agent-id", "narr", "--preview-id", "pv-1",
                  token=ws["narr"])
    assert shown.returncode == 0, shown.stderr
    assert "headline: Promoted: Wider hidden layer." in shown.stdout
    pending = json.loads(loopx(root, "approvals", "--json").stdout)
    assert any(p["subject"] == {"kind": "preview", "id": "pv-1"} for p in pending["pending"])
    approved = loopx(root, "approve", "pv-1", "--note", "reviewed", "--agent-id", "owner",
                     token=ws["owner"])
    assert approved.returncode == 0, approved.stderr

    second = loopx(root, "story", "--out", str(story), "--agent-id", "narr", token=ws["narr"])
    assert second.returncode == 0, second.stderr
    assert "first screen approved change" in second.stdout
    text = story.read_text()
    assert text.startswith("# digits\n\n> Promoted: Wider hidden layer.")
    board = out / "board.html"
    assert loopx(root, "board", "--out", str(board), "--agent-id", "narr",
                 token=ws["narr"]).returncode == 0
    assert "Promoted: Wider hidden layer." in board.read_text()

    anchor = re.search(r"loopx verify --expect (\d+:[0-9a-f]{64})", text).group(1)
    checked = loopx(root, "verify", "--expect", anchor, "--json")
    assert checked.returncode == 0, checked.stdout
    assert json.loads(checked.stdout)["ok"] is True


def test_a_planted_secret_blocks_publication_and_is_never_echoed(ws: dict[str, Any]) -> None:
    root = ws["root"]
    ledger = find_workspace(root).ledger()
    r: ResearchLoop = ws["r"]
    r.ledger = ledger
    r.propose("h-leak", title=f"reuse {AWS_KEY} from the lab")
    record_id = ledger.state()["lanes"]["hypotheses"]["h-leak"]["record_id"]
    ledger.store.close()
    before = head(root)
    story = ws["out"] / "story.md"
    result = loopx(root, "story", "--out", str(story), "--agent-id", "narr", "--json",
                   token=ws["narr"])
    assert result.returncode == 10
    error = json.loads(result.stdout)
    assert error["error"] == "redaction"
    assert {"record_id": record_id, "field": "title",
            "problem": "looks like an AWS access key id"} in error["findings"]
    assert AWS_KEY not in result.stdout + result.stderr
    assert not story.exists() and head(root) == before
    text = loopx(root, "board")
    assert text.returncode == 10 and text.stdout == ""
    assert f"{record_id} title: looks like an AWS access key id" in text.stderr
    assert "Traceback" not in text.stderr and AWS_KEY not in text.stderr


def test_bad_requests_are_usage_errors_and_write_nothing(ws: dict[str, Any]) -> None:
    root = ws["root"]
    before = head(root)
    no_agent = loopx(root, "story", "--out", str(ws["out"] / "s.md"), "--json")
    assert no_agent.returncode == 2
    assert "--agent-id" in json.loads(no_agent.stdout)["message"]
    assert loopx(root, "story", "--format", "pdf").returncode == 2
    through_file = loopx(root, "story", "--out", str(root / "AGENTS.md" / "s.md"),
                         "--agent-id", "narr", token=ws["narr"])
    assert through_file.returncode == 2 and "is a file, not a directory" in through_file.stderr
    both = loopx(root, "board", "--serve", "--out", "b.html")
    assert both.returncode == 2
    wrong_role = loopx(root, "story", "--out", str(ws["out"] / "s.md"), "--agent-id", "owner",
                       token=ws["owner"])
    assert wrong_role.returncode == 7, wrong_role.stderr
    assert head(root) == before and sorted(p.name for p in ws["out"].iterdir()) == ["ws"]


def test_board_serve_refreshes_as_the_log_grows(ws: dict[str, Any]) -> None:
    root = ws["root"]
    with served_board(root) as url:
        assert url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(url, timeout=30) as page:
            html = page.read().decode()
        assert 'data-column="promotion"' in html and "fetch('/head?after='" in html
        with urllib.request.urlopen(url + "head", timeout=30) as answer:
            seen = json.loads(answer.read())["head_seq"]
        assert seen == head(root)
        ledger = find_workspace(root).ledger()
        r: ResearchLoop = ws["r"]
        r.ledger = ledger
        r.propose("h-new", title="A newer idea")
        ledger.store.close()
        with urllib.request.urlopen(url + "head", timeout=30) as answer:
            assert json.loads(answer.read())["head_seq"] == head(root) > seen
        # The page's long poll: answered as soon as the head is past what it saw.
        with urllib.request.urlopen(url + f"head?after={seen}", timeout=30) as answer:
            assert json.loads(answer.read())["head_seq"] == head(root)
        with urllib.request.urlopen(url, timeout=30) as page:
            assert "A newer idea" in page.read().decode()


def _get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=True)
        for name, value in headers.items():
            conn.putheader(name, value)
        conn.endheaders()
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read().decode()
    finally:
        conn.close()


def test_board_serve_answers_its_own_page_only(ws: dict[str, Any]) -> None:
    """A page on another site cannot read the served board: not by pointing its own name at
    127.0.0.1 (DNS rebinding: the browser sends that name as Host), nor by asking from the
    visitor's browser (its Origin); and the page the server does answer runs no script but its
    reloader, whose hash the policy names."""
    import base64
    import hashlib

    root = ws["root"]
    with served_board(root) as url:
        port = int(url.rsplit(":", 1)[1].strip("/"))
        own = f"127.0.0.1:{port}"
        for path in ("/", "/head", "/head?after=0"):
            for headers in ({"Host": f"attacker.example:{port}"}, {"Host": "127.0.0.1"},
                            {"Host": f"localhost.attacker.example:{port}"}):
                status, _, body = _get(port, path, headers)
                assert status == 421, (path, headers)
                assert "Wider hidden layer" not in body and "head_seq" not in body
            for origin in ("http://attacker.example", "null", f"https://{own}"):
                status, _, body = _get(port, path, {"Host": own, "Origin": origin})
                assert status == 403, (path, origin)
                assert "Wider hidden layer" not in body and "head_seq" not in body
        status, _, _ = _get(port, "/head", {"Host": own, "Origin": f"http://{own}"})
        assert status == 200  # the page's own fetch
        for host in (own, f"localhost:{port}", f"LOCALHOST:{port}"):
            status, headers, page = _get(port, "/", {"Host": host})
            assert status == 200 and "Wider hidden layer" in page
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["X-Frame-Options"] == "DENY"
        policy = headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
        [script] = re.findall(r"<script>(.*?)</script>", page, re.S)
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"script-src 'sha256-{digest}'" in policy
        assert "Content-Security-Policy" not in page  # the header's policy alone: it allows it
        _, headers, _ = _get(port, "/head", {"Host": own})
        assert headers["Content-Security-Policy"] == "default-src 'none'; frame-ancestors 'none'"


def test_printed_and_published_pages_carry_a_policy_that_runs_no_script(
        ws: dict[str, Any]) -> None:
    root = ws["root"]
    policy = ('<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
              "style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'\">")
    board = loopx(root, "board")
    story = loopx(root, "story", "--format", "html")
    published = loopx(root, "board", "--out", str(ws["out"] / "b.html"), "--agent-id", "narr",
                      token=ws["narr"])
    assert board.returncode == story.returncode == published.returncode == 0, published.stderr
    for page in (board.stdout, story.stdout, (ws["out"] / "b.html").read_text()):
        head = page.split("</head>", 1)[0]
        assert policy in head and "<script" not in page


def test_board_serve_renders_once_per_head(ws: dict[str, Any],
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every reader's page reloads when a record lands, and asks for the same board: it is
    rendered once for each head, and again as soon as the head moves."""
    import threading

    import loopx.narrator.publish as publish
    from loopx.cli.board_server import make_server

    renders: list[int] = []
    real = publish.render

    def counted(*args: Any, **kwargs: Any) -> Any:
        renders.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(publish, "render", counted)
    root = ws["root"]
    server = make_server(find_workspace(root))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        pages = []
        for _ in range(3):
            with urllib.request.urlopen(url, timeout=30) as page:
                pages.append(page.read().decode())
        assert len(renders) == 1 and pages[0] == pages[1] == pages[2]
        ledger = find_workspace(root).ledger()
        r: ResearchLoop = ws["r"]
        r.ledger = ledger
        r.propose("h-new", title="A newer idea")
        ledger.store.close()
        with urllib.request.urlopen(url, timeout=30) as page:
            assert "A newer idea" in page.read().decode()
        assert len(renders) == 2
        assert f'content="{head(root)}"' in urllib.request.urlopen(url, timeout=30).read().decode()
        assert len(renders) == 2
    finally:
        server.shutdown()
        server.server_close()
