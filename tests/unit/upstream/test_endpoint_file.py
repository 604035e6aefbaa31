"""`EndpointFile` and `EndpointPool.replace`: following published URLs, draining the old ones."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from ng_cli.servers.http import HttpClient
from ng_cli.upstream.config import VllmModelConfig, checked_url
from ng_cli.upstream.endpoint_file import EndpointFile, parse_endpoint_urls
from ng_cli.upstream.pool import EndpointPool
from ng_cli.upstream.runtime import Upstream


class Recorder:
    def __init__(self) -> None:
        self.urls: list[list[str]] = []
        self.stale: list[str] = []


def watcher(path: Path, recorder: Recorder, *, grace_s: float = 10.0) -> EndpointFile:
    return EndpointFile(
        str(path),
        check_interval_s=1.0,
        stale_grace_s=grace_s,
        check_url=checked_url,
        on_urls=recorder.urls.append,
        on_stale=recorder.stale.append,
    )


def test_parse_skips_blank_lines_and_comments() -> None:
    text = "# engines\nhttp://a:8000/v1/\n\n  http://b:8000/v1  # second\n"
    assert parse_endpoint_urls(text, checked_url) == ["http://a:8000/v1", "http://b:8000/v1"]


def test_new_content_is_reported_once_per_change(tmp_path: Path) -> None:
    path = tmp_path / "endpoint"
    path.write_text("http://a:8000/v1\n")
    recorder = Recorder()
    file = watcher(path, recorder)
    file.check(now=0.0)
    file.check(now=1.0)  # unchanged modification time: not re-read
    path.write_text("http://b:8000/v1\n")
    os.utime(path, ns=(1, 10**18))
    file.check(now=2.0)
    assert recorder.urls == [["http://a:8000/v1"], ["http://b:8000/v1"]]


def test_missing_file_is_given_up_after_the_grace_only(tmp_path: Path) -> None:
    recorder = Recorder()
    file = watcher(tmp_path / "absent", recorder, grace_s=5.0)
    file.check(now=0.0)
    file.check(now=4.0)
    assert recorder.stale == []
    file.check(now=6.0)
    file.check(now=7.0)
    assert len(recorder.stale) == 1
    assert "endpoint_stale_grace_s=5" in recorder.stale[0]


def test_bad_content_keeps_the_last_urls(tmp_path: Path) -> None:
    path = tmp_path / "endpoint"
    path.write_text("localhost:8000\n")
    recorder = Recorder()
    watcher(path, recorder).check(now=0.0)
    assert recorder.urls == []


def test_bad_content_keeps_the_last_good_urls_past_the_grace_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "endpoint"
    path.write_text("http://a:8000/v1\n")
    recorder = Recorder()
    file = watcher(path, recorder, grace_s=5.0)
    file.check(now=0.0)
    path.write_text("<html>502 Bad Gateway</html>\n")  # a trainer wrote garbage
    os.utime(path, ns=(1, 10**18))
    with caplog.at_level(logging.ERROR, logger="ng_cli.upstream"):
        for now in (1.0, 10.0, 100.0, 1000.0):
            file.check(now=now)
    assert recorder.urls == [["http://a:8000/v1"]]
    assert recorder.stale == []  # the last good URLs stay: garbage is not a rotation
    errors = [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]
    assert len(errors) == 1  # once per change of the file
    assert "keeping the last good endpoints ['http://a:8000/v1']" in errors[0]
    assert "expected an http(s) URL" in errors[0]
    path.write_text("http://b:8000/v1\n")  # fixed: followed again
    os.utime(path, ns=(1, 2 * 10**18))
    file.check(now=1001.0)
    assert recorder.urls[-1] == ["http://b:8000/v1"]
    path.unlink()  # and a rotation after garbage still has its grace
    file.check(now=1002.0)
    file.check(now=1008.0)
    assert len(recorder.stale) == 1


def test_a_url_listed_twice_is_served_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "endpoint"
    path.write_text("http://a:8000/v1\nhttp://b:8000/v1\nhttp://A:8000/v1/\nhttp://b:8000/v1\n")
    recorder = Recorder()
    with caplog.at_level(logging.WARNING, logger="ng_cli.upstream"):
        watcher(path, recorder).check(now=0.0)
    assert recorder.urls == [["http://a:8000/v1", "http://b:8000/v1"]]
    assert "lists http://a:8000/v1 (line 3) and http://b:8000/v1 (line 4) again" in caplog.text


def test_one_endpoint_with_two_passwords_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "endpoint"
    path.write_text("http://a:8000/v1\n")
    recorder = Recorder()
    file = watcher(path, recorder)
    file.check(now=0.0)
    path.write_text("http://u:one@a:8000/v1\nhttp://u:two@a:8000/v1\n")
    os.utime(path, ns=(1, 10**18))
    file.check(now=1.0)
    assert recorder.urls == [["http://a:8000/v1"]]


def test_duplicates_in_the_file_make_one_metric_series(tmp_path: Path) -> None:
    path = tmp_path / "endpoint"
    path.write_text("http://127.0.0.1:9/v1\nhttp://127.0.0.1:9/v1/\nhttp://localhost:9/v1\n")
    config = VllmModelConfig.model_validate(
        {
            "base_url": "http://127.0.0.1:8/v1",
            "api_key": "k",
            "model": "m",
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
            "endpoint_file": str(path),
        }
    )
    upstream = Upstream(config, HttpClient(), server="policy_model")
    assert upstream.endpoint_file is not None
    upstream.endpoint_file.check()
    assert [e.base_url for e in upstream.pool.endpoints] == ["http://127.0.0.1:9/v1", "http://localhost:9/v1"]
    exposition = generate_latest(upstream.metrics.registry).decode()
    healthy = [line for line in exposition.splitlines() if line.startswith("ng_model_endpoint_healthy{")]
    assert len(healthy) == 2


def test_replace_drains_the_old_endpoint_and_moves_its_sessions() -> None:
    pool = EndpointPool(["http://a/v1"])
    old = pool.route("s1")
    assert old is not None
    pool.begin(old)  # a request in flight on the old endpoint
    added, retired = pool.replace(["http://b/v1"])
    assert [e.base_url for e in added] == ["http://b/v1"]
    assert retired == [old]
    moved = pool.route("s1")
    assert moved is not None
    assert moved.base_url == "http://b/v1"
    assert pool.failovers == 0  # a move, not a failure
    pool.end(old)  # the in-flight request finishes on the old one
    assert old.in_flight == 0
    assert old.is_retired
    assert not pool.record_probe_success(old, now=1e9)  # a retired endpoint never rejoins


def test_replace_keeps_the_state_of_listed_urls_and_can_empty_the_pool() -> None:
    pool = EndpointPool(["http://a/v1", "http://b/v1"])
    a = pool.endpoints[0]
    pool.replace(["http://a/v1"])
    assert pool.endpoints == (a,)
    pool.replace([], reason="endpoint file unpublished")
    assert pool.route("s") is None
    assert pool.describe_down() == "endpoint file unpublished"


@pytest.mark.parametrize(("retries", "attempts"), [(8, 9), (None, 3)])
def test_connection_retries_bound_attempts_with_an_endpoint_file(retries: int | None, attempts: int) -> None:
    config = VllmModelConfig.model_validate(
        {
            "base_url": "http://a/v1",
            "api_key": "k",
            "model": "m",
            "return_token_id_information": False,
            "uses_reasoning_parser": False,
            "endpoint_file": "/tmp/endpoint",
            "endpoint_connection_retries": retries,
        }
    )
    assert config.retry_policy().max_attempts == attempts
