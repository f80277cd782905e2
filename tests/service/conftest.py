"""One shared server for the service tests that need no special settings."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.service.servers import Server, start_server


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_server(tmp_path_factory.mktemp("server"), "--workers", "2")
    yield srv
    srv.stop()
